package pebblestore

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

type outcome struct {
	res  eventstore.AppendResult
	err  error
	head uint64 // the durable head when done was called
}

// asyncAppend calls AppendAsync and returns the channel its outcome comes
// on; a second call of done fails the test.
func asyncAppend(t *testing.T, s *Store, stream string, expect eventstore.ExpectedVersion, events []eventstore.NewEvent) <-chan outcome {
	out := make(chan outcome, 2)
	s.AppendAsync(stream, expect, events, func(res eventstore.AppendResult, err error) {
		out <- outcome{res, err, s.durable.Load()}
	})
	return out
}

func wait(t *testing.T, out <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-out:
		select {
		case <-out:
			t.Fatal("done was called twice")
		case <-time.After(20 * time.Millisecond):
		}
		return o
	case <-time.After(time.Minute):
		t.Fatal("done was never called")
		return outcome{}
	}
}

// openStalled opens a store whose write-ahead log syncs wait for release
// while stalled is set, which it is when the store is returned.
func openStalled(t *testing.T) (s *Store, stalled *atomic.Bool, release chan struct{}) {
	fs, stalled, release := stallingFS()
	s, err := Open(t.TempDir(), Options{FS: fs, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Append(t.Context(), "warm", eventstore.Any, []eventstore.NewEvent{{Type: "t"}}); err != nil {
		t.Fatal(err)
	}
	stalled.Store(true)
	return s, stalled, release
}

// TestAppendAsyncReportsOnceDurable: AppendAsync's done is not called
// while the write-ahead log's sync is held, and once it is, exactly once,
// with the durable head already past the events; conflicts, refusals and
// a closed store are reported through done too.
func TestAppendAsyncReportsOnceDurable(t *testing.T) {
	s, stalled, release := openStalled(t)
	events := []eventstore.NewEvent{{Type: "a", Data: []byte("1")}, {Type: "a", Data: []byte("2")}}
	out := asyncAppend(t, s, "s", eventstore.NoStream, events)
	select {
	case o := <-out:
		t.Fatalf("done called while the log's sync is held: %+v", o)
	case <-time.After(200 * time.Millisecond):
	}
	if events[0].ID.IsZero() {
		t.Error("AppendAsync did not fill in the events' ids")
	}
	stalled.Store(false)
	close(release)
	o := wait(t, out)
	if o.err != nil || o.res.FirstSeq != 1 || o.res.LastSeq != 2 || o.res.LastPosition != 3 {
		t.Fatalf("outcome %+v, %v; want seqs 1..2 at positions 2..3", o.res, o.err)
	}
	if o.head < o.res.LastPosition {
		t.Errorf("done called with the durable head at %d, before the append's last position %d", o.head, o.res.LastPosition)
	}
	evs, err := s.ReadStream(t.Context(), "s", 1, 10)
	if err != nil || len(evs) != 2 || evs[0].ID != events[0].ID {
		t.Fatalf("read back %d events, %v", len(evs), err)
	}

	// A conflict, as Append reports it.
	var conflict *eventstore.ConflictError
	if o := wait(t, asyncAppend(t, s, "s", eventstore.NoStream, []eventstore.NewEvent{{Type: "a"}})); !errors.As(o.err, &conflict) || conflict.Actual != 2 {
		t.Errorf("append expecting no stream to a stream at 2: %v, want a conflict at 2", o.err)
	}
	// A refusal, before anything is queued.
	var limit *eventstore.LimitError
	if o := wait(t, asyncAppend(t, s, "", eventstore.Any, []eventstore.NewEvent{{Type: "a"}})); !errors.As(o.err, &limit) {
		t.Errorf("append to an empty stream id: %v, want a limit error", o.err)
	}
	// Retried with the same ids: a duplicate, nothing written twice.
	if o := wait(t, asyncAppend(t, s, "s", eventstore.Exactly(0), events)); o.err != nil || !o.res.Duplicate || o.res.LastPosition != 3 {
		t.Errorf("retry: %+v, %v; want the first append's result marked duplicate", o.res, o.err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if o := wait(t, asyncAppend(t, s, "s", eventstore.Any, []eventstore.NewEvent{{Type: "a"}})); !errors.Is(o.err, eventstore.ErrClosed) {
		t.Errorf("append after Close: %v, want ErrClosed", o.err)
	}
}

// TestAppendAsyncNeverBlocks: with the log's sync held, the groups
// waiting for it fill (the syncer's channel, then the sequencer's own),
// the sequencer stops taking appends and the queue fills; AppendAsync
// still returns for every append beyond it, and once the sync goes on
// each done is called once and every event is stored.
func TestAppendAsyncNeverBlocks(t *testing.T) {
	s, stalled, release := openStalled(t)
	n := (cap(s.groups)+2)*maxGroupReqs + 3*cap(s.reqs) // more than the groups and the queue hold
	outcomes := make(chan error, n)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		for range n {
			s.AppendAsync("s", eventstore.Any, []eventstore.NewEvent{{Type: "t"}}, func(_ eventstore.AppendResult, err error) { outcomes <- err })
		}
	}()
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatalf("AppendAsync blocked: %d appends queued of %d", len(s.reqs), cap(s.reqs))
	}
	if len(outcomes) != 0 {
		t.Fatalf("%d appends answered while the sync is held", len(outcomes))
	}
	stalled.Store(false)
	close(release)
	for range n {
		select {
		case err := <-outcomes:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%d appends never answered", n-len(outcomes))
		}
	}
	if v, err := s.StreamVersion(t.Context(), "s"); err != nil || v != uint64(n) {
		t.Fatalf("stream at %d (%v), want %d", v, err, n)
	}
}
