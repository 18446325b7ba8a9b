package ssim

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDateAgainstTime(t *testing.T) {
	for n := -800_000; n < 800_000; n += 7 {
		tm := time.Unix(int64(n)*secondsPerDay, 0).UTC()
		d := dateFromDays(n)
		if d != DateOf(tm) {
			t.Fatalf("day %d: %v, want %v", n, d, DateOf(tm))
		}
		if d.days() != n {
			t.Fatalf("%v: days %d, want %d", d, d.days(), n)
		}
		if d.Weekday() != tm.Weekday() {
			t.Fatalf("%v: weekday %v, want %v", d, d.Weekday(), tm.Weekday())
		}
		if got := ssimWeekday(n); got != (int(tm.Weekday())+6)%7+1 {
			t.Fatalf("%v: SSIM weekday %d", d, got)
		}
		if !d.Time().Equal(tm) {
			t.Fatalf("%v: Time %v", d, d.Time())
		}
	}
}

func TestDate(t *testing.T) {
	d, err := ParseDate("2026-03-29")
	if err != nil || d != (Date{2026, time.March, 29}) || d.String() != "2026-03-29" {
		t.Fatalf("%v %v", d, err)
	}
	for _, bad := range []string{"", "2026-3-29", "2026-02-29", "2026-13-01", "2026-00-10", "2026-04-31", "20260329", "2026/03/29", "0000-01-01", "+026-03-29"} {
		if _, err := ParseDate(bad); err == nil {
			t.Errorf("ParseDate(%q) accepted", bad)
		}
	}
	if _, err := ParseDate("2028-02-29"); err != nil {
		t.Error(err)
	}
	if got := d.AddDays(3); got != (Date{2026, 4, 1}) {
		t.Errorf("AddDays: %v", got)
	}
	if got := (Date{2026, 4, 1}).Sub(d); got != 3 {
		t.Errorf("Sub: %d", got)
	}
	if !d.Before(d.AddDays(1)) || !d.AddDays(1).After(d) || d.Compare(d) != 0 || d.Compare(Date{2025, 12, 31}) != 1 {
		t.Error("ordering")
	}
	if !(Date{}).IsZero() || d.IsZero() {
		t.Error("IsZero")
	}
	type doc struct{ D Date }
	b, err := json.Marshal(doc{d})
	if err != nil || string(b) != `{"D":"2026-03-29"}` {
		t.Fatalf("json %s %v", b, err)
	}
	var back doc
	if err := json.Unmarshal(b, &back); err != nil || back.D != d {
		t.Fatalf("json back %v %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"D":"2026-02-30"}`), &back); err == nil {
		t.Error("json accepted 2026-02-30")
	}
}

func TestDesignator(t *testing.T) {
	tests := []struct {
		d Designator
		s string
	}{
		{Designator{"LH", 400, "", "FRA", Date{2026, 3, 29}}, "LH0400/FRA/2026-03-29"},
		{Designator{"LH", 400, "A", "FRA", Date{2026, 3, 29}}, "LH0400A/FRA/2026-03-29"},
		{Designator{"DLH", 7, "", "MUC", Date{2026, 12, 1}}, "DLH0007/MUC/2026-12-01"},
		{Designator{"U2", 1234, "", "LGW", Date{2026, 1, 1}}, "U21234/LGW/2026-01-01"},
		{Designator{"9W", 0, "Z", "BOM", Date{2026, 1, 1}}, "9W0000Z/BOM/2026-01-01"},
	}
	for _, tt := range tests {
		if got := tt.d.String(); got != tt.s {
			t.Errorf("String %q, want %q", got, tt.s)
		}
		back, err := ParseDesignator(tt.s)
		if err != nil || back != tt.d {
			t.Errorf("ParseDesignator(%q) = %+v, %v", tt.s, back, err)
		}
	}
	for _, bad := range []string{"", "LH400/FRA/2026-03-29", "LH0400/FRA", "L0400/FRA/2026-03-29", "LH0400/FR/2026-03-29",
		"LH0400/FRA/2026-02-30", "LH04X0/FRA/2026-03-29", "lh0400/FRA/2026-03-29", "LHXX0400/FRA/2026-03-29"} {
		if d, err := ParseDesignator(bad); err == nil {
			t.Errorf("ParseDesignator(%q) accepted: %+v", bad, d)
		}
	}
}

func TestReadRotations(t *testing.T) {
	src := "\uFEFFrotation,airline,flight_number,suffix,day_of_origin,departure_airport\r\n" +
		"R1,LH,400,,2026-03-30,FRA\r\n" + // 2
		"R1,LH,0401,,2026-03-30,JFK\r\n" + // 3
		"\r\n" + // 4: blank lines are skipped
		"R2, LH ,1234,A,2026-04-13,FRA\r\n" + // 5: blanks around fields are dropped
		"R3,LH,400,,2026-02-30,FRA\r\n" + // 6 bad date
		"R3,LH,400,,,FRA\r\n" + // 7 missing day of origin
		"R3,LH,400,,2026-03-30\r\n" + // 8 five fields
		",LH,400,,2026-03-30,FRA\r\n" + // 9 missing rotation
		"R3,,400,,2026-03-30,FRA\r\n" + // 10 missing airline
		"R3,LH,,,2026-03-30,FRA\r\n" + // 11 missing flight number
		"R3,LH,400,,2026-03-30,\r\n" + // 12 missing airport
		"R3,LH,40000,,2026-03-30,FRA\r\n" + // 13 flight number range
		"R3,LH,-4,,2026-03-30,FRA\r\n" + // 14 negative
		"R3,LH,400,AB,2026-03-30,FRA\r\n" + // 15 suffix
		"R3,L-H,400,,2026-03-30,FRA\r\n" + // 16 airline
		"R3,LH,400,,2026-03-30,FRANKFURT\r\n" + // 17 airport
		"R3,LH,400,,2026-03-30,FRA\r\n" + // 18 duplicate of line 2
		"R3,LH,400,,2026-03-30,FRA,extra\r\n" + // 19 seven fields
		"R3,\"LH\"x,400,,2026-03-30,FRA\r\n" + // 20 CSV syntax
		"\"R 4\",LH,402,,2026-04-01,FRA\r\n" // 21 quoted
	got, rejs, err := ReadRotations(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []RotationAssignment{
		{"R1", Designator{"LH", 400, "", "FRA", Date{2026, 3, 30}}, 2},
		{"R1", Designator{"LH", 401, "", "JFK", Date{2026, 3, 30}}, 3},
		{"R2", Designator{"LH", 1234, "A", "FRA", Date{2026, 4, 13}}, 5},
		{"R3", Designator{"LH", 400, "", "FRA", Date{2026, 3, 30}}, 18},
		{"R 4", Designator{"LH", 402, "", "FRA", Date{2026, 4, 1}}, 21},
	}
	if !slices.Equal(got, want) {
		t.Errorf("assignments\n got %+v\nwant %+v", got, want)
	}
	wantRejs := []wantRej{
		{6, `rotations: day_of_origin: date "2026-02-30": no such day`},
		{7, "rotations: day_of_origin missing"},
		{8, "rotations: 5 fields, want 6 (rotation,airline,flight_number,suffix,day_of_origin,departure_airport)"},
		{9, "rotations: rotation missing"},
		{10, "rotations: airline missing"},
		{11, "rotations: flight_number missing"},
		{12, "rotations: departure_airport missing"},
		{13, `rotations: flight_number "40000" invalid: want 0–9999`},
		{14, `rotations: flight_number "-4" invalid: want 0–9999`},
		{15, `rotations: suffix "AB" invalid: want empty or one letter A–Z`},
		{16, `rotations: airline "L-H" invalid: want 2–3 characters A–Z, 0–9`},
		{17, `rotations: departure_airport "FRANKFURT" invalid: want 3 letters A–Z`},
		{19, "rotations: 7 fields, want 6 (rotation,airline,flight_number,suffix,day_of_origin,departure_airport)"},
		{20, `rotations: extraneous or missing " in quoted-field`},
	}
	if len(rejs) != len(wantRejs) {
		t.Fatalf("%d rejections, want %d: %+v", len(rejs), len(wantRejs), rejs)
	}
	for i, r := range rejs {
		if r.Line != wantRejs[i].line || r.Reason != wantRejs[i].reason {
			t.Errorf("rejection %d:\n got %d: %s\nwant %d: %s", i, r.Line, r.Reason, wantRejs[i].line, wantRejs[i].reason)
		}
	}
	if rejs[0].Record != "R3,LH,400,,2026-02-30,FRA" {
		t.Errorf("record excerpt %q", rejs[0].Record)
	}
}

func TestReadRotationsHeader(t *testing.T) {
	for name, src := range map[string]string{
		"empty":          "",
		"no header":      "R1,LH,400,,2026-03-30,FRA\n",
		"wrong order":    "airline,rotation,flight_number,suffix,day_of_origin,departure_airport\n",
		"missing column": "rotation,airline,flight_number,day_of_origin,departure_airport\n",
		"syntax":         "rotation,\"airline\nR1\n",
	} {
		if _, _, err := ReadRotations(strings.NewReader(src)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	got, rejs, err := ReadRotations(strings.NewReader("Rotation, Airline,FLIGHT_NUMBER,suffix,day_of_origin,departure_airport\n"))
	if err != nil || len(got) != 0 || len(rejs) != 0 {
		t.Errorf("header only: %v %v %v", got, rejs, err)
	}
}

func TestWriteRotations(t *testing.T) {
	rows := []RotationAssignment{
		{Rotation: "R1", Leg: Designator{"LH", 400, "", "FRA", Date{2026, 3, 30}}},
		{Rotation: "tail D-ABYA, \"Sunday\"", Leg: Designator{"LH", 1234, "A", "FRA", Date{2026, 4, 13}}},
	}
	var buf bytes.Buffer
	if err := WriteRotations(&buf, rows); err != nil {
		t.Fatal(err)
	}
	want := RotationHeader + "\nR1,LH,400,,2026-03-30,FRA\n\"tail D-ABYA, \"\"Sunday\"\"\",LH,1234,A,2026-04-13,FRA\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
	back, rejs, err := ReadRotations(&buf)
	if err != nil || len(rejs) != 0 || len(back) != 2 {
		t.Fatalf("%v %v %v", back, rejs, err)
	}
	for i := range back {
		back[i].Line = 0
	}
	if !slices.Equal(back, rows) {
		t.Errorf("round trip %+v", back)
	}
	for _, bad := range []RotationAssignment{
		{Rotation: "", Leg: rows[0].Leg},
		{Rotation: "a\nb", Leg: rows[0].Leg},
		{Rotation: " R1", Leg: rows[0].Leg},
		{Rotation: "R1", Leg: Designator{"LH", 400, "", "FRA", Date{}}},
		{Rotation: "R1", Leg: Designator{"LH", -1, "", "FRA", Date{2026, 1, 1}}},
	} {
		if err := WriteRotations(&bytes.Buffer{}, []RotationAssignment{bad}); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestChainByOnwardFixture(t *testing.T) {
	legs, _, _, err := readCollect(t, readFile(t, "testdata/basic.ssim"), Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	got := ChainByOnward(legs)
	// Indices: 0–5 LH400 and 6–11 LH401 on 30MAR 01APR 03APR 06APR 08APR
	// 10APR; 12–13 the two legs of LH402; 14–15 LH1234A; 16 LH1160; 17–23
	// BA117 and 24–30 BA178 daily 30MAR–05APR; 31–32 BA999; 33 BA2490.
	want := [][]int{
		{0, 6, 1, 7, 2, 8}, // LH401 of 03APR lands on a Saturday; layover 1 finds no Sunday LH400
		{3, 9, 4, 10, 5, 11},
		{12, 13}, // a multi-leg flight keeps its aircraft
		{14}, {15}, {16},
		{17, 24, 19, 26, 21, 28, 23, 30}, // BA178 departs on the next UTC day, layover 0 in local time
		{18, 25, 20, 27, 22, 29},
		{31}, {32}, {33},
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("rotations\n got %v\nwant %v", got, want)
	}
}

func TestChainByOnwardEdgeCases(t *testing.T) {
	at := func(s string) time.Time {
		v, _ := time.Parse("2006-01-02T15:04", s)
		return v
	}
	leg := func(num int, from, to, dep, arr string, onward Onward) DatedLeg {
		return DatedLeg{Airline: "LH", Number: num, IVI: 1, LegSeq: 1, ServiceType: 'J', Origin: from, Destination: to,
			Departure: at(dep), Arrival: at(arr), DayOfOrigin: DateOf(at(dep)), AircraftType: "320", Onward: onward}
	}
	legs := []DatedLeg{
		leg(1, "FRA", "MUC", "2026-04-01T08:00", "2026-04-01T09:00", Onward{Airline: "LH", Number: 2}),
		leg(3, "HAM", "MUC", "2026-04-01T07:00", "2026-04-01T08:00", Onward{Airline: "LH", Number: 2}), // claims the same onward leg later in the slice: loses
		leg(2, "MUC", "FRA", "2026-04-01T10:00", "2026-04-01T11:00", Onward{}),
		leg(2, "MUC", "FRA", "2026-04-02T10:00", "2026-04-02T11:00", Onward{}),
		// A cycle, impossible from Read: arrival before departure.
		leg(7, "AAA", "BBB", "2026-04-01T10:00", "2026-04-01T09:00", Onward{Airline: "LH", Number: 8}),
		leg(8, "BBB", "AAA", "2026-04-01T09:00", "2026-04-01T08:00", Onward{Airline: "LH", Number: 7}),
	}
	got := ChainByOnward(legs)
	want := [][]int{{0, 2}, {1}, {3}, {4, 5}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("rotations %v, want %v", got, want)
	}
	if got := ChainByOnward(nil); len(got) != 0 {
		t.Errorf("nil: %v", got)
	}
}

// A rotation id the store could not take (control characters, too long)
// is a rejection of its line, not a failure halfway through an import.
func TestReadRotationsRefusesBadIDs(t *testing.T) {
	src := RotationHeader + "\n" +
		"R1,LH,400,,2026-03-30,FRA\n" +
		"R\x01,LH,401,,2026-03-30,FRA\n" +
		strings.Repeat("R", 129) + ",LH,402,,2026-03-30,FRA\n"
	got, rejs, err := ReadRotations(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(rejs) != 2 || rejs[0].Line != 3 || rejs[1].Line != 4 {
		t.Fatalf("got %v, rejections %v", got, rejs)
	}
	for _, r := range rejs {
		if !strings.Contains(r.Reason, "rotation id") {
			t.Errorf("reason %q", r.Reason)
		}
	}
}
