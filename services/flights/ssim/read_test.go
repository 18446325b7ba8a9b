package ssim

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// formatLeg is the golden form of a dated leg: one line, every field.
func formatLeg(l DatedLeg) string {
	var b strings.Builder
	fmt.Fprintf(&b, "line %d %v %02d/%02d %c %s-%s %s %s %s",
		l.Record, l.Designator(), l.IVI, l.LegSeq, l.ServiceType, l.Origin, l.Destination,
		l.Departure.Format("2006-01-02T15:04Z"), l.Arrival.Format("2006-01-02T15:04Z"), l.AircraftType)
	if !l.Onward.IsZero() {
		fmt.Fprintf(&b, " onward %s%04d%s+%d", l.Onward.Airline, l.Onward.Number, l.Onward.Suffix, l.Onward.Layover)
	}
	return b.String()
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readCollect reads src and returns the golden lines of its legs and the
// rejections.
func readCollect(t testing.TB, src []byte, opts Options) ([]DatedLeg, []Rejection, Stats, error) {
	t.Helper()
	var rejs []Rejection
	onReject := opts.OnReject
	opts.OnReject = func(r Rejection) {
		rejs = append(rejs, r)
		if onReject != nil {
			onReject(r)
		}
	}
	legs, st, err := ReadAll(bytes.NewReader(src), opts)
	return legs, rejs, st, err
}

func TestReadBasicGolden(t *testing.T) {
	src := readFile(t, "testdata/basic.ssim")
	legs, rejs, st, err := readCollect(t, src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rejs {
		t.Errorf("unexpected rejection: %v", r)
	}
	var got strings.Builder
	for _, l := range legs {
		got.WriteString(formatLeg(l))
		got.WriteByte('\n')
	}
	const golden = "testdata/basic.golden"
	if *update {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want := string(readFile(t, golden)); got.String() != want {
		t.Errorf("legs differ from %s (run with -update after checking):\n got:\n%s\nwant:\n%s", golden, got.String(), want)
	}
	wantStats := Stats{Lines: 40, Padding: 24, Records: 16, Headers: 1, Carriers: 2, FlightLegRecords: 10,
		Segments: 1, Trailers: 2, DatedLegs: 34}
	if st != wantStats {
		t.Errorf("stats\n got %+v\nwant %+v", st, wantStats)
	}
}

// TestReadBasicRules pins the time and date rules on single legs of the
// fixture, independently of the golden file.
func TestReadBasicRules(t *testing.T) {
	legs, _, _, err := readCollect(t, readFile(t, "testdata/basic.ssim"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	find := func(designator string) DatedLeg {
		t.Helper()
		for _, l := range legs {
			if l.Designator().String() == designator {
				return l
			}
		}
		t.Fatalf("no leg %s", designator)
		return DatedLeg{}
	}
	utc := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse("2006-01-02T15:04Z", s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name, designator string
		dep, arr         string
	}{
		{"UTC mode, same day", "LH0400/FRA/2026-04-01", "2026-04-01T08:35Z", "2026-04-01T17:05Z"},
		{"arrival date variation 1", "LH0401/JFK/2026-04-01", "2026-04-01T21:30Z", "2026-04-02T06:00Z"},
		{"departure date variation 1: day of origin before departure", "LH0402/BOM/2026-04-01", "2026-04-02T08:30Z", "2026-04-02T13:45Z"},
		{"blank arrival variation, overnight fallback", "LH1234A/FRA/2026-04-13", "2026-04-13T23:30Z", "2026-04-14T00:30Z"},
		{"departure date variation A: day of origin after departure", "LH1160/FRA/2026-04-01", "2026-03-31T22:30Z", "2026-04-01T00:45Z"},
		{"local mode: UTC = local − variation", "BA0117/LHR/2026-04-02", "2026-04-02T07:25Z", "2026-04-02T15:10Z"},
		{"local mode: departure on the next UTC day", "BA0178/JFK/2026-03-30", "2026-03-31T02:00Z", "2026-03-31T09:00Z"},
		{"open-ended period ends at carrier validity", "BA0999/LHR/2026-04-11", "2026-04-11T06:00Z", "2026-04-11T07:20Z"},
		{"2400 and passenger STD fallback", "BA2490/LGW/2026-04-01", "2026-04-01T21:00Z", "2026-04-01T23:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := find(tt.designator)
			if !l.Departure.Equal(utc(tt.dep)) || !l.Arrival.Equal(utc(tt.arr)) {
				t.Errorf("%s: %v → %v, want %s → %s", tt.designator, l.Departure, l.Arrival, tt.dep, tt.arr)
			}
			if l.Departure.Location() != time.UTC {
				t.Errorf("departure location %v, want UTC", l.Departure.Location())
			}
		})
	}
	// Frequency rate 2 over 30MAR26–26APR26, Mondays: weeks 0 and 2 only.
	var fortnightly []string
	for _, l := range legs {
		if l.Number == 1234 {
			fortnightly = append(fortnightly, l.DayOfOrigin.String())
		}
	}
	if got := strings.Join(fortnightly, " "); got != "2026-03-30 2026-04-13" {
		t.Errorf("frequency rate 2 dates %s, want 2026-03-30 2026-04-13", got)
	}
	if l := find("LH1234A/FRA/2026-03-30"); l.Suffix != "A" || l.Record != 16 {
		t.Errorf("suffix %q record %d, want A 16", l.Suffix, l.Record)
	}
}

// TestReadVariants reads the fixture with every line ending and BOM
// combination and without the final newline: all must give the same legs.
func TestReadVariants(t *testing.T) {
	base := readFile(t, "testdata/basic.ssim")
	want, _, wantSt, err := readCollect(t, base, Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	crlf := bytes.ReplaceAll(base, []byte("\n"), []byte("\r\n"))
	bom := []byte("\xEF\xBB\xBF")
	variants := map[string][]byte{
		"CRLF":              crlf,
		"BOM LF":            append(append([]byte{}, bom...), base...),
		"BOM CRLF":          append(append([]byte{}, bom...), crlf...),
		"no final newline":  bytes.TrimSuffix(base, []byte("\n")),
		"CRLF no final EOL": bytes.TrimSuffix(crlf, []byte("\r\n")),
		"extra blank lines": bytes.ReplaceAll(base, []byte("\n5"), []byte("\n\n5")),
	}
	for name, src := range variants {
		t.Run(name, func(t *testing.T) {
			got, _, st, err := readCollect(t, src, Options{Strict: true})
			if err != nil {
				t.Fatal(err)
			}
			if name == "extra blank lines" {
				// Two empty lines were inserted before the trailers.
				wantSt.Lines += 2
				wantSt.Padding += 2
				defer func() { wantSt.Lines -= 2; wantSt.Padding -= 2 }()
				if st != wantSt {
					t.Errorf("stats %+v, want %+v", st, wantSt)
				}
				if len(got) != len(want) {
					t.Fatalf("%d legs, want %d", len(got), len(want))
				}
				return
			}
			if st != wantSt {
				t.Errorf("stats %+v, want %+v", st, wantSt)
			}
			if d := diffLegs(got, want, true); d != "" {
				t.Error(d)
			}
		})
	}
}

// diffLegs compares leg lists and describes the first difference.
func diffLegs(got, want []DatedLeg, withRecord bool) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d legs, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !withRecord {
			g.Record, w.Record = 0, 0
		}
		if !legEqual(g, w) {
			return fmt.Sprintf("leg %d:\n got %s\nwant %s", i, formatLeg(g), formatLeg(w))
		}
	}
	return ""
}

func legEqual(a, b DatedLeg) bool {
	if !a.Departure.Equal(b.Departure) || !a.Arrival.Equal(b.Arrival) {
		return false
	}
	a.Departure, a.Arrival, b.Departure, b.Arrival = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return a == b
}

func TestReadCallbackError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	st, err := Read(bytes.NewReader(readFile(t, "testdata/basic.ssim")), Options{}, func(DatedLeg) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("err %v, want stop", err)
	}
	if !strings.Contains(err.Error(), "line 11") {
		t.Errorf("err %q does not name line 11", err)
	}
	if st.DatedLegs != 2 {
		t.Errorf("dated legs %d, want the 2 delivered before the error", st.DatedLegs)
	}
}

func TestReadNilCallback(t *testing.T) {
	st, err := Read(bytes.NewReader(readFile(t, "testdata/basic.ssim")), Options{Strict: true}, nil)
	if err != nil || st.DatedLegs != 34 {
		t.Fatalf("stats %+v err %v", st, err)
	}
}
