package pebblestore_test

import (
	"context"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/priority"
)

// An append made with a throughput context (priority.Throughput) lets
// running foreground work go first.
func TestAppendYieldsToForeground(t *testing.T) {
	s, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ev := []eventstore.NewEvent{{Type: "t", Data: []byte(`{}`)}}
	var y priority.Yielder
	ctx := priority.WithYielder(context.Background(), &y)
	if _, err := s.Append(ctx, "s", eventstore.Any, ev); err != nil {
		t.Fatal(err)
	}
	if y.Waited() != 0 {
		t.Fatalf("waited %v with no foreground work", y.Waited())
	}
	priority.Begin()
	defer priority.End()
	if _, err := s.Append(ctx, "s", eventstore.Any, []eventstore.NewEvent{{Type: "t", Data: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	if y.Waited() < priority.MaxWait {
		t.Fatalf("a throughput append beside foreground work waited %v, want %v", y.Waited(), priority.MaxWait)
	}
	if v, err := s.StreamVersion(context.Background(), "s"); err != nil || v != 2 {
		t.Fatalf("version %d, %v: want both appends", v, err)
	}
}
