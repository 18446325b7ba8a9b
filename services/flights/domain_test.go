package flights

import (
	"errors"
	"testing"
	"time"
)

func TestLegValidation(t *testing.T) {
	ok := leg("x", "LH", 400, "FRA", "JFK", 600, 480)
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(l *Leg){
		"no id":             func(l *Leg) { l.ID = "" },
		"airline":           func(l *Leg) { l.Airline = "lufthansa" },
		"number zero":       func(l *Leg) { l.Number = 0 },
		"number too big":    func(l *Leg) { l.Number = 10000 },
		"suffix":            func(l *Leg) { l.Suffix = "AB" },
		"origin":            func(l *Leg) { l.Origin = "FR" },
		"destination":       func(l *Leg) { l.Destination = "jfk" },
		"day of origin":     func(l *Leg) { l.DayOfOrigin = "29.03.2026" },
		"impossible date":   func(l *Leg) { l.DayOfOrigin = "2026-02-30" },
		"arrival first":     func(l *Leg) { l.Arrival = l.Departure.Add(-time.Minute) },
		"zero length":       func(l *Leg) { l.Arrival = l.Departure },
		"implausibly long":  func(l *Leg) { l.Arrival = l.Departure.Add(49 * time.Hour) },
		"missing departure": func(l *Leg) { l.Departure = time.Time{} },
		// Times the view's index (nanoseconds since 1970 in an int64) and
		// SSIM's two-digit years cannot order: outside 1970–2199.
		"year 2300": func(l *Leg) {
			l.Departure, l.Arrival, l.DayOfOrigin = l.Departure.AddDate(274, 0, 0), l.Arrival.AddDate(274, 0, 0), "2300-03-29"
		},
		"year 1900": func(l *Leg) {
			l.Departure, l.Arrival, l.DayOfOrigin = l.Departure.AddDate(-126, 0, 0), l.Arrival.AddDate(-126, 0, 0), "1900-03-29"
		},
		// A leg departs on its day of origin or a little after (a later
		// leg of a multi-leg flight), never a week away from it.
		"departure far from day of origin": func(l *Leg) { l.DayOfOrigin = "2026-04-10" },
		"departure before day of origin":   func(l *Leg) { l.DayOfOrigin = "2026-03-31" },
	}
	for name, mutate := range cases {
		l := ok
		mutate(&l)
		if err := l.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
}

func TestRotationRules(t *testing.T) {
	r := Rotation{ID: "r"}
	if _, err := DecideRotation(r, AddLeg{Leg: leg("a", "LH", 1, "FRA", "MUC", 60, 60)}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("add to uncreated: %v", err)
	}
	evs, err := DecideRotation(r, CreateRotation{})
	if err != nil {
		t.Fatal(err)
	}
	r = EvolveRotation(r, evs[0])
	if _, err := DecideRotation(r, CreateRotation{}); !errors.Is(err, ErrExists) {
		t.Fatalf("create twice: %v", err)
	}
	add := func(l Leg) error {
		evs, err := DecideRotation(r, AddLeg{Leg: l})
		if err == nil {
			for _, e := range evs {
				r = EvolveRotation(r, e)
			}
		}
		return err
	}
	if err := add(leg("b", "LH", 2, "MUC", "FRA", 300, 60)); err != nil {
		t.Fatal(err)
	}
	if err := add(leg("a", "LH", 1, "FRA", "MUC", 60, 60)); err != nil {
		t.Fatal(err)
	}
	if r.Legs[0].ID != "a" || r.Legs[1].ID != "b" {
		t.Fatalf("legs not kept in time order: %v, %v", r.Legs[0].ID, r.Legs[1].ID)
	}
	// Overlaps: touching is fine, overlapping by a minute is not.
	if err := add(leg("c", "LH", 3, "FRA", "MUC", 120, 180)); err != nil {
		t.Fatalf("a leg ending as the next starts: %v", err)
	}
	if err := add(leg("d", "LH", 4, "FRA", "MUC", 359, 30)); !errors.Is(err, ErrOverlap) {
		t.Fatalf("overlap: %v", err)
	}
	if err := add(leg("a", "LH", 9, "FRA", "MUC", 1000, 30)); !errors.Is(err, ErrExists) {
		t.Fatalf("reused leg id: %v", err)
	}
	// Bulk: overlapping among themselves, all or nothing.
	_, err = DecideRotation(r, AddLegs{Legs: []Leg{leg("e", "LH", 5, "FRA", "MUC", 2000, 60), leg("f", "LH", 6, "MUC", "FRA", 2030, 60)}})
	if !errors.Is(err, ErrOverlap) {
		t.Fatalf("bulk overlap: %v", err)
	}
	if _, err := DecideRotation(r, AddLegs{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty bulk: %v", err)
	}
	// Moving into another leg is an overlap; moving elsewhere is fine.
	if _, err := DecideRotation(r, MoveLeg{LegID: "a", Departure: base.Add(170 * time.Minute), Arrival: base.Add(200 * time.Minute)}); !errors.Is(err, ErrOverlap) {
		t.Fatalf("move into c: %v", err)
	}
	if _, err := DecideRotation(r, MoveLeg{LegID: "zz", Departure: base, Arrival: base.Add(time.Hour)}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("move unknown: %v", err)
	}
	evs, err = DecideRotation(r, RemoveRotation{})
	if err != nil {
		t.Fatal(err)
	}
	r = EvolveRotation(r, evs[0])
	if err := add(leg("g", "LH", 7, "FRA", "MUC", 5000, 60)); !errors.Is(err, ErrRemoved) {
		t.Fatalf("add to removed: %v", err)
	}
}

func TestAirplaneAndAirportRules(t *testing.T) {
	a := Airplane{Registration: "D-AIMA"}
	if _, err := DecideAirplane(a, AssignRotation{Rotation: "r"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("assign on uncreated: %v", err)
	}
	if _, err := DecideAirplane(a, CreateAirplane{Type: "A388", MinGroundTime: -1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative ground time: %v", err)
	}
	if _, err := DecideAirplane(Airplane{Registration: "x y"}, CreateAirplane{Type: "A388"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad registration: %v", err)
	}
	apply := func(cmd AirplaneCommand) []AirplaneEvent {
		t.Helper()
		evs, err := DecideAirplane(a, cmd)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			a = EvolveAirplane(a, e)
		}
		return evs
	}
	apply(CreateAirplane{Type: "A388", MinGroundTime: 60})
	apply(AssignRotation{Rotation: "r1"})
	// Reassigning unassigns the old rotation first, so the view can lift
	// the airplane's minimum from it.
	evs := apply(AssignRotation{Rotation: "r2"})
	if len(evs) != 2 || evs[0] != (RotationUnassigned{Rotation: "r1"}) || a.Rotation != "r2" {
		t.Fatalf("reassign: %v, rotation %s", evs, a.Rotation)
	}
	if evs := apply(AssignRotation{Rotation: "r2"}); len(evs) != 0 {
		t.Fatalf("assigning the same rotation again: %v", evs)
	}
	evs = apply(RemoveAirplane{})
	if len(evs) != 2 || !a.Removed || a.Rotation != "" {
		t.Fatalf("remove: %v %+v", evs, a)
	}
	if _, err := DecideAirplane(a, UnassignRotation{}); !errors.Is(err, ErrRemoved) {
		t.Fatalf("after removal: %v", err)
	}
	if _, err := DecideAirport(Airport{Code: "FRANK"}, SetAirportMinGroundTime{Minutes: 30}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad airport: %v", err)
	}
	if _, err := DecideAirport(Airport{Code: "FRA"}, SetAirportMinGroundTime{Minutes: MaxGroundTime + 1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("too long: %v", err)
	}
}
