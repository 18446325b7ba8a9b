package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/backend"
)

// Deleting and expiring (eventstore.Deleter).
//
// A removal is logical first: DeleteStream and TruncateStream go through
// the sequencer, like appends, and write the stream's state under its x
// key — its truncation point (the first seq still visible; every seq for
// a hard delete), its mode, its version — together with a q key marking
// it as pending reclaim. That batch is applied with a synchronous commit,
// so the state is durable before any reader can see it, and the
// sequencer then publishes the pending streams' truncation points in
// memory (pending), which reads of the whole log and of tags filter
// with. Stream reads start at the truncation point read from the x key.
//
// The sweep reclaims the space: for each pending stream it deletes, in
// batches of SweepBatch events at most SweepRate events a second, the
// events below the truncation point (point deletes sized for Pebble's
// compaction heuristics), their tag index keys and, with one range
// delete, their stream index keys; it records in the floor key the
// highest position it removed, so that a restart never hands out a
// removed position again even when the removed events were the last of
// the log. Once a stream has nothing below its truncation point left, its
// q key goes and it leaves pending. After a pass that removed events,
// manual compactions of the range they spanned give the disk space back,
// a chunk of files at a time, paced so that they write at most
// SweepCompactRate bytes a second (compactRemoved).
//
// stateMu serializes the writers of x, q and the floor: the sequencer
// holds it from deciding a removal to publishing it, the sweep while it
// reads a truncation point and applies the deletes it allows.

const (
	prefixState     = 'x' // x <stream> -> mode:1, truncate-before uvarint, version uvarint
	prefixPending   = 'q' // q <stream> -> empty: removed events still take space
	prefixRetention = 'r' // r s|p <name> -> max age (ns) uvarint, max count uvarint
)

var floorKey = []byte("mfloor")

// tombBit marks a hard-deleted stream's version in the sequencer's cache.
const tombBit = uint64(1) << 63

type streamState struct {
	mode    eventstore.DeleteMode // 0: not deleted
	before  uint64                // first visible seq (0 or 1: all)
	version uint64                // the stream's version when the state was written
}

func stateKey(dst []byte, stream string) []byte {
	return append(append(dst, prefixState), stream...)
}

func pendingKey(dst []byte, stream string) []byte {
	return append(append(dst, prefixPending), stream...)
}

func retentionKey(r eventstore.Retention) []byte {
	if r.Stream != "" {
		return append([]byte{prefixRetention, 's'}, r.Stream...)
	}
	return append([]byte{prefixRetention, 'p'}, r.Prefix...)
}

func encodeState(st streamState) []byte {
	b := []byte{byte(st.mode)}
	b = binary.AppendUvarint(b, st.before)
	return binary.AppendUvarint(b, st.version)
}

func decodeState(b []byte) (streamState, error) {
	if len(b) < 1 {
		return streamState{}, fmt.Errorf("%w: empty stream state", errCorrupt)
	}
	st := streamState{mode: eventstore.DeleteMode(b[0])}
	r := reader{b: b[1:]}
	st.before = r.uvarint()
	st.version = r.uvarint()
	if r.err != nil {
		return streamState{}, fmt.Errorf("%w: stream state: %v", errCorrupt, r.err)
	}
	return st, nil
}

// loadState reads the stream's state; the zero state if it has none.
func (s *Store) loadState(stream string) (streamState, error) {
	v, closer, err := s.db.Get(stateKey(nil, stream))
	if errors.Is(err, pebble.ErrNotFound) {
		return streamState{}, nil
	}
	if err != nil {
		return streamState{}, err
	}
	defer closer.Close()
	return decodeState(v)
}

// pendingMap is the truncation point of every stream whose removed events
// may still be stored; readers of the log skip events below it. It is
// never modified in place: a change publishes a copy.
func (s *Store) pendingMap() map[string]uint64 {
	if p := s.pending.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *Store) setPending(stream string, before uint64) {
	m := maps.Clone(s.pendingMap())
	if m == nil {
		m = make(map[string]uint64)
	}
	if before == 0 {
		delete(m, stream)
	} else {
		m[stream] = before
	}
	s.pending.Store(&m)
}

// hidden reports whether ev is removed according to p.
func hidden(p map[string]uint64, ev *eventstore.Event) bool {
	if len(p) == 0 {
		return false
	}
	b, ok := p[ev.Stream]
	return ok && ev.Seq < b
}

// loadPending fills pending from the q keys and the floor from its key;
// Open calls it.
func (s *Store) loadPending() (uint64, error) {
	var floor uint64
	if v, closer, err := s.db.Get(floorKey); err == nil {
		if len(v) == 8 {
			floor = be64(v)
		}
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return 0, err
	}
	s.floor.Store(floor)
	iter, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixPending}, UpperBound: []byte{prefixPending + 1}})
	if err != nil {
		return 0, err
	}
	m := make(map[string]uint64)
	for ok := iter.First(); ok; ok = iter.Next() {
		stream := string(iter.Key()[1:])
		st, err := s.loadState(stream)
		if err != nil {
			_ = iter.Close()
			return 0, err
		}
		m[stream] = st.visibleFrom()
	}
	if err := iter.Close(); err != nil {
		return 0, err
	}
	s.pending.Store(&m)
	return floor, nil
}

// visibleFrom is the first seq readers see.
func (st streamState) visibleFrom() uint64 {
	if st.mode == eventstore.DeleteHard {
		return ^uint64(0)
	}
	return max(st.before, 1)
}

type opKind uint8

const (
	opDelete opKind = iota + 1
	opTruncate
)

// stateOp is a removal on its way through the sequencer.
type stateOp struct {
	kind   opKind
	mode   eventstore.DeleteMode
	before uint64
}

// DeleteStream implements eventstore.Deleter.
func (s *Store) DeleteStream(ctx context.Context, stream string, mode eventstore.DeleteMode) error {
	if err := s.limits.ValidateStreamID(stream); err != nil {
		return fmt.Errorf("delete stream: %w", err)
	}
	if mode != eventstore.DeleteSoft && mode != eventstore.DeleteHard {
		return fmt.Errorf("delete stream %q: unknown mode %v", stream, mode)
	}
	_, err := s.enqueue(ctx, &appendReq{stream: stream, op: &stateOp{kind: opDelete, mode: mode}, done: make(chan struct{})})
	return err
}

// TruncateStream implements eventstore.Deleter.
func (s *Store) TruncateStream(ctx context.Context, stream string, before uint64) error {
	if err := s.limits.ValidateStreamID(stream); err != nil {
		return fmt.Errorf("truncate stream: %w", err)
	}
	_, err := s.enqueue(ctx, &appendReq{stream: stream, op: &stateOp{kind: opTruncate, before: before}, done: make(chan struct{})})
	return err
}

// admitOp decides a removal in the sequencer and adds its writes to the
// group's batch; the group ends with it. It takes stateMu, which the
// sequencer releases once the batch is applied and published.
func (s *Store) admitOp(g *group, req *appendReq) {
	g.reqs = append(g.reqs, req)
	if err := s.failure(); err != nil {
		req.err = err
		return
	}
	s.stateMu.Lock()
	g.locked = true
	cur, err := s.version(req.stream)
	if err != nil {
		req.err = fmt.Errorf("remove from %q: reading stream version: %w", req.stream, err)
		return
	}
	st, err := s.loadState(req.stream)
	if err != nil {
		req.err = fmt.Errorf("remove from %q: reading stream state: %w", req.stream, err)
		return
	}
	tomb := cur&tombBit != 0
	cur &^= tombBit
	op := req.op
	switch {
	case op.kind == opDelete && op.mode == eventstore.DeleteHard:
		st.mode, st.before = eventstore.DeleteHard, ^uint64(0)
		s.setVersion(req.stream, cur|tombBit)
	case tomb:
		req.err = fmt.Errorf("remove from %q: %w", req.stream, eventstore.ErrStreamTombstoned)
		return
	case op.kind == opDelete:
		st.mode, st.before = eventstore.DeleteSoft, max(st.before, cur+1)
	default:
		before := min(op.before, cur+1)
		if before <= st.visibleFrom() {
			return // nothing more to hide
		}
		st.before = before
	}
	st.version = cur
	if g.batch == nil {
		g.batch = s.db.NewBatch()
	}
	_ = g.batch.Set(stateKey(nil, req.stream), encodeState(st), nil)
	_ = g.batch.Set(pendingKey(nil, req.stream), nil, nil)
	if op.kind == opDelete {
		_ = g.batch.Delete(snapshotKey(nil, req.stream), nil)
	}
	g.publish = &pendingChange{stream: req.stream, before: st.visibleFrom()}
}

type pendingChange struct {
	stream string
	before uint64
}

// SetRetention implements eventstore.Deleter.
func (s *Store) SetRetention(ctx context.Context, r eventstore.Retention) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Stream != "" {
		if err := s.limits.ValidateStreamID(r.Stream); err != nil {
			return fmt.Errorf("set retention: %w", err)
		}
	} else if err := s.limits.ValidateStreamID(r.Prefix); err != nil {
		return fmt.Errorf("set retention: prefix: %w", err)
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	if err := checkCtx(ctx); err != nil {
		return err
	}
	key := retentionKey(r)
	var v []byte
	if r.MaxAge != 0 || r.MaxCount != 0 {
		v = binary.AppendUvarint(nil, uint64(r.MaxAge))
		v = binary.AppendUvarint(v, r.MaxCount)
	}
	s.retMu.Lock()
	defer s.retMu.Unlock()
	old, closer, err := s.db.Get(key)
	switch {
	case err == nil:
		same := bytes.Equal(old, v)
		_ = closer.Close()
		if same {
			return nil // unchanged: a sweep under way goes on applying it
		}
	case !errors.Is(err, pebble.ErrNotFound):
		return err
	case v == nil:
		return nil // clearing a rule that is not there
	}
	s.retGen++
	if v == nil {
		return s.db.Delete(key, s.syncOpt())
	}
	return s.db.Set(key, v, s.syncOpt())
}

func (s *Store) syncOpt() *pebble.WriteOptions {
	if s.opts.NoSync {
		return pebble.NoSync
	}
	return pebble.Sync
}

// Retentions implements eventstore.Deleter.
func (s *Store) Retentions(ctx context.Context) ([]eventstore.Retention, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	iter, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixRetention}, UpperBound: []byte{prefixRetention + 1}})
	if err != nil {
		return nil, err
	}
	var out []eventstore.Retention
	for ok := iter.First(); ok; ok = iter.Next() {
		k := iter.Key()
		if len(k) < 3 {
			continue
		}
		r := reader{b: iter.Value()}
		ret := eventstore.Retention{MaxAge: time.Duration(r.uvarint()), MaxCount: r.uvarint()}
		if r.err != nil {
			_ = iter.Close()
			return nil, fmt.Errorf("%w: retention rule %q", errCorrupt, k)
		}
		if k[1] == 's' {
			ret.Stream = string(k[2:])
		} else {
			ret.Prefix = string(k[2:])
		}
		out = append(out, ret)
	}
	return out, iter.Close()
}

// Sweep implements eventstore.Deleter: one pass of the background work.
func (s *Store) Sweep(ctx context.Context) (eventstore.SweepStats, error) {
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
	var stats eventstore.SweepStats
	s.retMu.RLock()
	gen := s.retGen
	rules, err := s.Retentions(ctx)
	s.retMu.RUnlock()
	if err != nil {
		return stats, err
	}
	for _, r := range rules {
		n, err := s.applyRetention(ctx, r, gen)
		stats.Truncated += n
		if err != nil {
			return stats, fmt.Errorf("retention of %s: %w", ruleName(r), err)
		}
	}
	streams := slices.Sorted(maps.Keys(s.pendingMap()))
	var lo, hi uint64 // the positions removed span lo..hi
	for _, stream := range streams {
		for {
			n, done, span, err := s.reclaim(ctx, stream)
			stats.Removed += n
			if n > 0 {
				if lo == 0 || span[0] < lo {
					lo = span[0]
				}
				hi = max(hi, span[1])
			}
			if err != nil {
				return stats, err
			}
			if done {
				break
			}
			if err := s.sweepPause(ctx, n); err != nil {
				return stats, err
			}
		}
	}
	stats.Pending = len(s.pendingMap())
	if stats.Removed > 0 {
		if err := s.compactRemoved(ctx, lo, hi); err != nil {
			return stats, fmt.Errorf("compacting positions %d-%d: %w", lo, hi, err)
		}
	}
	return stats, nil
}

// compactRemoved compacts the event keys of positions lo..hi, which the
// pass removed events from, so that the files holding them are rewritten
// without them and the disk space comes back. Removals spread over the
// log make that range most of the log, so it goes a chunk at a time:
// consecutive files of the level holding most of the range, about
// SweepCompactRate bytes of them (one file at least), each chunk one
// manual compaction, followed by a pause as long as moving what that
// compaction read and wrote at SweepCompactRate bytes a second takes —
// after the last chunk too, so that passes in a row keep the rate. What
// it read and wrote is Pebble's own count for flushes and compactions
// (background ones that ran meanwhile among them, so the pass only errs
// on the slow side).
//
// A step cannot be throttled inside Pebble, and it may be larger than
// its chunk: the pass's point deletes reach the disk in flushed files
// that span every position they remove, and compacting one of those
// merges it with every file below that it overlaps. Removals spread over
// the whole log therefore rewrite it in the first step, and the pause
// after it is as long: the rate holds on average, and the burst is the
// size of what the removals span.
func (s *Store) compactRemoved(ctx context.Context, lo, hi uint64) error {
	start, end := eventKey(nil, lo), eventKey(nil, hi+1)
	chunks, err := s.compactChunks(start, end)
	if err != nil {
		return err
	}
	for _, c := range chunks {
		if err := s.enter(); err != nil {
			return err
		}
		before := s.compactionIO()
		t0 := time.Now()
		err := s.db.Compact(ctx, c.start, c.end, false)
		moved := s.compactionIO() - before
		s.leave()
		if err != nil {
			return err
		}
		pause := time.Duration(float64(moved)/float64(s.opts.SweepCompactRate)*float64(time.Second)) - time.Since(t0)
		if err := s.pauseFor(ctx, pause); err != nil {
			return err
		}
	}
	return nil
}

type compactChunk struct {
	start, end []byte
}

// compactChunks splits start..end at file boundaries into chunks of about
// SweepCompactRate bytes, going by the level with the most bytes in it.
func (s *Store) compactChunks(start, end []byte) ([]compactChunk, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	levels, err := s.db.SSTables(pebble.WithKeyRangeFilter(start, end))
	s.leave()
	if err != nil {
		return nil, err
	}
	var files []pebble.SSTableInfo
	var most uint64
	for _, l := range levels {
		var n uint64
		for _, f := range l {
			n += f.Size
		}
		if n > most {
			most, files = n, l
		}
	}
	var chunks []compactChunk
	from := start
	var acc uint64
	for i, f := range files {
		acc += f.Size
		if acc < uint64(s.opts.SweepCompactRate) || i == len(files)-1 {
			continue
		}
		to := append(slices.Clone(f.Largest.UserKey), 0) // just after the file
		if bytes.Compare(to, end) >= 0 {
			break
		}
		if bytes.Compare(to, from) > 0 {
			chunks = append(chunks, compactChunk{start: from, end: to})
			from, acc = to, 0
		}
	}
	return append(chunks, compactChunk{start: from, end: end}), nil
}

// compactionIO is what Pebble's flushes and compactions have read and
// written, in bytes.
func (s *Store) compactionIO() uint64 {
	m := s.db.Metrics()
	var n uint64
	for _, l := range m.Levels {
		n += l.TableBytesIn + l.TableBytesRead // read
		n += l.TableBytesFlushed + l.TableBytesCompacted + l.BlobBytesFlushed + l.BlobBytesCompacted
	}
	return n
}

// pauseFor waits d, or until ctx ends or the store closes.
func (s *Store) pauseFor(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return checkCtx(ctx)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closing:
		return eventstore.ErrClosed
	}
}

func ruleName(r eventstore.Retention) string {
	if r.Stream != "" {
		return fmt.Sprintf("stream %q", r.Stream)
	}
	return fmt.Sprintf("prefix %q", r.Prefix)
}

// sweepPause spaces the sweep's batches so that it removes at most
// SweepRate events a second.
func (s *Store) sweepPause(ctx context.Context, n int) error {
	return backend.SweepPause(ctx, s.closing, n, s.opts.SweepRate)
}

// applyRetention truncates the streams r matches as far as it allows; it
// returns how many it truncated.
func (s *Store) applyRetention(ctx context.Context, r eventstore.Retention, gen uint64) (int, error) {
	if r.Stream != "" {
		ok, err := s.retain(ctx, r, gen, r.Stream)
		if ok {
			return 1, err
		}
		return 0, err
	}
	n := 0
	err := s.streamsWithPrefix(ctx, r.Prefix, func(name string) error {
		ok, err := s.retain(ctx, r, gen, name)
		if ok {
			n++
		}
		return err
	})
	return n, err
}

// streamsWithPrefix calls fn with every stream whose id starts with
// prefix (deleted ones whose index is not reclaimed yet among them), a
// page of names at a time so that no iterator stays open across fn.
func (s *Store) streamsWithPrefix(ctx context.Context, prefix string, fn func(string) error) error {
	seek := streamPrefix(nil, prefix)
	seek = seek[:len(seek)-1] // no NUL: every stream id that extends prefix
	end := prefixEnd(seek)
	for {
		if err := s.enter(); err != nil {
			return err
		}
		if err := checkCtx(ctx); err != nil {
			s.leave()
			return err
		}
		iter, err := s.db.NewIter(&pebble.IterOptions{LowerBound: seek, UpperBound: end})
		if err != nil {
			s.leave()
			return err
		}
		var names []string
		for ok := iter.First(); ok && len(names) < 1000; {
			k := iter.Key()
			names = append(names, string(k[1:len(k)-9]))
			seek = prefixEnd(k[:len(k)-8])
			ok = iter.SeekGE(seek)
		}
		err = iter.Close()
		s.leave()
		if err != nil {
			return err
		}
		for _, name := range names {
			if err := fn(name); err != nil {
				return err
			}
		}
		if len(names) < 1000 {
			return nil
		}
	}
}

// retain truncates one stream as r allows, unless the rules changed
// since the sweep read r (generation gen): the next pass applies them.
func (s *Store) retain(ctx context.Context, r eventstore.Retention, gen uint64, stream string) (bool, error) {
	now := s.now()
	s.retMu.RLock()
	defer s.retMu.RUnlock()
	if s.retGen != gen {
		return false, nil
	}
	return backend.Retain(ctx, s, s.TruncateStream, r, stream, now)
}

// reclaim removes up to SweepBatch of stream's events below its
// truncation point; done when nothing below it is left, and the stream
// has left pending. span is the lowest and highest position removed.
func (s *Store) reclaim(ctx context.Context, stream string) (n int, done bool, span [2]uint64, err error) {
	if err := s.enter(); err != nil {
		return 0, false, span, err
	}
	defer s.leave()
	if err := checkCtx(ctx); err != nil {
		return 0, false, span, err
	}
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	st, err := s.loadState(stream)
	if err != nil {
		return 0, false, span, err
	}
	before := st.visibleFrom()
	prefix := streamPrefix(nil, stream)
	upper := prefixEnd(prefix)
	if before != ^uint64(0) {
		upper = streamKey(nil, stream, before)
	}
	iter, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: upper})
	if err != nil {
		return 0, false, span, err
	}
	var positions []uint64
	var lastSeq uint64
	for ok := iter.First(); ok && len(positions) < s.opts.SweepBatch; ok = iter.Next() {
		positions = append(positions, be64(iter.Value()))
		k := iter.Key()
		lastSeq = be64(k[len(k)-8:])
	}
	more := iter.Valid()
	if err := iter.Close(); err != nil {
		return 0, false, span, err
	}
	b := s.db.NewBatch()
	defer b.Close()
	if len(positions) > 0 {
		slices.Sort(positions)
		evs, sizes, err := s.loadForDelete(positions)
		if err != nil {
			return 0, false, span, err
		}
		for i, ev := range evs {
			_ = b.DeleteSized(eventKey(nil, ev.Position), sizes[i], nil)
			for _, tag := range ev.Tags {
				_ = b.Delete(tagKey(nil, tag, ev.Position), nil)
			}
		}
		_ = b.DeleteRange(prefix, streamKey(nil, stream, lastSeq+1), nil)
		span = [2]uint64{positions[0], positions[len(positions)-1]}
		if span[1] > s.floor.Load() {
			_ = b.Set(floorKey, binary.BigEndian.AppendUint64(nil, span[1]), nil)
		}
	}
	if !more {
		_ = b.Delete(pendingKey(nil, stream), nil)
	}
	if b.Empty() {
		return 0, !more, span, nil
	}
	// No fsync: a sweep lost in a crash only leaves the events to be
	// removed again, and a later synced append syncs it along.
	if err := b.Commit(pebble.NoSync); err != nil {
		return 0, false, span, err
	}
	if span[1] > s.floor.Load() {
		s.floor.Store(span[1])
	}
	if !more {
		s.setPending(stream, 0)
	}
	return len(positions), !more, span, nil
}

// loadForDelete reads the events at ascending positions, with the size of
// each record; positions that hold nothing are left out.
func (s *Store) loadForDelete(positions []uint64) ([]eventstore.Event, []uint32, error) {
	iter, err := s.db.NewIter(eventRange(positions[0], positions[len(positions)-1]))
	if err != nil {
		return nil, nil, err
	}
	var in interner
	out := make([]eventstore.Event, 0, len(positions))
	sizes := make([]uint32, 0, len(positions))
	for _, pos := range positions {
		if !iter.SeekGE(eventKey(nil, pos)) || be64(iter.Key()[1:]) != pos {
			continue
		}
		v, err := iter.ValueAndErr()
		if err != nil {
			_ = iter.Close()
			return nil, nil, err
		}
		ev, err := decodeEvent(pos, v, &in)
		if err != nil {
			_ = iter.Close()
			return nil, nil, err
		}
		out = append(out, ev)
		sizes = append(sizes, uint32(len(v)+9))
	}
	return out, sizes, iter.Close()
}

// sweeper runs Sweep every SweepInterval until Close.
func (s *Store) sweeper() {
	defer close(s.sweepDone)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(s.opts.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
		}
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, eventstore.ErrClosed) {
			s.opts.Logger.Error("event store sweep failed", "err", err)
		}
	}
}
