package pgstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/internal/testenv"
)

// TestCancelledAppendKeepsItsEvents: an append whose context ends while it
// waits for an appender returns at once, and may still be written ("the
// append may still commit"). Its caller may then reuse its events slice —
// a retry loop rebuilding its batch in place — so what is written must be
// what the append was called with. Both appenders are held inside their
// transactions, the caller rewrites the queued event's id, tag and data
// after the append returned, and the appenders are let go.
func TestCancelledAppendKeepsItsEvents(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	held, release := make(chan struct{}, appenders), make(chan struct{})
	hold := func(ctx context.Context, stream string) error {
		if strings.HasPrefix(stream, "block") {
			held <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done(): // the store closing after a failed check
				return ctx.Err()
			}
		}
		return nil
	}
	s, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 8, beforeCommit: hold})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	defer let() // before Close, which waits for the appenders
	ctx := t.Context()
	// wait polls cond until it holds, failing after 30 s or if an append
	// that should be held returned.
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: timed out", what)
			}
		}
	}
	// The first appender waits before its commit, holding the head's
	// lock; the second waits for that lock inside its transaction.
	blocked := make(chan error, appenders)
	for i := range appenders {
		go func() {
			_, err := s.Append(context.Background(), "block-"+string(rune('a'+i)), eventstore.Any, []eventstore.NewEvent{{Type: "t"}})
			blocked <- err
		}()
		if i == 0 {
			select {
			case <-held:
			case err := <-blocked:
				t.Fatalf("the first held append returned: %v", err)
			}
		}
	}
	wait("both appenders to be busy", func() bool { return s.inFlight.Load() >= appenders })
	id := eventstore.NewID()
	events := []eventstore.NewEvent{{ID: id, Type: "t", Tags: []string{"original"}, Data: []byte("original")}}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.Append(actx, "victim", eventstore.Any, events)
		done <- err
	}()
	wait("the append to be queued", func() bool { return len(s.reqs) > 0 || len(done) > 0 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled append: %v, want context.Canceled", err)
	}
	// The caller reuses its slice.
	events[0].ID = eventstore.NewID()
	events[0].Tags[0] = "rewritten"
	copy(events[0].Data, "REWRITTEN")
	let()
	for range appenders {
		if err := <-blocked; err != nil {
			t.Fatal(err)
		}
	}
	var evs []eventstore.Event
	for deadline := time.Now().Add(10 * time.Second); len(evs) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the cancelled append was never written")
		}
		if evs, err = s.ReadStream(ctx, "victim", 1, 10); err != nil {
			t.Fatal(err)
		}
	}
	if evs[0].ID != id || !slices.Equal(evs[0].Tags, []string{"original"}) || string(evs[0].Data) != "original" {
		t.Errorf("written: id %s tags %q data %q; want %s [original] \"original\"", evs[0].ID, evs[0].Tags, evs[0].Data, id)
	}
	for tag, want := range map[string]int{"original": 1, "rewritten": 0} {
		got, err := s.ReadTag(ctx, tag, 1, 10)
		if err != nil || len(got) != want {
			t.Errorf("tag %q: %d events (%v), want %d", tag, len(got), err, want)
		}
	}
}
