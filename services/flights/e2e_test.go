package flights

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestGenerateImportCheck is the end-to-end promise of the generator: a
// schedule with injected violations, written as SSIM and a rotation file,
// imported through the write model, and checked by the incremental view,
// reports exactly the injected violations — and nothing else.
func TestGenerateImportCheck(t *testing.T) {
	g, err := GenerateSchedule(GenerateOptions{Weeks: 2, FlightsPerWeek: 700, Violations: 0.03, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	inj := g.Injected
	if inj.Continuity == 0 || inj.MinGroundTime == 0 || inj.DuplicateDesignator == 0 {
		t.Fatalf("nothing injected: %+v", inj)
	}
	var sched, rots bytes.Buffer
	if err := WriteSchedule(&sched, &rots, g.Airline, g.Rotations); err != nil {
		t.Fatal(err)
	}
	svc, _ := newService(t)
	ctx := context.Background()
	res, err := Import(ctx, svc, bytes.NewReader(sched.Bytes()), bytes.NewReader(rots.Bytes()), ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rejected != 0 || res.Unassigned != 0 || res.LegsImported != inj.Legs || res.Rotations != inj.Rotations {
		t.Fatalf("import %+v (first rejections %v), want %d legs in %d rotations", res, first(res), inj.Legs, inj.Rotations)
	}
	v := waitPos(t, svc, res.Position)
	c, _ := v.Counts()
	st := v.Stats()
	if c.Continuity != inj.Continuity || c.MinGroundTime != inj.MinGroundTime || c.DuplicateDesignator != inj.DuplicateDesignator ||
		st.Legs != inj.Legs || st.Rotations != inj.Rotations {
		t.Fatalf("view %+v %+v, generator injected %+v", c, st, inj)
	}
	// Importing the same files again changes nothing.
	again, err := Import(ctx, svc, bytes.NewReader(sched.Bytes()), bytes.NewReader(rots.Bytes()), ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v = waitPos(t, svc, again.Position)
	if st2 := v.Stats(); st2 != st {
		t.Fatalf("re-import changed the schedule: %+v, was %+v", st2, st)
	}
	// Export and re-import into a fresh store: the same schedule.
	var sched2, rots2 bytes.Buffer
	if _, err := Export(v, &sched2, &rots2); err != nil {
		t.Fatal(err)
	}
	svc2, _ := newService(t)
	res2, err := Import(ctx, svc2, &sched2, &rots2, ImportOptions{})
	if err != nil || res2.Rejected != 0 {
		t.Fatalf("re-import of the export: %+v %v", first(res2), err)
	}
	v2 := waitPos(t, svc2, res2.Position)
	c2, _ := v2.Counts()
	if c2 != c || v2.Stats() != st {
		t.Fatalf("exported schedule checks as %+v %+v, original %+v %+v", c2, v2.Stats(), c, st)
	}
}

func first(r ImportResult) any {
	if len(r.Rejections) > 3 {
		return r.Rejections[:3]
	}
	return r.Rejections
}

func waitPos(t *testing.T, svc *Service, pos uint64) *Validation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := svc.Validation.WaitFor(ctx, pos); err != nil {
		t.Fatal(err)
	}
	return svc.Validation.Current()
}
