package aggregate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/eventstore"
)

// gatedStore holds every append until the test lets it through.
type gatedStore struct {
	eventstore.Store
	gate chan struct{}
}

func (g *gatedStore) Append(ctx context.Context, stream string, expect eventstore.ExpectedVersion, evs []eventstore.NewEvent) (eventstore.AppendResult, error) {
	<-g.gate
	return g.Store.Append(ctx, stream, expect, evs)
}

// A command refused because of another command's events must not be
// answered before those events are stored: until then a read still shows
// the state without them, and the history is not linearizable (found by
// TestLinearizableOverHTTP in services/flights/httpapi). Here deposit 1
// is being appended while deposit 2 and then a withdrawal expecting
// version 2 queue; the runtime decides both in one batch, after deposit 1,
// so the withdrawal's conflict (actual version 3) rests on deposit 2. It
// must not be answered before a read can see version 3.
func TestRefusalWaitsForTheEventsItRestsOn(t *testing.T) {
	store := &gatedStore{Store: openStore(t), gate: make(chan struct{})}
	rt := newRuntime(t, store, definition(), aggregate.Options{})
	released := false
	t.Cleanup(func() { // runs before the runtime's Close
		if !released {
			close(store.gate)
		}
	})
	ctx := context.Background()
	go func() { store.gate <- struct{}{} }()
	mustExec(t, rt, "a", open{Owner: "a"}) // version 1

	results := make(chan error, 3)
	exec := func(cmd any, opts ...aggregate.Option) {
		go func() {
			_, err := rt.Execute(ctx, "a", cmd, opts...)
			results <- err
		}()
	}
	exec(deposit{Amount: 1}) // in flight, held at the gate
	time.Sleep(50 * time.Millisecond)
	exec(deposit{Amount: 2}) // queued
	time.Sleep(50 * time.Millisecond)
	exec(withdraw{Amount: 1}, aggregate.WithExpectedVersion(2)) // queued after it
	time.Sleep(50 * time.Millisecond)

	store.gate <- struct{}{} // deposit 1 stored: version 2
	// The runtime now decides deposit 2 (version 3, not yet stored) and
	// the withdrawal, which expects 2.
	var conflict error
	select {
	case err := <-results:
		if err != nil {
			t.Fatalf("deposit 1: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("deposit 1 not answered")
	}
	select {
	case conflict = <-results:
	case <-time.After(300 * time.Millisecond):
	}
	if conflict != nil {
		var ce *eventstore.ConflictError
		if !errors.As(conflict, &ce) {
			t.Fatalf("withdrawal: %v", conflict)
		}
		_, v, err := rt.State(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if v < ce.Actual {
			t.Fatalf("the conflict reported version %d while the aggregate is readable at %d: it rests on events not yet stored", ce.Actual, v)
		}
	}
	close(store.gate) // deposit 2 stored
	released = true
	for range 2 - btoi(conflict != nil) {
		select {
		case <-results:
		case <-time.After(5 * time.Second):
			t.Fatal("a command was not answered")
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
