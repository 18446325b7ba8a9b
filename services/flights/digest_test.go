package flights

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

// rebuild feeds a fresh view the whole log, in pages of n events.
func rebuild(t *testing.T, store eventstore.Store, n int) *Validation {
	t.Helper()
	v := NewValidation()
	for from := uint64(1); ; {
		evs, err := store.ReadAll(context.Background(), from, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return v
		}
		if err := v.Apply(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
		from = evs[len(evs)-1].Position + 1
	}
}

// TestDigest: the live view and rebuilds from the log, fed in any page
// size, have one digest; a change to the schedule changes it.
func TestDigest(t *testing.T) {
	ctx := context.Background()
	svc, store := newService(t)
	for _, id := range []string{"r1", "r2"} {
		if _, err := svc.Rotations.Execute(ctx, id, CreateRotation{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.Rotations.Execute(ctx, "r1", AddLegs{Legs: []Leg{
		leg("a", "LH", 400, "FRA", "JFK", 600, 480),
		leg("c", "LH", 402, "MUC", "FRA", 1800, 60), // a continuity violation
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Rotations.Execute(ctx, "r2", AddLegs{Legs: []Leg{leg("x", "LH", 400, "FRA", "JFK", 600, 480)}}); err != nil {
		t.Fatal(err)
	}
	live, livePos := wait(t, svc).Digest()
	for _, n := range []int{1, 2, 1000} {
		d, pos := rebuild(t, store, n).Digest()
		if d != live || pos != livePos {
			t.Fatalf("rebuild in pages of %d: %s@%d, live view %s@%d", n, d, pos, live, livePos)
		}
	}
	if _, err := svc.Rotations.Execute(ctx, "r2", MoveLeg{LegID: "x", Departure: base.Add(700 * time.Minute), Arrival: base.Add(1100 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if moved, _ := wait(t, svc).Digest(); moved == live {
		t.Fatal("a moved leg did not change the digest")
	}
}

// Concurrent digests of one view position are computed once: the digest
// reads the whole view under its read lock, and repeated requests must not
// keep the view from applying new events.
func TestDigestComputedOncePerPosition(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	if _, err := svc.Rotations.Execute(ctx, "R1", CreateRotation{}); err != nil {
		t.Fatal(err)
	}
	v := wait(t, svc)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { v.Digest() })
	}
	wg.Wait()
	if n := v.digests.Load(); n != 1 {
		t.Fatalf("8 digests of one position computed %d times", n)
	}
	if _, err := svc.Rotations.Execute(ctx, "R2", CreateRotation{}); err != nil {
		t.Fatal(err)
	}
	wait(t, svc)
	v.Digest()
	if n := v.digests.Load(); n != 2 {
		t.Fatalf("a digest after the view moved: %d computations, want 2", n)
	}
}

// The order in which airplanes were assigned one rotation decides which
// one is in force after another is unassigned, so two views that differ
// only in that order have different digests.
func TestDigestCoversAssignmentOrder(t *testing.T) {
	view := func(order ...string) *Validation {
		v := NewValidation()
		var evs []eventstore.Event
		add := func(stream, typ, data string) {
			evs = append(evs, eventstore.Event{Position: uint64(len(evs) + 1), Stream: stream, Type: typ, Data: []byte(data)})
		}
		add(RotationPrefix+"R", "RotationCreated", `{}`)
		for _, reg := range order {
			add(AirplanePrefix+reg, "AirplaneCreated", `{"type":"A320","min_ground_time":30}`)
		}
		for _, reg := range order {
			add(AirplanePrefix+reg, "RotationAssigned", `{"rotation":"R"}`)
		}
		if err := v.Apply(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
		return v
	}
	a, b := view("X", "Y", "Z"), view("Y", "X", "Z")
	if a.rotPlane["R"] != "Z" || b.rotPlane["R"] != "Z" {
		t.Fatalf("in force: %q and %q, want Z", a.rotPlane["R"], b.rotPlane["R"])
	}
	if da, _ := a.Digest(); da == func() string { d, _ := b.Digest(); return d }() {
		t.Fatal("one digest for two assignment orders")
	}
}
