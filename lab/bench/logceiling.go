package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/lab/stats"
)

// Appender is what the append workload needs of a store.
type Appender interface {
	Append(ctx context.Context, stream string, expect eventstore.ExpectedVersion, events []eventstore.NewEvent) (eventstore.AppendResult, error)
}

// LogCeiling is the least a store can do for an append and still keep
// it: each append's events — id, stream, type and data, all the
// benchmark's events carry (tags and metadata are not kept) — written to
// the end of one file prepared beforehand (so that a sync writes data and
// no file metadata, as the embedded store's spare logs do), and synced
// before the append returns. Appends that arrive while a sync is under
// way are written and synced together by one of them (group commit with a
// leader, as RocksDB's write thread does: no goroutine of its own, so a
// lone writer writes and syncs on its own goroutine). It checks no
// expected version or id, keeps no index and cannot be read back: it is
// not a store but about the most any store that syncs what it
// acknowledges could reach on this machine with the same writers, the
// embedded store's ceiling in `bench append --ceiling`.
type LogCeiling struct {
	f    *os.File
	size int64 // bytes prepared
	// sync makes what is written durable (fdatasync; tests replace it).
	sync  func() error
	syncs atomic.Uint64

	mu       sync.Mutex
	queue    []*ceilingReq // appends waiting to be written
	writing  bool          // a leader is writing a group
	closed   bool
	inflight sync.WaitGroup
	off      int64 // end of the log; touched by the leader only
	pos      uint64
	versions map[string]uint64
	failed   error
}

type ceilingReq struct {
	stream string
	n      int    // events
	recs   []byte // length-prefixed, checksummed records
	res    eventstore.AppendResult
	err    error
	// wake is closed once: when the append is written and synced, or,
	// with lead set, when it is to write the queue as the next leader.
	wake chan struct{}
	lead bool
}

// ceilingRecord is the bytes of one event in the ceiling's log besides
// its stream, type and data and their lengths: length, checksum, id,
// time.
const ceilingRecord = 4 + 4 + 16 + 8

// ceilingRecordLen is the length of an event's record in the log.
func ceilingRecordLen(stream, typ string, data int) int {
	var v [binary.MaxVarintLen64]byte
	return ceilingRecord + binary.PutUvarint(v[:], uint64(len(stream))) + len(stream) +
		binary.PutUvarint(v[:], uint64(len(typ))) + len(typ) + data
}

// ceilingBytes is the log space cfg's workload needs, with room to spare.
func ceilingBytes(cfg AppendConfig) int64 {
	stream, _ := SampleAppend(cfg)
	per := int64(ceilingRecordLen(stream, eventType, cfg.Payload))
	return (int64(cfg.Events)*per*11/10 + 1<<20) &^ (1<<20 - 1)
}

// OpenLogCeiling prepares a log for cfg's workload in dir, its zeros
// written and synced before the clock starts.
func OpenLogCeiling(dir string, cfg AppendConfig) (*LogCeiling, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("log ceiling: %w", err)
	}
	f, err := os.CreateTemp(dir, "log-ceiling-*")
	if err != nil {
		return nil, fmt.Errorf("log ceiling: %w", err)
	}
	l := &LogCeiling{f: f, size: ceilingBytes(cfg), versions: map[string]uint64{}}
	l.sync = func() error { return unix.Fdatasync(int(f.Fd())) }
	if err := prepareFile(f, l.size); err != nil {
		l.remove()
		return nil, fmt.Errorf("log ceiling: preparing %d MiB: %w", l.size>>20, err)
	}
	return l, nil
}

func (l *LogCeiling) remove() {
	_ = l.f.Close()
	_ = os.Remove(l.f.Name())
}

// Append writes events to the log and returns once they are synced. It
// numbers them per stream but checks nothing: expect is ignored. Once
// queued an append is written whatever becomes of ctx.
func (l *LogCeiling) Append(ctx context.Context, stream string, _ eventstore.ExpectedVersion, events []eventstore.NewEvent) (eventstore.AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return eventstore.AppendResult{}, err
	}
	r := &ceilingReq{stream: stream, n: len(events), wake: make(chan struct{})}
	size := 0
	for _, ev := range events {
		size += ceilingRecordLen(stream, ev.Type, len(ev.Data))
	}
	r.recs = make([]byte, 0, size)
	now := uint64(time.Now().UnixNano())
	for _, ev := range events {
		if ev.ID.IsZero() {
			ev.ID = eventstore.NewID()
		}
		start := len(r.recs)
		r.recs = binary.BigEndian.AppendUint32(r.recs, 0)
		r.recs = binary.BigEndian.AppendUint32(r.recs, 0)
		r.recs = append(r.recs, ev.ID[:]...)
		r.recs = binary.AppendUvarint(r.recs, uint64(len(stream)))
		r.recs = append(r.recs, stream...)
		r.recs = binary.AppendUvarint(r.recs, uint64(len(ev.Type)))
		r.recs = append(r.recs, ev.Type...)
		r.recs = binary.BigEndian.AppendUint64(r.recs, now)
		r.recs = append(r.recs, ev.Data...)
		rec := r.recs[start:]
		binary.BigEndian.PutUint32(rec, uint32(len(rec)))
		binary.BigEndian.PutUint32(rec[4:], crc32.ChecksumIEEE(rec[8:]))
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return eventstore.AppendResult{}, eventstore.ErrClosed
	}
	l.inflight.Add(1)
	defer l.inflight.Done()
	l.queue = append(l.queue, r)
	if l.writing {
		l.mu.Unlock()
		<-r.wake
		if !r.lead {
			return r.res, r.err
		}
		l.mu.Lock()
	}
	l.writing = true
	l.lead()
	return r.res, r.err
}

// lead writes and syncs the queue, up to maxCeilingGroup appends and
// maxCeilingGroupBytes, as one group. Called with l.mu held, it answers
// them, hands the lead to the first append queued meanwhile and returns
// with l.mu released.
func (l *LogCeiling) lead() {
	n, bytes := 0, 0
	for n < len(l.queue) && n < maxCeilingGroup && (n == 0 || bytes+len(l.queue[n].recs) <= maxCeilingGroupBytes) {
		bytes += len(l.queue[n].recs)
		n++
	}
	g := l.queue[:n]
	l.queue = append([]*ceilingReq(nil), l.queue[n:]...)
	var buf []byte
	for _, r := range g {
		v := l.versions[r.stream]
		r.res = eventstore.AppendResult{Stream: r.stream, FirstSeq: v + 1, LastSeq: v + uint64(r.n), FirstPosition: l.pos + 1, LastPosition: l.pos + uint64(r.n)}
		l.versions[r.stream] = r.res.LastSeq
		l.pos += uint64(r.n)
		if len(g) == 1 {
			buf = r.recs
		} else {
			buf = append(buf, r.recs...)
		}
	}
	err := l.failed
	l.mu.Unlock()

	if err == nil && l.off+int64(len(buf)) > l.size {
		err = fmt.Errorf("log ceiling: the workload outgrew the %d MiB prepared", l.size>>20)
	}
	if err == nil {
		_, err = l.f.WriteAt(buf, l.off)
	}
	if err == nil {
		err = l.sync()
	}
	if err == nil {
		l.syncs.Add(1)
		l.off += int64(len(buf))
	}

	l.mu.Lock()
	if err != nil && l.failed == nil {
		l.failed = err
	}
	// g[0] is the leader's own append (a queue a leader finds is empty
	// but for its own, or starts with the append handed the lead): it
	// is not waiting.
	for i, r := range g {
		r.err = err
		if i > 0 {
			close(r.wake)
		}
	}
	if len(l.queue) > 0 {
		next := l.queue[0]
		next.lead = true
		close(next.wake)
	} else {
		l.writing = false
	}
	l.mu.Unlock()
}

// A group holds at most this many appends and bytes (but always one
// append), as the store's do.
const (
	maxCeilingGroup      = 4096
	maxCeilingGroupBytes = 32 << 20
)

// Fsyncs is the number of groups synced.
func (l *LogCeiling) Fsyncs() uint64 { return l.syncs.Load() }

// Close refuses appends from now on, waits for those under way and
// removes the log's file.
func (l *LogCeiling) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.inflight.Wait()
	name := l.f.Name()
	err := l.f.Close()
	return errors.Join(err, os.Remove(name))
}

// WithCeiling adds the same workload's figures on a LogCeiling and the
// ratio of the store's events/s to its.
func (r AppendResult) WithCeiling(c AppendResult) AppendResult {
	eps, p99 := c.EventsPerSec, c.P99MS
	r.CeilingEventsPerSec, r.CeilingP99MS = &eps, &p99
	if eps > 0 {
		ratio := stats.Round(r.EventsPerSec/eps, 3)
		r.RatioToCeiling = &ratio
	}
	return r
}
