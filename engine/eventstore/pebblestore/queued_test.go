package pebblestore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

// TestCancelledAppendKeepsItsEvents: an append whose context ends while it
// waits in the sequencer's queue returns at once, and may still be
// written ("the append may still commit"). Its caller may then reuse its
// events slice — a retry loop rebuilding its batch in place — so what is
// written must be what the append was called with: the record and the
// indexes alike. The sequencer is held up behind a stalled WAL sync, the
// caller rewrites the event's tag and id after the append returned, and
// the disk is let go.
func TestCancelledAppendKeepsItsEvents(t *testing.T) {
	fs, stalled, release := stallingFS()
	queued := make(chan string, 1000)
	s, err := Open(t.TempDir(), Options{FS: fs, queued: func(stream string) { queued <- stream }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	if _, err := s.Append(ctx, "warm", eventstore.Any, []eventstore.NewEvent{{Type: "t"}}); err != nil {
		t.Fatal(err)
	}
	<-queued
	stalled.Store(true)
	// Appends until the sequencer stops taking them: its groups wait for
	// the sync, and then it waits to hand over the next. Each filler is
	// in the queue before the next starts; one that stays there 50 ms
	// means the sequencer has stopped.
	var wg sync.WaitGroup
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
		wg.Wait()
	}()
	deadline := time.Now().Add(time.Minute)
	for len(s.reqs) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the sequencer never stopped taking appends")
		}
		wg.Go(func() {
			_, _ = s.Append(context.Background(), "filler", eventstore.Any, []eventstore.NewEvent{{Type: "t"}})
		})
		<-queued
		time.Sleep(50 * time.Millisecond)
	}
	id := eventstore.NewID()
	events := []eventstore.NewEvent{{ID: id, Type: "t", Tags: []string{"original"}, Data: []byte("x")}}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.Append(actx, "victim", eventstore.Any, events)
		done <- err
	}()
	select {
	case <-queued:
	case err := <-done:
		t.Fatalf("the append returned before it was queued: %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled append: %v, want context.Canceled", err)
	}
	// The caller reuses its slice.
	events[0].Tags[0] = "rewritten"
	events[0].ID = eventstore.NewID()
	close(release)
	wg.Wait()

	evs, err := s.ReadStream(ctx, "victim", 1, 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("the cancelled append was not written: %d events, %v", len(evs), err)
	}
	if evs[0].ID != id || !slices.Equal(evs[0].Tags, []string{"original"}) {
		t.Errorf("written: id %s tags %q; want %s [original]", evs[0].ID, evs[0].Tags, id)
	}
	for tag, want := range map[string]int{"original": 1, "rewritten": 0} {
		got, err := s.ReadTag(ctx, tag, 1, 10)
		if err != nil || len(got) != want {
			t.Errorf("tag %q: %d events (%v), want %d", tag, len(got), err, want)
		}
	}
	// A retry of the original append is recognized by its id.
	res, err := s.Append(ctx, "victim", eventstore.Any, []eventstore.NewEvent{{ID: id, Type: "t", Tags: []string{"original"}, Data: []byte("x")}})
	if err != nil || !res.Duplicate {
		t.Errorf("retry of the written append: %+v, %v; want a duplicate", res, err)
	}
}
