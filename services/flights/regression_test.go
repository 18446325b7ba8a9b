package flights

import (
	"context"
	"testing"
)

// Leg ids are unique per rotation in the write model, but the view indexes
// them globally.
func TestLegIDsMayRepeatAcrossRotations(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	must := func(id string, cmd RotationCommand) {
		t.Helper()
		if _, err := svc.Rotations.Execute(ctx, id, cmd); err != nil {
			t.Fatalf("%T on %s: %v", cmd, id, err)
		}
	}
	for _, r := range []string{"A", "B"} {
		must(r, CreateRotation{})
		// continuity break FRA -> MUC in both rotations, same leg ids
		must(r, AddLeg{Leg: leg("x", "LH", 1, "FRA", "FRA", 0, 60)})
	}
	must("A", AddLeg{Leg: leg("y", "LH", 2, "MUC", "FRA", 600, 60)})
	must("B", AddLeg{Leg: leg("y", "LH", 3, "MUC", "FRA", 900, 60)})
	// Each rotation: x FRA→FRA then y MUC→FRA, a continuity break; and
	// the two x legs share a designator (LH1/FRA, same day).
	v := wait(t, svc)
	if p, _ := v.Violations(Filter{Rotation: "A"}, "", 100); len(p.Violations) != 2 {
		t.Fatalf("A has %d violations, want continuity + duplicate designator: %+v", len(p.Violations), p.Violations)
	}
	// Remove leg y from rotation A only.
	must("A", RemoveLeg{LegID: "y"})
	v = wait(t, svc)
	pb, _ := v.Violations(Filter{Rotation: "B"}, "", 100)
	var legsB int
	for _, rl := range v.Rotations() {
		if rl.ID == "B" {
			legsB = len(rl.Legs)
		}
	}
	st, _, _ := svc.Rotations.State(ctx, "B")
	if legsB != len(st.Legs) || len(pb.Violations) != 2 {
		t.Errorf("view of B: %d legs, %d violations; write model: %d legs (want continuity + duplicate designator)", legsB, len(pb.Violations), len(st.Legs))
	}
	// All-violations query must not panic and must match counts.
	c, _ := v.Counts()
	all, _ := v.Violations(Filter{}, "", 1000)
	if len(all.Violations) != c.Total {
		t.Errorf("counts %+v but %d violations listed", c, len(all.Violations))
	}
}

// "The latest assignment wins when two airplanes name one rotation" — but a
// minimum-ground-time change of the earlier airplane takes the rotation back.
func TestLatestAssignmentWins(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := svc.Rotations.Execute(ctx, "R", CreateRotation{})
	must(err)
	_, err = svc.Rotations.Execute(ctx, "R", AddLegs{Legs: []Leg{
		leg("a", "LH", 1, "FRA", "MUC", 0, 60),
		leg("b", "LH", 2, "MUC", "FRA", 120, 60), // 60 min ground at MUC
	}})
	must(err)
	for reg, mgt := range map[string]int{"D-AAAA": 10, "D-BBBB": 90} {
		_, err = svc.Airplanes.Execute(ctx, reg, CreateAirplane{Type: "A320", MinGroundTime: mgt})
		must(err)
	}
	_, err = svc.Airplanes.Execute(ctx, "D-AAAA", AssignRotation{Rotation: "R"})
	must(err)
	_, err = svc.Airplanes.Execute(ctx, "D-BBBB", AssignRotation{Rotation: "R"}) // latest: 90 min
	must(err)
	c, _ := wait(t, svc).Counts()
	if c.MinGroundTime != 1 {
		t.Fatalf("before: %+v, want one ground-time violation (B needs 90)", c)
	}
	_, err = svc.Airplanes.Execute(ctx, "D-AAAA", SetAirplaneMinGroundTime{Minutes: 20})
	must(err)
	c, _ = wait(t, svc).Counts()
	if c.MinGroundTime != 1 {
		t.Fatalf("after the earlier airplane's minimum changed: %+v; D-BBBB (latest, 90 min) still flies R", c)
	}
}

// EvolveRotation's append fast path must not let two states built from one
// write into the same slot.
func TestEvolveTwiceFromOneState(t *testing.T) {
	s := Rotation{ID: "r", Created: true}
	s = EvolveRotation(s, LegsAdded{Legs: []Leg{leg("a", "LH", 1, "FRA", "MUC", 0, 60)}})
	s = EvolveRotation(s, LegsAdded{Legs: []Leg{leg("b", "LH", 2, "MUC", "FRA", 120, 60)}}) // len 2, cap 2
	s = EvolveRotation(s, LegsAdded{Legs: []Leg{leg("c", "LH", 3, "FRA", "MUC", 240, 60)}}) // len 3, cap 4
	x := EvolveRotation(s, LegsAdded{Legs: []Leg{leg("x", "LH", 4, "MUC", "FRA", 400, 60)}})
	_ = EvolveRotation(s, LegsAdded{Legs: []Leg{leg("y", "LH", 5, "MUC", "FRA", 400, 60)}})
	if x.Legs[3].ID != "x" || !x.hasLeg(x.Legs[3].ID) {
		t.Fatalf("state x now has leg %q at [3]; its id set has it: %v", x.Legs[3].ID, x.hasLeg(x.Legs[3].ID))
	}
}
