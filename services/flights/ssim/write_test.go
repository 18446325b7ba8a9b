package ssim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var testCarrier = CarrierInfo{Airline: "LH", Season: "S26", ValidFrom: Date{2026, 3, 29}, ValidTo: Date{2026, 10, 24},
	Created: Date{2026, 3, 20}, Title: "LUFTHANSA SUMMER 2026"}

// randomLeg returns a valid leg with random fields: suffixes, overnight and
// multi-day arrivals, day of origin before and after the departure date,
// onward flights.
func randomLeg(r *rand.Rand, airline string) DatedLeg {
	stations := []string{"FRA", "MUC", "JFK", "SIN", "BOM", "LHR", "CDG", "PMI"}
	types := []string{"744", "320", "32N", "77W", "E90", "7"}
	base := Date{2026, 3, 29}.days()
	depDay := base + r.IntN(220)
	dep := int64(depDay)*secondsPerDay + int64(r.IntN(minutesPerDay))*60
	arr := dep + int64(20+r.IntN(20*60))*60
	if r.IntN(20) == 0 {
		arr += 2 * secondsPerDay // a few multi-day legs
	}
	arrDay := utcDay(arr)
	// Day of origin: depDay − dv with dv in −1…9 and arrDay − origin ≤ 9.
	maxDV := 9 - (arrDay - depDay)
	dv := -1 + r.IntN(maxDV+2)
	if r.IntN(2) == 0 {
		dv = 0
	}
	l := DatedLeg{
		Airline: airline, Number: r.IntN(10000), IVI: 1 + r.IntN(99), LegSeq: 1 + r.IntN(99),
		ServiceType:  "JCFGPY"[r.IntN(6)],
		Origin:       stations[r.IntN(len(stations))],
		Destination:  stations[r.IntN(len(stations))],
		Departure:    time.Unix(dep, 0).UTC(),
		Arrival:      time.Unix(arr, 0).UTC(),
		DayOfOrigin:  dateFromDays(depDay - dv),
		AircraftType: types[r.IntN(len(types))],
	}
	if r.IntN(4) == 0 {
		l.Suffix = string(rune('A' + r.IntN(26)))
	}
	if r.IntN(2) == 0 {
		l.Onward = Onward{Airline: []string{"LH", "LX", "DLH", "4U"}[r.IntN(4)], Number: r.IntN(10000), Layover: r.IntN(10)}
		if r.IntN(4) == 0 {
			l.Onward.Suffix = string(rune('A' + r.IntN(26)))
		}
	}
	return l
}

// randomSchedule returns legs of a few flights flown on random weekly and
// fortnightly patterns with gaps, shuffled with random single legs and a
// few duplicates: input the compact writer can actually group.
func randomSchedule(r *rand.Rand, n int) []DatedLeg {
	var legs []DatedLeg
	for len(legs) < n {
		tmpl := randomLeg(r, "LH")
		mask := uint8(1 + r.IntN(127))
		step := 7
		if r.IntN(4) == 0 {
			step = 14
		}
		weeks := 1 + r.IntN(30)
		for w := 0; w < weeks; w++ {
			if r.IntN(10) == 0 {
				continue // a gap
			}
			for wd := range 7 {
				if mask&(1<<wd) == 0 {
					continue
				}
				shift := int64(w*step+wd) * secondsPerDay
				l := tmpl
				l.Departure = tmpl.Departure.Add(time.Duration(shift) * time.Second)
				l.Arrival = tmpl.Arrival.Add(time.Duration(shift) * time.Second)
				l.DayOfOrigin = tmpl.DayOfOrigin.AddDays(w*step + wd)
				legs = append(legs, l)
			}
		}
		if r.IntN(3) == 0 {
			legs = append(legs, randomLeg(r, "LH"))
		}
		if r.IntN(5) == 0 && len(legs) > 0 {
			legs = append(legs, legs[r.IntN(len(legs))]) // duplicate dated leg
		}
	}
	r.Shuffle(len(legs), func(i, j int) { legs[i], legs[j] = legs[j], legs[i] })
	return legs
}

func writeAll(t testing.TB, w *Writer, legs []DatedLeg) {
	t.Helper()
	for _, l := range legs {
		if err := w.Write(l); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func sortedLegStrings(legs []DatedLeg) []string {
	s := make([]string, len(legs))
	for i, l := range legs {
		l.Record = 0
		s[i] = formatLeg(l) + fmt.Sprintf(" %+v", l)
	}
	slices.Sort(s)
	return s
}

func TestRoundTripPlain(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		legs := make([]DatedLeg, 1+r.IntN(200))
		for i := range legs {
			legs[i] = randomLeg(r, "LH")
		}
		var buf bytes.Buffer
		writeAll(t, NewWriter(&buf, testCarrier), legs)
		got, _, _, err := readCollect(t, buf.Bytes(), Options{Strict: true})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if d := diffLegs(got, legs, false); d != "" {
			t.Fatalf("round %d: %s", round, d)
		}
	}
}

func TestRoundTripCompact(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 20 {
		legs := randomSchedule(r, 1+r.IntN(2000))
		var plain, compact bytes.Buffer
		writeAll(t, NewWriter(&plain, testCarrier), legs)
		writeAll(t, NewCompactWriter(&compact, testCarrier), legs)
		got, _, st, err := readCollect(t, compact.Bytes(), Options{Strict: true})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !slices.Equal(sortedLegStrings(got), sortedLegStrings(legs)) {
			t.Fatalf("round %d: compact round trip differs", round)
		}
		if st.FlightLegRecords >= len(legs) && len(legs) > 50 {
			t.Errorf("round %d: %d records for %d legs: nothing grouped", round, st.FlightLegRecords, len(legs))
		}
		if compact.Len() > plain.Len() {
			t.Errorf("round %d: compact %d bytes > plain %d", round, compact.Len(), plain.Len())
		}
	}
}

func TestCompactPatterns(t *testing.T) {
	leg := func(d Date) DatedLeg {
		dep := d.Time().Add(8*time.Hour + 35*time.Minute)
		return DatedLeg{Airline: "LH", Number: 400, IVI: 1, LegSeq: 1, ServiceType: 'J', Origin: "FRA", Destination: "JFK",
			Departure: dep, Arrival: dep.Add(8*time.Hour + 30*time.Minute), DayOfOrigin: d, AircraftType: "744"}
	}
	var legs []DatedLeg
	// Mon/Wed/Fri for 4 weeks from 30MAR26, then Mondays every other week.
	for w := range 4 {
		for _, wd := range []int{0, 2, 4} {
			legs = append(legs, leg(Date{2026, 3, 30}.AddDays(7*w+wd)))
		}
	}
	for w := 4; w < 12; w += 2 {
		legs = append(legs, leg(Date{2026, 3, 30}.AddDays(7*w)))
	}
	var buf bytes.Buffer
	writeAll(t, NewCompactWriter(&buf, testCarrier), legs)
	var recs []string
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(line, "3") {
			recs = append(recs, line[14:36])
		}
	}
	want := []string{"30MAR2624APR261 3 5   ", "27APR2608JUN261      2"}
	if !slices.Equal(recs, want) {
		t.Errorf("records %q, want %q", recs, want)
	}
	got, _, _, err := readCollect(t, buf.Bytes(), Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	if d := diffLegs(got, legs, false); d != "" {
		t.Error(d)
	}
}

// TestWriterLayout checks the physical format: 200-byte records, blocks of
// 5 lines, serials counting up from 000001 over records only, trailer
// check reference and end codes.
func TestWriterLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var buf bytes.Buffer
	w := NewWriter(&buf, testCarrier)
	for range 7 {
		if err := w.Write(randomLeg(r, "LH")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.NextCarrier(CarrierInfo{Airline: "4U"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := w.Write(randomLeg(r, "4U")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines)%5 != 0 {
		t.Errorf("%d lines, want a multiple of 5", len(lines))
	}
	serial, prev := 0, ""
	var types, codes string
	for i, line := range lines {
		if len(line) != recordLen {
			t.Fatalf("line %d: length %d", i+1, len(line))
		}
		if isPadding([]byte(line)) {
			continue
		}
		serial++
		if got := line[194:]; got != fmt.Sprintf("%06d", serial) {
			t.Errorf("line %d: serial %s, want %06d", i+1, got, serial)
		}
		types += line[:1]
		if line[0] == '5' {
			if line[187:193] != prev {
				t.Errorf("line %d: serial check reference %s, want %s", i+1, line[187:193], prev)
			}
			codes += line[193:194]
		}
		prev = line[194:]
	}
	if want := "12" + strings.Repeat("3", 7) + "52" + "333" + "5"; types != want {
		t.Errorf("record types %s, want %s", types, want)
	}
	if codes != "CE" {
		t.Errorf("trailer codes %s, want CE", codes)
	}
	if !strings.HasPrefix(lines[5], "2ULH      S26 29MAR2624OCT2620MAR26LUFTHANSA SUMMER 2026") {
		t.Errorf("carrier record %q", lines[5][:70])
	}
	_, _, st, err := readCollect(t, buf.Bytes(), Options{Strict: true})
	if err != nil || st.DatedLegs != 10 || st.Carriers != 2 {
		t.Errorf("read back: %+v %v", st, err)
	}
}

func TestWriterSerialWrap(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, testCarrier)
	w.serial = 999996 // header 999997, carrier 999998
	r := rand.New(rand.NewPCG(7, 8))
	writeAll(t, w, []DatedLeg{randomLeg(r, "LH"), randomLeg(r, "LH")})
	var serials []string
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		if line := sc.Text(); !isPadding([]byte(line)) {
			serials = append(serials, line[194:])
		}
	}
	want := []string{"999997", "999998", "999999", "000002", "000003"}
	if !slices.Equal(serials, want) {
		t.Errorf("serials %v, want %v", serials, want)
	}
}

func TestWriterRefusesLegs(t *testing.T) {
	good := randomLeg(rand.New(rand.NewPCG(9, 10)), "LH")
	good.Departure = time.Date(2026, 4, 1, 8, 0, 0, 0, time.UTC)
	good.Arrival = good.Departure.Add(2 * time.Hour)
	good.DayOfOrigin = Date{2026, 4, 1}
	tests := []struct {
		name   string
		change func(*DatedLeg)
		want   string
	}{
		{"other airline", func(l *DatedLeg) { l.Airline = "BA" }, `airline "BA" is not the carrier's "LH"`},
		{"bad airline", func(l *DatedLeg) { l.Airline = "L" }, `airline "L" invalid`},
		{"flight number", func(l *DatedLeg) { l.Number = 10000 }, "flight number 10000 out of range"},
		{"suffix", func(l *DatedLeg) { l.Suffix = "AB" }, `suffix "AB" invalid`},
		{"IVI", func(l *DatedLeg) { l.IVI = 0 }, "IVI 0 out of range"},
		{"leg sequence", func(l *DatedLeg) { l.LegSeq = 100 }, "leg sequence number 100 out of range"},
		{"service type", func(l *DatedLeg) { l.ServiceType = 0 }, "service type"},
		{"origin", func(l *DatedLeg) { l.Origin = "fra" }, `departure airport "fra" invalid`},
		{"destination", func(l *DatedLeg) { l.Destination = "" }, `arrival airport "" invalid`},
		{"aircraft", func(l *DatedLeg) { l.AircraftType = "" }, `aircraft type "" invalid`},
		{"onward without airline", func(l *DatedLeg) { l.Onward = Onward{Number: 5} }, `onward airline "" invalid`},
		{"onward layover", func(l *DatedLeg) { l.Onward = Onward{Airline: "LH", Layover: 10} }, "onward layover 10"},
		{"seconds", func(l *DatedLeg) { l.Departure = l.Departure.Add(time.Second) }, "not a whole minute"},
		{"arrival before departure", func(l *DatedLeg) { l.Arrival = l.Departure }, "not after departure"},
		{"day of origin too early", func(l *DatedLeg) { l.DayOfOrigin = Date{2026, 3, 20} }, "12 days after day of origin"},
		{"day of origin too late", func(l *DatedLeg) { l.DayOfOrigin = Date{2026, 4, 3} }, "-2 days after day of origin"},
		{"arrival too late", func(l *DatedLeg) { l.Arrival = l.Departure.Add(240 * time.Hour) }, "arrival date 2026-04-11 is 10 days"},
		{"year 2070", func(l *DatedLeg) {
			l.Departure = l.Departure.AddDate(44, 0, 0)
			l.Arrival = l.Departure.Add(time.Hour)
			l.DayOfOrigin = DateOf(l.Departure)
		}, "outside 1970–2069"},
		{"invalid day of origin", func(l *DatedLeg) { l.DayOfOrigin = Date{2026, 2, 30} }, "day of origin 2026-02-30 invalid"},
	}
	var buf bytes.Buffer
	w := NewWriter(&buf, testCarrier)
	for _, tt := range tests {
		l := good
		tt.change(&l)
		err := w.Write(l)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
	}
	// The writer is still usable.
	writeAll(t, w, []DatedLeg{good})
	got, _, _, err := readCollect(t, buf.Bytes(), Options{Strict: true})
	if err != nil || len(got) != 1 {
		t.Fatalf("%d legs, %v", len(got), err)
	}
	if err := w.Write(good); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

func TestWriterBadCarrier(t *testing.T) {
	for _, c := range []CarrierInfo{
		{Airline: "L"},
		{Airline: "LH", Season: "SUMMER"},
		{Airline: "LH", ValidFrom: Date{2026, 5, 1}, ValidTo: Date{2026, 4, 1}},
		{Airline: "LH", Created: Date{2070, 1, 1}},
		{Airline: "LH", Title: "é"},
	} {
		w := NewWriter(&bytes.Buffer{}, c)
		if err := w.Close(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func TestWriterEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := NewCompactWriter(&buf, CarrierInfo{Airline: "LH"}).Close(); err != nil {
		t.Fatal(err)
	}
	_, _, st, err := readCollect(t, buf.Bytes(), Options{Strict: true})
	if err != nil || st.Headers != 1 || st.Carriers != 1 || st.Trailers != 1 || st.DatedLegs != 0 {
		t.Errorf("%+v %v", st, err)
	}
	if !strings.Contains(buf.String(), "2ULH      "+"    00XXX0000XXX00") {
		t.Errorf("open validity not written as 00XXX00:\n%s", buf.String())
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n -= len(p); f.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestWriterIOError(t *testing.T) {
	w := NewWriter(&failWriter{n: 100_000}, testCarrier)
	r := rand.New(rand.NewPCG(11, 12))
	var err error
	for i := 0; i < 10_000 && err == nil; i++ {
		err = w.Write(randomLeg(r, "LH"))
	}
	if err == nil {
		err = w.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("err %v, want disk full", err)
	}
	if err2 := w.Close(); err2 == nil {
		t.Error("Close after I/O error returned nil")
	}
}
