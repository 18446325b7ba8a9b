package kafkabus

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

// Events removed from the store before they are published leave holes in
// the log: the publisher skips them and publishes the rest once, in order
// — a removed tail of the log included — and a replica reading the topic
// moves past the holes (filling them from the store, which skips them
// too) and delivers exactly the events still in the log.
func TestPublishSkipsRemovedEvents(t *testing.T) {
	cfg := testConfig(t)
	const partitions = 3
	topic := newTopic(t, cfg, partitions)
	st := openStore(t, t.TempDir())
	ctx := context.Background()

	writeEvents(t, ctx, st, "pre", 10, 2, 300)
	for i := range 10 {
		if _, err := st.Append(ctx, fmt.Sprintf("tail-%d", i), eventstore.NoStream, []eventstore.NewEvent{{Type: "T"}}); err != nil {
			t.Fatal(err)
		}
	}
	// Holes in the middle (a soft delete, a hard one, a truncation) and
	// at the end of the log.
	removals := []func() error{
		func() error { return st.DeleteStream(ctx, "pre-0", eventstore.DeleteSoft) },
		func() error { return st.DeleteStream(ctx, "pre-1", eventstore.DeleteHard) },
		func() error { return st.TruncateStream(ctx, "pre-2", 20) },
	}
	for i := range 10 {
		removals = append(removals, func() error { return st.DeleteStream(ctx, fmt.Sprintf("tail-%d", i), eventstore.DeleteSoft) })
	}
	for _, rm := range removals {
		if err := rm(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	visible := readVisible(t, st)
	last := visible[len(visible)-1].Position
	if last >= head(t, st) {
		t.Fatalf("the test wants a removed tail: last event %d, head %d", last, head(t, st))
	}

	p := NewPublisher(st, testPublisher(cfg, topic, uniqueName(t, "tx"), partitions))
	stop := startPublisher(t, p)
	waitFor(t, 20*time.Second, "the publisher to publish the last event still in the log", func() bool { return p.LastPosition() == last })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if p.Published() != uint64(len(visible)) {
		t.Errorf("published %d events, the log holds %d", p.Published(), len(visible))
	}
	recs := readTopic(t, cfg, topic)
	got := map[uint64]eventstore.Event{}
	for _, r := range recs {
		if _, dup := got[r.Event.Position]; dup {
			t.Fatalf("position %d published twice", r.Event.Position)
		}
		got[r.Event.Position] = r.Event
	}
	if len(got) != len(visible) {
		t.Fatalf("%d records in the topic, %d events in the log", len(got), len(visible))
	}
	for _, ev := range visible {
		if !reflect.DeepEqual(got[ev.Position], ev) {
			t.Fatalf("position %d: topic has %+v, the log %+v", ev.Position, got[ev.Position], ev)
		}
	}

	// A replica over the topic, with the store as its fallback, delivers
	// exactly the events still in the log.
	rep := NewReplicaStore(cfg, topic, st, WithCatchUpWindow(-1), WithGapWait(200*time.Millisecond))
	sub, err := rep.Subscribe(ctx, eventstore.All(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var delivered []eventstore.Event
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for len(delivered) < len(visible) {
		evs, err := sub.Next(rctx)
		if err != nil {
			t.Fatalf("replica after %d events: %v", len(delivered), err)
		}
		delivered = append(delivered, evs...)
	}
	for i, ev := range visible {
		if delivered[i].Position != ev.Position || delivered[i].ID != ev.ID {
			t.Fatalf("replica event %d at position %d, want %d", i, delivered[i].Position, ev.Position)
		}
	}
}

func readVisible(t *testing.T, st eventstore.Store) []eventstore.Event {
	t.Helper()
	var all []eventstore.Event
	for from := uint64(1); ; {
		evs, err := st.ReadAll(context.Background(), from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return all
		}
		all = append(all, evs...)
		from = evs[len(evs)-1].Position + 1
	}
}
