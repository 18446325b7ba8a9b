package flights

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
)

func newService(t *testing.T) (*Service, eventstore.Store) {
	t.Helper()
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(context.Background(), store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		svc.Close()
		store.Close()
	})
	return svc, store
}

var base = time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC)

func leg(id, airline string, num int, from, to string, depMin, durMin int) Leg {
	dep := base.Add(time.Duration(depMin) * time.Minute)
	return Leg{
		ID: id, Airline: airline, Number: num, Origin: from, Destination: to,
		DayOfOrigin: dep.Format(time.DateOnly), Departure: dep, Arrival: dep.Add(time.Duration(durMin) * time.Minute),
	}
}

// wait makes the view reflect everything written so far.
func wait(t *testing.T, svc *Service) *Validation {
	t.Helper()
	head, _ := svc.Store.Head(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := svc.Validation.WaitFor(ctx, head); err != nil {
		t.Fatalf("view did not reach %d: %v", head, err)
	}
	return svc.Validation.Current()
}

func TestValidationScenarios(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	mustRot := func(id string, cmd RotationCommand) {
		t.Helper()
		if _, err := svc.Rotations.Execute(ctx, id, cmd); err != nil {
			t.Fatalf("%T on %s: %v", cmd, id, err)
		}
	}
	mustRot("r1", CreateRotation{})
	mustRot("r1", AddLegs{Legs: []Leg{
		leg("a", "LH", 400, "FRA", "JFK", 600, 480),  // arrives 18:00
		leg("b", "LH", 401, "JFK", "FRA", 1140, 420), // departs 19:00: 60 min ground, fine
		leg("c", "LH", 402, "MUC", "FRA", 1800, 60),  // departs MUC but b arrived at FRA: continuity
	}})
	v := wait(t, svc)
	c, _ := v.Counts()
	if c.Continuity != 1 || c.MinGroundTime != 0 || c.DuplicateDesignator != 0 {
		t.Fatalf("counts %+v, want one continuity violation", c)
	}
	page, err := v.Violations(Filter{Check: Continuity}, "", 10)
	if err != nil || len(page.Violations) != 1 || !slices.Equal(page.Violations[0].Legs, []string{"b", "c"}) {
		t.Fatalf("continuity page %+v %v", page, err)
	}
	if valid, ok := v.RotationValid("r1"); valid || !ok {
		t.Fatal("r1 reported valid")
	}

	// Overlap is refused by the write model, with a specific error.
	_, err = svc.Rotations.Execute(ctx, "r1", AddLeg{Leg: leg("d", "LH", 403, "FRA", "MUC", 700, 60)})
	if !errors.Is(err, ErrOverlap) {
		t.Fatalf("overlapping leg: %v", err)
	}

	// Removing the offending leg clears the violation.
	mustRot("r1", RemoveLeg{LegID: "c"})
	v = wait(t, svc)
	if c, _ := v.Counts(); c.Total != 0 {
		t.Fatalf("after removing c: %+v", c)
	}
	if valid, ok := v.RotationValid("r1"); !valid || !ok {
		t.Fatal("r1 should be valid")
	}

	// An airplane with a 90-minute minimum makes the 60-minute turn too short.
	if _, err := svc.Airplanes.Execute(ctx, "D-AIMA", CreateAirplane{Type: "A388", MinGroundTime: 90}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Airplanes.Execute(ctx, "D-AIMA", AssignRotation{Rotation: "r1"}); err != nil {
		t.Fatal(err)
	}
	v = wait(t, svc)
	if c, _ := v.Counts(); c.MinGroundTime != 1 {
		t.Fatalf("airplane minimum not applied: %+v", c)
	}
	// Reassigning the airplane elsewhere lifts it again.
	mustRot("r2", CreateRotation{})
	if _, err := svc.Airplanes.Execute(ctx, "D-AIMA", AssignRotation{Rotation: "r2"}); err != nil {
		t.Fatal(err)
	}
	v = wait(t, svc)
	if c, _ := v.Counts(); c.MinGroundTime != 0 {
		t.Fatalf("after reassigning: %+v", c)
	}
	// Raising JFK's airport minimum to 61 minutes breaks the turn again.
	if _, err := svc.Airports.Execute(ctx, "JFK", SetAirportMinGroundTime{Minutes: 61}); err != nil {
		t.Fatal(err)
	}
	v = wait(t, svc)
	if c, _ := v.Counts(); c.MinGroundTime != 1 {
		t.Fatalf("after airport minimum: %+v", c)
	}
	// Moving b later by an hour fixes it.
	mustRot("r1", MoveLeg{LegID: "b", Departure: base.Add(20 * time.Hour), Arrival: base.Add(27 * time.Hour)})
	v = wait(t, svc)
	if c, _ := v.Counts(); c.MinGroundTime != 0 {
		t.Fatalf("after moving b: %+v", c)
	}

	// Duplicate designators: the same flight on the same day from the same
	// airport, in two rotations; each leg counts.
	mustRot("r2", AddLeg{Leg: leg("e", "LH", 400, "FRA", "JFK", 600+2*1440, 480)})
	mustRot("r3", CreateRotation{})
	dup := leg("f", "LH", 400, "FRA", "JFK", 600+2*1440, 480)
	mustRot("r3", AddLeg{Leg: dup})
	v = wait(t, svc)
	if c, _ := v.Counts(); c.DuplicateDesignator != 2 {
		t.Fatalf("duplicates: %+v", c)
	}
	mustRot("r3", RemoveRotation{})
	v = wait(t, svc)
	if c, _ := v.Counts(); c.DuplicateDesignator != 0 || c.Total != 0 {
		t.Fatalf("after removing r3: %+v", c)
	}
}

func TestViolationPaging(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	// 30 rotations with one continuity break each, on different days and
	// two airlines.
	for i := range 30 {
		id := fmt.Sprintf("p%02d", i)
		airline := []string{"LH", "OS"}[i%2]
		if _, err := svc.Rotations.Execute(ctx, id, CreateRotation{}); err != nil {
			t.Fatal(err)
		}
		day := i * 1440
		if _, err := svc.Rotations.Execute(ctx, id, AddLegs{Legs: []Leg{
			leg(id+"a", airline, 100+i, "VIE", "FRA", day+60, 60),
			leg(id+"b", airline, 200+i, "MUC", "VIE", day+300, 60),
		}}); err != nil {
			t.Fatal(err)
		}
	}
	v := wait(t, svc)
	var all []Violation
	cursor := ""
	for {
		p, err := v.Violations(Filter{}, cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, p.Violations...)
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if len(all) != 30 || !sort.SliceIsSorted(all, func(i, j int) bool { return all[i].Time.Before(all[j].Time) }) {
		t.Fatalf("paged %d violations (sorted: %v)", len(all), sort.SliceIsSorted(all, func(i, j int) bool { return all[i].Time.Before(all[j].Time) }))
	}
	p, _ := v.Violations(Filter{Airline: "OS"}, "", 100)
	if len(p.Violations) != 15 {
		t.Fatalf("OS violations: %d", len(p.Violations))
	}
	from, to := base.Add(5*24*time.Hour), base.Add(10*24*time.Hour)
	p, _ = v.Violations(Filter{From: from, To: to}, "", 100)
	if len(p.Violations) != 5 {
		t.Fatalf("violations in [day 5, day 10): %d", len(p.Violations))
	}
	// LH has the even days; [5, 10) holds days 6 and 8.
	p, _ = v.Violations(Filter{Airline: "LH", From: from, To: to, Check: Continuity}, "", 100)
	if len(p.Violations) != 2 {
		t.Fatalf("LH continuity in [day 5, day 10): %d, want 2", len(p.Violations))
	}
	if _, err := v.Violations(Filter{}, "not-a-cursor!", 10); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad cursor: %v", err)
	}
	p, _ = v.Violations(Filter{Rotation: "p03"}, "", 10)
	if len(p.Violations) != 1 || p.Violations[0].Rotation != "p03" {
		t.Fatalf("by rotation: %+v", p)
	}
}

// TestValidationMatchesBruteForce edits a schedule at random through the
// write model and checks, after every batch of edits, that the incremental
// view reports exactly what a from-scratch check of the log reports.
func TestValidationMatchesBruteForce(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { bruteForceRun(t, seed) })
	}
}

func bruteForceRun(t *testing.T, seed uint64) {
	ctx := context.Background()
	svc, store := newService(t)
	rng := rand.New(rand.NewPCG(seed, 11))
	airports := []string{"FRA", "MUC", "VIE", "ZRH"}
	var rotations []string
	var planes []string
	legSeq := 0
	randomLeg := func() Leg {
		legSeq++
		from, to := airports[rng.IntN(4)], airports[rng.IntN(4)]
		if from == to {
			to = airports[(slices.Index(airports, from)+1)%4]
		}
		l := leg(fmt.Sprintf("L%d", legSeq), []string{"LH", "OS"}[rng.IntN(2)], 1+rng.IntN(4),
			from, to, rng.IntN(480), 20+rng.IntN(40))
		// Some legs the view cannot pack: it keeps those whole.
		switch rng.IntN(8) {
		case 0:
			l.AircraftType = "32N"
		case 1:
			l.AircraftType = "A320neo"
		case 2:
			zone := time.FixedZone("", 2*3600)
			l.Departure, l.Arrival = l.Departure.In(zone), l.Arrival.In(zone)
		case 3:
			l.Suffix = "A"
		}
		return l
	}
	for step := range 400 {
		var err error
		switch op := rng.IntN(10); {
		case op == 0 || len(rotations) == 0:
			id := fmt.Sprintf("R%d", step)
			_, err = svc.Rotations.Execute(ctx, id, CreateRotation{})
			rotations = append(rotations, id)
		case op <= 4:
			_, err = svc.Rotations.Execute(ctx, rotations[rng.IntN(len(rotations))], AddLeg{Leg: randomLeg()})
		case op == 5:
			r := rotations[rng.IntN(len(rotations))]
			st, _, e := svc.Rotations.State(ctx, r)
			if e == nil && len(st.Legs) > 0 {
				l := st.Legs[rng.IntN(len(st.Legs))]
				if rng.IntN(2) == 0 {
					_, err = svc.Rotations.Execute(ctx, r, RemoveLeg{LegID: l.ID})
				} else {
					d := time.Duration(rng.IntN(240)-120) * time.Minute
					_, err = svc.Rotations.Execute(ctx, r, MoveLeg{LegID: l.ID, Departure: l.Departure.Add(d), Arrival: l.Arrival.Add(d)})
				}
			}
		case op == 6:
			reg := fmt.Sprintf("D-A%03d", rng.IntN(6))
			if !slices.Contains(planes, reg) {
				_, err = svc.Airplanes.Execute(ctx, reg, CreateAirplane{Type: "A320", MinGroundTime: 20 + rng.IntN(60)})
				planes = append(planes, reg)
			} else {
				_, err = svc.Airplanes.Execute(ctx, reg, AssignRotation{Rotation: rotations[rng.IntN(len(rotations))]})
			}
		case op == 7 && len(planes) > 0:
			reg := planes[rng.IntN(len(planes))]
			if rng.IntN(2) == 0 {
				_, err = svc.Airplanes.Execute(ctx, reg, SetAirplaneMinGroundTime{Minutes: rng.IntN(90)})
			} else {
				_, err = svc.Airplanes.Execute(ctx, reg, UnassignRotation{})
			}
		case op == 8:
			_, err = svc.Airports.Execute(ctx, airports[rng.IntN(4)], SetAirportMinGroundTime{Minutes: rng.IntN(90)})
		case op == 9 && rng.IntN(4) == 0:
			_, err = svc.Rotations.Execute(ctx, rotations[rng.IntN(len(rotations))], RemoveRotation{})
		}
		if err != nil && !errors.Is(err, ErrOverlap) && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrRemoved) && !errors.Is(err, ErrInvalid) {
			t.Fatalf("step %d: %v", step, err)
		}
		if step%25 == 24 {
			compareWithBruteForce(t, wait(t, svc), store)
		}
	}
}

func compareWithBruteForce(t *testing.T, v *Validation, store eventstore.Store) {
	t.Helper()
	want, rots := bruteForce(t, store)
	spell := func(legs []Leg) []string {
		var out []string
		for _, l := range legs {
			out = append(out, fmt.Sprintf("%s %s %d %q %s-%s %s %s–%s %q", l.ID, l.Airline, l.Number, l.Suffix,
				l.Origin, l.Destination, l.DayOfOrigin, l.Departure.Format(time.RFC3339Nano), l.Arrival.Format(time.RFC3339Nano), l.AircraftType))
		}
		sort.Strings(out)
		return out
	}
	got := map[string][]string{}
	for _, r := range v.Rotations() {
		got[r.ID] = spell(r.Legs)
	}
	for id, r := range rots {
		if r.Removed {
			continue
		}
		if w := spell(r.Legs); !slices.Equal(got[id], w) {
			t.Fatalf("rotation %s: the view holds legs\n%v\nthe log says\n%v", id, got[id], w)
		}
		delete(got, id)
	}
	if len(got) > 0 {
		t.Fatalf("the view holds rotations the log does not: %v", got)
	}
	compareViolations(t, v, want)
}

func compareViolations(t *testing.T, v *Validation, want []string) {
	t.Helper()
	var got []string
	cursor := ""
	for {
		p, err := v.Violations(Filter{}, cursor, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range p.Violations {
			got = append(got, string(x.Check)+":"+strings.Join(x.Legs, ","))
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("incremental view disagrees with a full check:\n got %v\nwant %v", got, want)
	}
	c, _ := v.Counts()
	t.Logf("%d violations agree: %+v", len(want), c)
	if c.Total != len(want) {
		t.Fatalf("counts %+v, %d violations listed", c, len(want))
	}
}

// bruteForce replays the log with the write model's own evolve functions
// and checks every rule from scratch.
func bruteForce(t *testing.T, store eventstore.Store) ([]string, map[string]Rotation) {
	t.Helper()
	rots := map[string]Rotation{}
	planes := map[string]Airplane{}
	mgt := map[string]int{}
	rc, ac, pc := rotationEvents(), airplaneEvents(), airportEvents()
	for from := uint64(1); ; {
		evs, err := store.ReadAll(context.Background(), from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			switch {
			case strings.HasPrefix(ev.Stream, RotationPrefix):
				id := ev.Stream[len(RotationPrefix):]
				e, err := rc.Decode(ev.Type, ev.Version, ev.Data)
				if err != nil {
					t.Fatal(err)
				}
				rots[id] = EvolveRotation(rots[id], e)
			case strings.HasPrefix(ev.Stream, AirplanePrefix):
				reg := ev.Stream[len(AirplanePrefix):]
				e, err := ac.Decode(ev.Type, ev.Version, ev.Data)
				if err != nil {
					t.Fatal(err)
				}
				p := planes[reg]
				p.Registration = reg
				planes[reg] = EvolveAirplane(p, e)
			case strings.HasPrefix(ev.Stream, AirportPrefix):
				e, err := pc.Decode(ev.Type, ev.Version, ev.Data)
				if err != nil {
					t.Fatal(err)
				}
				mgt[ev.Stream[len(AirportPrefix):]] = e.(AirportMinGroundTimeSet).Minutes
			}
		}
		from = evs[len(evs)-1].Position + 1
	}
	// The latest assignment wins: replay assignment order by position is
	// what the view does; here, each rotation's airplane is the one whose
	// current rotation it is, and if several, the one assigned last —
	// which the test's workload avoids ambiguity for by checking both.
	planeOf := map[string]Airplane{}
	lastAssign := map[string]uint64{}
	for from := uint64(1); ; {
		evs, _ := store.ReadAll(context.Background(), from, 1000)
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			if ev.Type == "RotationAssigned" {
				reg := ev.Stream[len(AirplanePrefix):]
				p := planes[reg]
				if p.Rotation != "" && !p.Removed && ev.Position > lastAssign[p.Rotation] {
					// Only the assignment still in force counts.
					e, _ := ac.Decode(ev.Type, ev.Version, ev.Data)
					if e.(RotationAssigned).Rotation == p.Rotation {
						lastAssign[p.Rotation] = ev.Position
						planeOf[p.Rotation] = p
					}
				}
			}
		}
		from = evs[len(evs)-1].Position + 1
	}
	var out []string
	designators := map[Designator][]string{}
	for id, r := range rots {
		if r.Removed {
			continue
		}
		for i := range r.Legs {
			l := r.Legs[i]
			designators[l.Designator()] = append(designators[l.Designator()], l.ID)
			if i == 0 {
				continue
			}
			p := r.Legs[i-1]
			if p.Destination != l.Origin {
				out = append(out, string(Continuity)+":"+p.ID+","+l.ID)
			}
			need, ok := mgt[p.Destination]
			if !ok {
				need = DefaultAirportMinGroundTime
			}
			if a, ok := planeOf[id]; ok && a.MinGroundTime > need {
				need = a.MinGroundTime
			}
			if l.Departure.Sub(p.Arrival) < time.Duration(need)*time.Minute {
				out = append(out, string(MinGroundTime)+":"+p.ID+","+l.ID)
			}
		}
	}
	for _, ids := range designators {
		if len(ids) > 1 {
			for _, id := range ids {
				out = append(out, string(DuplicateDesignator)+":"+id)
			}
		}
	}
	sort.Strings(out)
	return out, rots
}

// A packed leg spells back exactly the leg it was made of.
func TestPackedLegRoundTrip(t *testing.T) {
	v := NewValidation()
	r := v.newVrot("R")
	dep := time.Date(2026, 3, 29, 6, 5, 0, 0, time.UTC)
	for _, l := range []Leg{
		{ID: "a", Airline: "LH", Number: 400, Origin: "FRA", Destination: "JFK", DayOfOrigin: "2026-03-29", Departure: dep, Arrival: dep.Add(8 * time.Hour), AircraftType: "388"},
		{ID: "b", Airline: "U2", Number: 9999, Suffix: "A", Origin: "LGW", Destination: "GVA", DayOfOrigin: "2026-03-28", Departure: dep, Arrival: dep.Add(time.Hour)},
		{ID: "c", Airline: "X", Number: 1, Suffix: "\xff", Origin: "A", Destination: "B", DayOfOrigin: "2026-03-29", Departure: dep, Arrival: dep.Add(time.Minute)},
		{ID: "d", Airline: "LHX", Number: 7, Origin: "FRA", Destination: "MUC", DayOfOrigin: "2026-03-29", Departure: dep, Arrival: dep.Add(time.Hour), AircraftType: "A320neo"},
		{ID: "e", Airline: "DLH", Number: 7, Origin: "EDDF", Destination: "EDDM", DayOfOrigin: "2026-03-29", Departure: dep, Arrival: dep.Add(time.Hour), AircraftType: "A320"},
		{ID: "0b6a1f1e-3c1d-4f7e-9a40-3f5e2c1d0a99", Airline: "LH", Number: 401, Origin: "JFK", Destination: "FRA", DayOfOrigin: "2026-03-29", Departure: dep, Arrival: dep.Add(7 * time.Hour)},
		{ID: "an-id-longer-than-a-uuid-which-the-view-keeps-aside", Airline: "LH", Number: 402, Origin: "FRA", Destination: "MUC", DayOfOrigin: "2026-03-29", Departure: dep, Arrival: dep.Add(time.Hour)},
	} {
		x := v.newLeg(r, &l)
		if got := v.leg(x); got != l {
			t.Errorf("leg %s came back as %+v, want %+v", l.ID, got, l)
		}
		if got, want := v.designator(x), l.Designator(); got != want {
			t.Errorf("leg %s: designator %+v, want %+v", l.ID, got, want)
		}
		if packed := x.odd == nil; packed != (l.ID != "d") {
			t.Errorf("leg %s: packed %v", l.ID, packed)
		}
	}
	if len(v.longIDs) != 1 {
		t.Errorf("%d ids kept aside, want the one longer than %d bytes", len(v.longIDs), maxInlineID)
	}
	// What the packing is for: a designator key in 16 bytes, a leg in 96
	// bytes with its id, and one pointer in it (odd, nil for a leg that
	// packs) for the collector to read.
	if n := unsafe.Sizeof(dkey{}); n != 16 {
		t.Errorf("dkey is %d bytes", n)
	}
	if n := unsafe.Sizeof(vleg{}); n > 96 {
		t.Errorf("vleg is %d bytes", n)
	}
	lt := reflect.TypeFor[vleg]()
	for i := range lt.NumField() {
		f := lt.Field(i)
		if f.Name != "odd" && hasPointers(f.Type) {
			t.Errorf("vleg.%s holds a pointer", f.Name)
		}
	}
}

func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.String, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// Slots of removed legs are reused, and a leg in a reused slot is its new
// self: ids, rotations and designators all follow the new leg.
func TestLegSlotsReused(t *testing.T) {
	v := NewValidation()
	dep := time.Date(2026, 3, 29, 6, 0, 0, 0, time.UTC)
	mk := func(id string, n int) Leg {
		d := dep.Add(time.Duration(n) * 2 * time.Hour)
		return Leg{ID: id, Airline: "LH", Number: n, Origin: "FRA", Destination: "FRA", DayOfOrigin: "2026-03-29", Departure: d, Arrival: d.Add(time.Hour)}
	}
	long := "a2-" + strings.Repeat("x", maxInlineID)
	v.addLegs("A", []Leg{mk("a1", 1), mk(long, 2), mk("a3", 3)})
	used := v.legs.used
	v.removeLeg("A", long)
	if len(v.longIDs) != 0 {
		t.Fatalf("a removed leg's long id is still kept: %v", v.longIDs)
	}
	v.removeRotation("A")
	if len(v.legs.free) != 3 {
		t.Fatalf("%d free slots after removing three legs", len(v.legs.free))
	}
	v.addLegs("B", []Leg{mk("b1", 1), mk("b2", 2)})
	v.addLegs("B", []Leg{mk("b3", 3)})
	if v.legs.used != used || len(v.legs.free) != 0 {
		t.Fatalf("slots: %d handed out, %d free; want %d and none", v.legs.used, len(v.legs.free), used)
	}
	if v.find("B", "b2") == nil || v.find("A", "a1") != nil || v.find("B", long) != nil {
		t.Fatal("find does not follow the reused slots")
	}
	got := v.Rotations()
	if len(got) != 1 || got[0].ID != "B" || len(got[0].Legs) != 3 || got[0].Legs[2].ID != "b3" {
		t.Fatalf("rotations %+v", got)
	}
	// The same designators as the removed legs: no duplicate left over.
	if n := v.counts[DuplicateDesignator]; n != 0 {
		t.Fatalf("%d duplicate designators", n)
	}
	v.addLegs("C", []Leg{mk("c1", 1)})
	if n := v.counts[DuplicateDesignator]; n != 2 {
		t.Fatalf("%d duplicate designators, want b1's and c1's", n)
	}
	// A rotation made again after its removal is a new one, with legs of
	// its own.
	v.addLegs("A", []Leg{mk("a9", 9)})
	if r := v.rotations["A"]; r == nil || v.rots[r.idx] != r || len(r.legs) != 1 || v.rotation(v.at(r.legs[0])) != r {
		t.Fatal("rotation A made again does not own its leg")
	}
	if x := v.violations[string(DuplicateDesignator)+":B:b1"]; x == nil || x.Rotation != "B" || x.Legs[0] != "b1" {
		t.Fatalf("b1's duplicate violation: %+v", x)
	}
}
