package flights

import (
	"bytes"
	"context"
	"testing"
)

// TestImportRebuildsGeneratedRotations imports generated seasons and
// checks that every rotation gets back exactly its legs — including legs
// that share a designator and even a departure minute, which only the
// order of the rotation file tells apart — and that the counts agree.
func TestImportRebuildsGeneratedRotations(t *testing.T) {
	for _, seed := range []uint64{2, 5} {
		g, err := GenerateSchedule(GenerateOptions{Weeks: 6, FlightsPerWeek: 4000, Violations: 0.01, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		var sched, rots bytes.Buffer
		if err := WriteSchedule(&sched, &rots, g.Airline, g.Rotations); err != nil {
			t.Fatal(err)
		}
		svc, _ := newService(t)
		res, err := Import(context.Background(), svc, &sched, &rots, ImportOptions{})
		if err != nil || res.Rejected > 0 {
			t.Fatal(err, first(res))
		}
		v := waitPos(t, svc, res.Position)
		key := func(l Leg) string { return l.Designator().String() + "@" + l.Departure.String() + ">" + l.Destination }
		want := map[string]map[string]bool{}
		for _, r := range g.Rotations {
			want[r.ID] = map[string]bool{}
			for _, l := range r.Legs {
				want[r.ID][key(l)] = true
			}
		}
		for _, r := range v.Rotations() {
			if len(r.Legs) != len(want[r.ID]) {
				t.Fatalf("seed %d: rotation %s has %d legs, want %d", seed, r.ID, len(r.Legs), len(want[r.ID]))
			}
			for _, l := range r.Legs {
				if !want[r.ID][key(l)] {
					t.Fatalf("seed %d: rotation %s got %s, which belongs elsewhere", seed, r.ID, key(l))
				}
			}
		}
		c, _ := v.Counts()
		if c.Continuity != g.Injected.Continuity || c.MinGroundTime != g.Injected.MinGroundTime || c.DuplicateDesignator != g.Injected.DuplicateDesignator {
			t.Fatalf("seed %d: view %+v, injected %+v", seed, c, g.Injected)
		}
	}
}
