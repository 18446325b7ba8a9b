package pebblestore

import (
	"context"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
)

// TestBatchBytes: BatchBytes is exactly what an append adds to the
// write-ahead log (Pebble's count of logical bytes in), with and without
// tags and metadata, and for payloads whose lengths need one to three
// varint bytes. Each case is a lone append, the first to its stream, as
// BatchBytes describes.
func TestBatchBytes(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cases := []struct {
		stream string
		events []eventstore.NewEvent
	}{
		{"a", []eventstore.NewEvent{{Type: "T", Data: []byte("{}")}}},
		{"bench-0123abcd-999", benchEventsOf(100)},
		{"orders-7", []eventstore.NewEvent{
			{Type: "OrderPlaced", Data: make([]byte, 300), Tags: []string{"customer-1", "region-eu"}, Meta: map[string]string{"trace": "abc"}},
			{Type: "OrderPaid", Data: make([]byte, 20000)},
		}},
	}
	for _, c := range cases {
		before := s.db.Metrics().WAL.BytesIn
		want := BatchBytes(c.stream, c.events)
		if _, err := s.Append(context.Background(), c.stream, eventstore.Any, c.events); err != nil {
			t.Fatal(err)
		}
		if got := s.db.Metrics().WAL.BytesIn - before; got != uint64(want) {
			t.Errorf("%s: the append wrote %d bytes to the log, BatchBytes says %d", c.stream, got, want)
		}
	}
}

func benchEventsOf(n int) []eventstore.NewEvent {
	evs := make([]eventstore.NewEvent, n)
	for i := range evs {
		evs[i] = eventstore.NewEvent{ID: eventstore.NewID(), Type: "bench.Event", Data: make([]byte, 100)}
	}
	return evs
}
