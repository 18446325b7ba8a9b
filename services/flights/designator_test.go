package flights

import "testing"

func TestDesignatorPacking(t *testing.T) {
	base := Designator{Airline: "AB", Number: 1, Origin: "FRA", DayOfOrigin: "2026-03-29"}
	k0, ok := pack(base)
	if !ok {
		t.Fatalf("%v does not pack", base)
	}
	if k, _ := pack(base); k != k0 {
		t.Fatal("one designator packs two ways")
	}
	differ := []Designator{
		{Airline: "ABC", Number: 1, Origin: "FRA", DayOfOrigin: "2026-03-29"},
		{Airline: "ABCD", Number: 1, Origin: "EDDF", DayOfOrigin: "2026-03-29"},
		{Airline: "AB", Number: 1, Suffix: "A", Origin: "FRA", DayOfOrigin: "2026-03-29"},
		{Airline: "AB", Number: 2, Origin: "FRA", DayOfOrigin: "2026-03-29"},
		{Airline: "AB", Number: 1, Origin: "FRB", DayOfOrigin: "2026-03-29"},
		{Airline: "AB", Number: 1, Origin: "FRA", DayOfOrigin: "2026-03-30"},
		{Airline: "AB", Number: 1, Origin: "FRA", DayOfOrigin: "1969-12-31"},
		{Airline: "BA", Number: 1, Origin: "FRA", DayOfOrigin: "2026-03-29"},
	}
	seen := map[dkey]Designator{k0: base}
	for _, d := range differ {
		k, ok := pack(d)
		if !ok {
			t.Fatalf("%v does not pack", d)
		}
		if other, dup := seen[k]; dup {
			t.Errorf("%v and %v pack alike", d, other)
		}
		seen[k] = d
	}
	for _, d := range []Designator{
		{Airline: "ABCDE", Number: 1, Origin: "FRA", DayOfOrigin: "2026-03-29"},
		{Airline: "AB", Number: 70000, Origin: "FRA", DayOfOrigin: "2026-03-29"},
		{Airline: "AB", Number: 1, Suffix: "AB", Origin: "FRA", DayOfOrigin: "2026-03-29"},
		{Airline: "AB", Number: 1, Origin: "FRA", DayOfOrigin: "2026-3-29"},
		{Airline: "AB", Number: 1, Origin: "FRA", DayOfOrigin: "2026-02-30"},
		{Airline: "AB\x00", Number: 1, Origin: "FRA", DayOfOrigin: "2026-03-29"},
	} {
		if _, ok := pack(d); ok {
			t.Errorf("%q packs", d)
		}
	}
}

// Legs whose designators do not pack (a log written before the checks
// of today's Leg.Validate, say) are still matched as duplicates.
func TestDuplicatesOfDesignatorsThatDoNotPack(t *testing.T) {
	v := NewValidation()
	odd := leg("l1", "ABCD", 7, "FRA", "MUC", 0, 60)
	odd.DayOfOrigin = "someday"
	twin := odd
	twin.ID = "l2"
	v.addLegs("r1", []Leg{odd})
	v.addLegs("r2", []Leg{twin})
	if c, _ := v.Counts(); c.DuplicateDesignator != 2 {
		t.Fatalf("two legs of one odd designator: %d duplicate violations, want 2", c.DuplicateDesignator)
	}
	v.removeLeg("r2", "l2")
	if c, _ := v.Counts(); c.DuplicateDesignator != 0 {
		t.Fatalf("after removing one: %d duplicate violations, want 0", c.DuplicateDesignator)
	}
	if len(v.oddDesigs) != 1 || len(v.designators) != 0 {
		t.Fatalf("index: %d odd, %d packed; want 1 and 0", len(v.oddDesigs), len(v.designators))
	}
}
