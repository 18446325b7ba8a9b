package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

// TestLogCeilingAnswersAfterSync: an append returns only once it is
// synced, whether it writes its group itself (the leader) or waits for
// another's.
func TestLogCeilingAnswersAfterSync(t *testing.T) {
	cfg := AppendConfig{Events: 10, Batch: 1, Writers: 1, Payload: 10, Streams: 1}
	l, err := OpenLogCeiling(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	syncing, release := make(chan struct{}, 4), make(chan struct{})
	var released sync.Once
	releaseAll := func() { released.Do(func() { close(release) }) }
	defer func() {
		releaseAll() // a failed check must not leave Close waiting on a held sync
		l.Close()
	}()
	l.sync = func() error { syncing <- struct{}{}; <-release; return nil }
	got := make(chan eventstore.AppendResult, 3)
	appendTo := func(stream string, n int) {
		res, err := l.Append(t.Context(), stream, eventstore.Any, make([]eventstore.NewEvent, n))
		if err != nil {
			t.Error(err)
		}
		got <- res
	}
	none := func(when string) {
		t.Helper()
		select {
		case res := <-got:
			t.Fatalf("%s, an append returned: %+v", when, res)
		case <-time.After(100 * time.Millisecond):
		}
	}
	one := func() eventstore.AppendResult {
		t.Helper()
		select {
		case res := <-got:
			return res
		case <-time.After(5 * time.Second):
			t.Fatal("no append returned after its sync")
			return eventstore.AppendResult{}
		}
	}
	go appendTo("a", 2)
	<-syncing // a leads its own group and syncs
	go appendTo("b", 1)
	go appendTo("c", 1)
	none("while a's sync is held")
	for len(l.queued()) < 2 {
		time.Sleep(time.Millisecond)
	}
	release <- struct{}{}
	if a := one(); a.Stream != "a" || a.FirstSeq != 1 || a.LastSeq != 2 || a.FirstPosition != 1 || a.LastPosition != 2 {
		t.Errorf("a: %+v", a)
	}
	<-syncing // b or c leads the group of both
	none("while the second group's sync is held")
	releaseAll()
	b, c := one(), one()
	if b.LastPosition+c.LastPosition != 3+4 || b.FirstSeq != 1 || c.FirstSeq != 1 {
		t.Errorf("b and c: %+v %+v", b, c)
	}
	if n := l.Fsyncs(); n != 2 {
		t.Errorf("%d syncs, want 2", n)
	}
}

// TestLogCeilingWritesEveryEvent runs the workload on the ceiling and
// reads its file back: every event is there once, checksummed, in groups
// of appends synced together.
func TestLogCeilingWritesEveryEvent(t *testing.T) {
	cfg := AppendConfig{Events: 3000, Batch: 3, Writers: 16, Payload: 40, Streams: 5}
	l, err := OpenLogCeiling(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// A sync that takes a while, as a disk's does (the test's directory
	// may be in memory): appends queue behind it and share the next.
	fsync := l.sync
	l.sync = func() error { time.Sleep(200 * time.Microsecond); return fsync() }
	r, err := RunAppend(t.Context(), l, cfg, l.Fsyncs)
	if err != nil {
		t.Fatal(err)
	}
	if r.Fsyncs == nil || *r.Fsyncs == 0 || *r.Fsyncs > uint64(r.Appends)/2 {
		t.Errorf("%v syncs for %d appends from %d writers: no group commit", *r.Fsyncs, r.Appends, cfg.Writers)
	}
	data, err := os.ReadFile(l.f.Name())
	if err != nil {
		t.Fatal(err)
	}
	ids := map[eventstore.ID]bool{}
	off := 0
	for off+8 <= len(data) {
		n := int(binary.BigEndian.Uint32(data[off:]))
		if n == 0 {
			break
		}
		if n < ceilingRecord || off+n > len(data) {
			t.Fatalf("record at %d: length %d", off, n)
		}
		rec := data[off : off+n]
		if crc32.ChecksumIEEE(rec[8:]) != binary.BigEndian.Uint32(rec[4:]) {
			t.Fatalf("record at %d: bad checksum", off)
		}
		var id eventstore.ID
		copy(id[:], rec[8:24])
		if ids[id] {
			t.Fatalf("event %v written twice", id)
		}
		ids[id] = true
		slen, k := binary.Uvarint(rec[24:])
		if k <= 0 || 24+k+int(slen) > n {
			t.Fatalf("record at %d: stream length %d", off, slen)
		}
		if stream := string(rec[24+k : 24+k+int(slen)]); !strings.HasPrefix(stream, "bench-") {
			t.Fatalf("record at %d: stream %q", off, stream)
		}
		off += n
	}
	if len(ids) != cfg.Events {
		t.Fatalf("%d events in the log, want %d", len(ids), cfg.Events)
	}
	ratio := AppendResult{EventsPerSec: r.EventsPerSec / 2}.WithCeiling(r)
	if *ratio.RatioToCeiling != 0.5 || *ratio.CeilingEventsPerSec != r.EventsPerSec {
		t.Errorf("WithCeiling: %+v", ratio)
	}
}

// TestLogCeilingCloseWaitsForAppends: Close returns only once the
// appends under way are answered.
func TestLogCeilingCloseWaitsForAppends(t *testing.T) {
	l, err := OpenLogCeiling(t.TempDir(), AppendConfig{Events: 10, Batch: 1, Writers: 1, Payload: 10, Streams: 1})
	if err != nil {
		t.Fatal(err)
	}
	syncing, release := make(chan struct{}, 1), make(chan struct{})
	l.sync = func() error { syncing <- struct{}{}; <-release; return nil }
	appended := make(chan error, 1)
	go func() {
		_, err := l.Append(t.Context(), "s", eventstore.Any, make([]eventstore.NewEvent, 1))
		appended <- err
	}()
	<-syncing
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		close(release)
		t.Fatalf("Close returned (%v) while an append waited for its sync", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-appended; err != nil {
		t.Errorf("the append: %v", err)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestLogCeilingRefusesWhatItCannotHold: a workload larger than the one
// the log was prepared for fails rather than growing the file, and a
// closed log refuses appends.
func TestLogCeilingRefusesWhatItCannotHold(t *testing.T) {
	cfg := AppendConfig{Events: 10, Batch: 1, Writers: 1, Payload: 10, Streams: 1}
	l, err := OpenLogCeiling(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	big := []eventstore.NewEvent{{Type: "t", Data: make([]byte, 2<<20)}}
	if _, err := l.Append(t.Context(), "s", eventstore.Any, big); err == nil || !strings.Contains(err.Error(), "outgrew") {
		t.Fatalf("an append past the prepared size: %v", err)
	}
	if _, err := l.Append(t.Context(), "s", eventstore.Any, []eventstore.NewEvent{{Type: "t"}}); err == nil {
		t.Fatal("an append after a failed write succeeded")
	}
	name := l.f.Name()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close left the log: %v", err)
	}
	if _, err := l.Append(context.Background(), "s", eventstore.Any, nil); !errors.Is(err, eventstore.ErrClosed) {
		t.Errorf("an append after Close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// queued is the appends waiting for a leader.
func (l *LogCeiling) queued() []*ceilingReq {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.queue)
}
