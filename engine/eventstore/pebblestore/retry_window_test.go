package pebblestore_test

import (
	"context"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
)

func evs(ids ...eventstore.ID) []eventstore.NewEvent {
	out := make([]eventstore.NewEvent, len(ids))
	for i, id := range ids {
		out[i] = eventstore.NewEvent{ID: id, Type: "T", Data: []byte("{}")}
	}
	return out
}

// A retry of an exact-expected-version append whose ids are only partly in
// the recent-id table (the table's eviction cut through the append) must be
// recognized as a duplicate: "Retries with an exact expected version are
// recognized whatever their age."
func TestRetryStraddlingRecentTable(t *testing.T) {
	ctx := context.Background()
	s, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true, RecentIDs: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a1, a2 := eventstore.NewID(), eventstore.NewID()
	first, err := s.Append(ctx, "a", eventstore.NoStream, evs(a1, a2))
	if err != nil {
		t.Fatal(err)
	}
	// Two more events push a1 (not a2) out of the 3-slot table.
	if _, err := s.Append(ctx, "b", eventstore.NoStream, evs(eventstore.NewID(), eventstore.NewID())); err != nil {
		t.Fatal(err)
	}
	res, err := s.Append(ctx, "a", eventstore.NoStream, evs(a1, a2))
	if err != nil {
		t.Fatalf("retry of a stored append failed: %v", err)
	}
	if !res.Duplicate || res.FirstPosition != first.FirstPosition {
		t.Fatalf("retry: got %+v, want duplicate of %+v", res, first)
	}
}
