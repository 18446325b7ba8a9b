package ssim

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// Record builders for hand-made files. Columns are 1-based as in the
// recipe.

type mod func([]byte)

func set(col int, s string) mod { return func(b []byte) { copy(b[col-1:], s) } }

func build(typ byte, mods ...mod) string {
	b := bytes.Repeat([]byte{' '}, recordLen)
	b[0] = typ
	for _, m := range mods {
		m(b)
	}
	return string(b)
}

func hdr() string {
	return build('1', set(2, "AIRLINE STANDARD SCHEDULE DATA SET"), set(195, "000001"))
}

func carrierRec(mods ...mod) string {
	return build('2', append([]mod{set(2, "U"), set(3, "LH "), set(11, "S26"),
		set(15, "29MAR26"), set(22, "24OCT26")}, mods...)...)
}

// legRec is LH 400 FRA–JFK on Mondays 30MAR26–12APR26 (2 dated legs), UTC.
func legRec(mods ...mod) string {
	return build('3', append([]mod{set(3, "LH "), set(6, " 400"), set(10, "0101J"),
		set(15, "30MAR2612APR261      "), set(37, "FRA08350835+0200  JFK17051705-0400  744"),
		set(193, "00")}, mods...)...)
}

func segRec(mods ...mod) string {
	return build('4', append([]mod{set(3, "LH "), set(6, " 400"), set(10, "0101J"),
		set(29, "AB010FRAJFK")}, mods...)...)
}

func trailerRec(mods ...mod) string {
	return build('5', append([]mod{set(3, "LH "), set(194, "E")}, mods...)...)
}

func file(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

type wantRej struct {
	line   int
	reason string
}

func checkRejections(t *testing.T, src []byte, opts Options, want []wantRej, wantLegs int) {
	t.Helper()
	legs, rejs, st, err := readCollect(t, src, opts)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if len(rejs) != len(want) {
		t.Errorf("%d rejections, want %d:", len(rejs), len(want))
		for _, r := range rejs {
			t.Errorf("  %v", r)
		}
		return
	}
	for i, r := range rejs {
		if r.Line != want[i].line || r.Reason != want[i].reason {
			t.Errorf("rejection %d:\n got line %d: %s\nwant line %d: %s", i, r.Line, r.Reason, want[i].line, want[i].reason)
		}
	}
	if st.Rejected != len(want) {
		t.Errorf("Stats.Rejected %d, want %d", st.Rejected, len(want))
	}
	if len(legs) != wantLegs || st.DatedLegs != wantLegs {
		t.Errorf("%d legs (stats %d), want %d", len(legs), st.DatedLegs, wantLegs)
	}
}

// TestFlightLegRejections mutates one field of a valid type 3 record on
// line 3; the valid record on line 4 must still be imported.
func TestFlightLegRejections(t *testing.T) {
	tests := []struct {
		name    string
		rec     string
		carrier string // default carrierRec()
		reason  string
	}{
		{"short record", legRec()[:150], "", "flight leg: record length 150, want 200"},
		{"long record", legRec() + "  ", "", "flight leg: record length 202, want 200"},
		{"suffix", legRec(set(2, "1")), "", "flight leg: operational suffix '1' invalid at column 2"},
		{"airline", legRec(set(3, "L!")), "", `flight leg: airline designator "L! " invalid at columns 3–5`},
		{"airline leading blank", legRec(set(3, " LH")), "", `flight leg: airline designator " LH" invalid at columns 3–5`},
		{"other airline", legRec(set(3, "BA ")), "", `flight leg: airline "BA" does not match carrier record airline "LH" (line 2)`},
		{"flight number missing", legRec(set(6, "    ")), "", "flight leg: flight number missing at columns 6–9"},
		{"flight number", legRec(set(6, "4 0 ")), "", `flight leg: flight number "4 0 " invalid at columns 6–9`},
		{"IVI 00", legRec(set(10, "00")), "", `flight leg: itinerary variation identifier "00" invalid at columns 10–11, want 01–99`},
		{"IVI", legRec(set(10, " 1")), "", `flight leg: itinerary variation identifier " 1" invalid at columns 10–11, want 01–99`},
		{"leg sequence", legRec(set(12, "0X")), "", `flight leg: leg sequence number "0X" invalid at columns 12–13, want 01–99`},
		{"service type missing", legRec(set(14, " ")), "", "flight leg: service type missing at column 14"},
		{"service type", legRec(set(14, "j")), "", "flight leg: service type 'j' invalid at column 14"},
		{"period from", legRec(set(15, "31FEB26")), "", `flight leg: period from "31FEB26" invalid at columns 15–21`},
		{"period from month", legRec(set(15, "01Mar26")), "", `flight leg: period from "01Mar26" invalid at columns 15–21`},
		{"period to", legRec(set(22, "12XYZ26")), "", `flight leg: period to "12XYZ26" invalid at columns 22–28`},
		{"period reversed", legRec(set(15, "12APR2630MAR26")), "", "flight leg: period from 2026-04-12 after period to 2026-03-30"},
		{"days of operation", legRec(set(29, "1X34567")), "", `flight leg: days of operation "1X34567" invalid at column 30`},
		{"days of operation order", legRec(set(29, "2      ")), "", `flight leg: days of operation "2      " invalid at column 29`},
		{"days of operation blank", legRec(set(29, "       ")), "", "flight leg: days of operation missing at columns 29–35"},
		{"frequency rate", legRec(set(36, "3")), "", "flight leg: frequency rate '3' invalid at column 36, want blank or '2'"},
		{"departure station missing", legRec(set(37, "   ")), "", "flight leg: departure station missing at columns 37–39"},
		{"departure station", legRec(set(37, "FR1")), "", `flight leg: departure station "FR1" invalid at columns 37–39`},
		{"aircraft STD", legRec(set(44, "2561")), "", `flight leg: aircraft STD "2561" invalid at columns 44–47, want HHMM 0000–2400`},
		{"aircraft STD 2401", legRec(set(44, "2401")), "", `flight leg: aircraft STD "2401" invalid at columns 44–47, want HHMM 0000–2400`},
		{"STD missing", legRec(set(40, "        ")), "", "flight leg: aircraft STD missing at columns 44–47 (passenger time at columns 40–43 blank too)"},
		{"passenger STD fallback invalid", legRec(set(40, "08x5    ")), "", `flight leg: passenger STD "08x5" invalid at columns 40–43, want HHMM 0000–2400`},
		{"departure variation", legRec(set(48, "+2X00")), "", `flight leg: departure UTC/local time variation "+2X00" invalid at columns 48–52, want ±HHMM`},
		{"departure variation range", legRec(set(48, "+1900")), "", `flight leg: departure UTC/local time variation "+1900" invalid at columns 48–52, want ±HHMM`},
		{"departure variation missing in local mode", legRec(set(48, "     ")), carrierRec(set(2, "L")),
			"flight leg: departure UTC/local time variation missing at columns 48–52 (required in local time mode)"},
		{"arrival station missing", legRec(set(55, "   ")), "", "flight leg: arrival station missing at columns 55–57"},
		{"aircraft STA", legRec(set(58, "1260")), "", `flight leg: aircraft STA "1260" invalid at columns 58–61, want HHMM 0000–2400`},
		{"arrival variation", legRec(set(66, "0400 ")), "", `flight leg: arrival UTC/local time variation "0400 " invalid at columns 66–70, want ±HHMM`},
		{"arrival variation missing in local mode", legRec(set(66, "     ")), carrierRec(set(2, "L")),
			"flight leg: arrival UTC/local time variation missing at columns 66–70 (required in local time mode)"},
		{"aircraft type missing", legRec(set(73, "   ")), "", "flight leg: aircraft type missing at columns 73–75"},
		{"aircraft type", legRec(set(73, "7-4")), "", `flight leg: aircraft type "7-4" invalid at columns 73–75`},
		{"onward airline missing", legRec(set(141, " 401")), "", `flight leg: onward flight airline missing at columns 138–140 (onward flight number " 401")`},
		{"onward number missing", legRec(set(138, "LH ")), "", "flight leg: onward flight number missing at columns 141–144"},
		{"onward airline", legRec(set(138, "L#  401")), "", `flight leg: onward flight airline "L# " invalid at columns 138–140`},
		{"onward number", legRec(set(138, "LH  4X1")), "", `flight leg: onward flight number " 4X1" invalid at columns 141–144`},
		{"layover", legRec(set(138, "LH  401X")), "", "flight leg: aircraft rotation layover 'X' invalid at column 145, want blank or 0–9"},
		{"onward suffix", legRec(set(138, "LH  4010a")), "", "flight leg: onward flight operational suffix 'a' invalid at column 146"},
		{"departure date variation", legRec(set(193, "X0")), "", "flight leg: date variation of departure 'X' invalid at column 193, want blank, 0–9, 'A' or 'J'"},
		{"arrival date variation", legRec(set(193, "0-")), "", "flight leg: date variation of arrival '-' invalid at column 194, want blank, 0–9, 'A' or 'J'"},
		{"arrival before departure", legRec(set(58, "0700")), "",
			`flight leg: arrival 2026-03-30T07:00Z is not after departure 2026-03-30T08:35Z (aircraft STA 0700, STD 0835, date variations "00")`},
		{"arrival variation before departure variation", legRec(set(193, "1A")), "",
			`flight leg: arrival 2026-03-28T17:05Z is not after departure 2026-03-30T08:35Z (aircraft STA 1705, STD 0835, date variations "1A")`},
		{"no day of operation", legRec(set(15, "31MAR2631MAR26")), "", `flight leg: period 31MAR26–31MAR26 has no day of operation "1      "`},
		{"open-ended and open carrier", legRec(set(22, "00XXX00")), carrierRec(set(22, "00XXX00")),
			"flight leg: period to is open-ended (00XXX00) and the carrier record (line 2) has no validity to"},
		{"open-ended from and blank carrier", legRec(set(15, "00XXX00")), carrierRec(set(15, "       ")),
			"flight leg: period from is open-ended (00XXX00) and the carrier record (line 2) has no validity from"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			car := tt.carrier
			if car == "" {
				car = carrierRec()
			}
			src := file(hdr(), car, tt.rec, legRec(set(48, "+0000"), set(66, "+0000")), trailerRec())
			checkRejections(t, src, Options{}, []wantRej{{3, tt.reason}}, 2)
		})
	}
}

// TestAcceptedVariants are records that look odd but are valid.
func TestAcceptedVariants(t *testing.T) {
	tests := []struct {
		name string
		rec  string
		legs int
	}{
		{"zero-padded flight number", legRec(set(6, "0400")), 2},
		{"frequency rate 1 is weekly", legRec(set(36, "1")), 2},
		{"stray layover without onward flight", legRec(set(145, "1")), 2},
		{"blank variations in UTC mode", legRec(set(48, "     "), set(66, "     ")), 2},
		{"2400 departure", legRec(set(44, "2400"), set(58, "0100"), set(193, "01")), 2},
		{"date variation J", legRec(set(193, "J0")), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRejections(t, file(hdr(), carrierRec(), tt.rec, trailerRec()), Options{Strict: true}, nil, tt.legs)
		})
	}
	t.Run("three-letter and digit airlines", func(t *testing.T) {
		for _, air := range []string{"DLH", "4U ", "U2 "} {
			legs, _, _, err := readCollect(t, file(hdr(), carrierRec(set(3, air)), legRec(set(3, air), set(138, air+"  401")),
				trailerRec(set(3, air))), Options{Strict: true})
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.TrimSpace(air); len(legs) != 2 || legs[0].Airline != want || legs[0].Onward.Airline != want {
				t.Errorf("%q: %d legs, first %+v", air, len(legs), legs[0])
			}
		}
	})
}

func TestStructuralRejections(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  []wantRej
		legs  int
	}{
		{"type 3 before carrier", []string{hdr(), legRec(), carrierRec(), legRec(), trailerRec()},
			[]wantRej{{2, "flight leg: type 3 record before any type 2 carrier record"}}, 2},
		{"type 3 after trailer", []string{hdr(), carrierRec(), trailerRec(), legRec()},
			[]wantRej{{4, "flight leg: type 3 record after the trailer record on line 3 and before the next type 2 carrier record"}}, 0},
		{"segment before carrier", []string{hdr(), segRec(), carrierRec(), trailerRec()},
			[]wantRej{{2, "segment: type 4 record before any type 2 carrier record"}}, 0},
		{"segment before leg", []string{hdr(), carrierRec(), segRec(), legRec(), trailerRec()},
			[]wantRej{{3, "segment: type 4 record before any type 3 flight leg record in its carrier block"}}, 2},
		{"segment of other flight", []string{hdr(), carrierRec(), legRec(), segRec(set(6, " 401")), trailerRec()},
			[]wantRej{{4, `segment: flight " LH  40101" (columns 2–11) does not match the preceding flight leg record (line 3) " LH  40001"`}}, 2},
		{"segment of rejected leg", []string{hdr(), carrierRec(), legRec(set(14, " ")), segRec(), trailerRec()},
			[]wantRej{{3, "flight leg: service type missing at column 14"}, {4, "segment: its flight leg record (line 3) was rejected"}}, 0},
		{"segment board point", []string{hdr(), carrierRec(), legRec(), segRec(set(34, "F1A")), trailerRec()},
			[]wantRej{{4, `segment: board point "F1A" invalid at columns 34–36`}}, 2},
		{"segment off point", []string{hdr(), carrierRec(), legRec(), segRec(set(37, "   ")), trailerRec()},
			[]wantRej{{4, `segment: off point "   " invalid at columns 37–39`}}, 2},
		{"segment length", []string{hdr(), carrierRec(), legRec(), segRec()[:199], trailerRec()},
			[]wantRej{{4, "segment: record length 199, want 200"}}, 2},
		{"trailer without carrier", []string{hdr(), trailerRec()},
			[]wantRej{{2, "trailer: type 5 record outside a carrier block (no type 2 carrier record before it)"}}, 0},
		{"trailer airline", []string{hdr(), carrierRec(), legRec(), trailerRec(set(3, "BA ")), legRec()},
			[]wantRej{
				{4, `trailer: airline "BA " at columns 3–5 does not match carrier record airline "LH" (line 2)`},
				{5, "flight leg: type 3 record after the trailer record on line 4 and before the next type 2 carrier record"},
			}, 2},
		{"trailer code", []string{hdr(), carrierRec(), trailerRec(set(194, "X"))},
			[]wantRej{{3, "trailer: continuation/end code 'X' invalid at column 194, want 'C' or 'E'"}}, 0},
		{"trailer length", []string{hdr(), carrierRec(), trailerRec()[:10]},
			[]wantRej{{3, "trailer: record length 10, want 200"}}, 0},
		{"missing trailer at end of file", []string{hdr(), carrierRec(), legRec()},
			[]wantRej{{4, "end of file: carrier block of LH (line 2) has no trailer record"}}, 2},
		{"missing trailer before next carrier", []string{hdr(), carrierRec(), legRec(), carrierRec(), legRec(), trailerRec()},
			[]wantRej{{4, "carrier record starts a new block but carrier block of LH (line 2) has no trailer record"}}, 4},
		{"header inside block", []string{hdr(), carrierRec(), hdr(), carrierRec(), legRec(), trailerRec()},
			[]wantRej{{3, "header record inside carrier block of LH (line 2), which has no trailer record"}}, 2},
		{"second header between blocks is fine", []string{hdr(), carrierRec(), trailerRec(), hdr(), carrierRec(), legRec(), trailerRec()}, nil, 2},
		{"header length", []string{hdr(), carrierRec(), trailerRec(), hdr()[:100]},
			[]wantRej{{4, "header: record length 100, want 200"}}, 0},
		{"rejected carrier rejects its records", []string{hdr(), carrierRec(set(2, "X")), legRec(), segRec(), trailerRec(), carrierRec(), legRec(), trailerRec()},
			[]wantRej{
				{2, "carrier: time mode 'X' invalid at column 2, want 'U' or 'L'"},
				{3, "flight leg: its carrier record (line 2) was rejected"},
				{4, "segment: its carrier record (line 2) was rejected"},
			}, 2},
		{"carrier airline", []string{hdr(), carrierRec(set(3, "L  ")), trailerRec()},
			[]wantRej{{2, `carrier: airline designator "L  " invalid at columns 3–5`}}, 0},
		{"carrier validity from", []string{hdr(), carrierRec(set(15, "29MRZ26")), trailerRec()},
			[]wantRej{{2, `carrier: validity from "29MRZ26" invalid at columns 15–21`}}, 0},
		{"carrier validity to", []string{hdr(), carrierRec(set(22, "32OCT26")), trailerRec()},
			[]wantRej{{2, `carrier: validity to "32OCT26" invalid at columns 22–28`}}, 0},
		{"carrier validity reversed", []string{hdr(), carrierRec(set(15, "24OCT2629MAR26")), trailerRec()},
			[]wantRej{{2, "carrier: validity from 24OCT26 after validity to 29MAR26"}}, 0},
		{"carrier length", []string{hdr(), carrierRec()[:199], legRec(), trailerRec()},
			[]wantRej{{2, "carrier: record length 199, want 200"}, {3, "flight leg: its carrier record (line 2) was rejected"}}, 0},
		{"unknown record type", []string{hdr(), carrierRec(), "X" + legRec()[1:], legRec(), trailerRec()},
			[]wantRej{{3, "unknown record type 'X'"}}, 2},
		{"zero line with other characters", []string{hdr(), carrierRec(), strings.Repeat("0", 50) + "1", legRec(), trailerRec()},
			[]wantRej{{3, "unknown record type '0' (not a padding line: '1' at column 51)"}}, 2},
		{"padding anywhere", []string{hdr(), strings.Repeat("0", 200), carrierRec(), "000", legRec(), strings.Repeat("0", 200), trailerRec(), "0"}, nil, 2},
		{"line too long for the buffer", []string{hdr(), carrierRec(), strings.Repeat("3", 100_000), legRec(), trailerRec()},
			[]wantRej{{3, "record length 100000, want 200"}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRejections(t, file(tt.lines...), Options{}, tt.want, tt.legs)
		})
	}
}

func TestRejectionExcerpt(t *testing.T) {
	_, rejs, _, _ := readCollect(t, file(hdr(), carrierRec(), legRec(set(14, " ")), trailerRec()), Options{})
	if len(rejs) != 1 || rejs[0].Record != legRec()[:13]+" "+legRec()[14:40] {
		t.Fatalf("rejections %+v", rejs)
	}
	if got, want := rejs[0].Error(), "line 3: flight leg: service type missing at column 14"; got != want {
		t.Errorf("Error() %q, want %q", got, want)
	}
}

func TestNoHeader(t *testing.T) {
	tests := map[string][]byte{
		"empty":           nil,
		"only padding":    file(strings.Repeat("0", 200), ""),
		"starts with 2":   file(carrierRec(), legRec(), trailerRec()),
		"short header":    file(hdr()[:120], carrierRec()),
		"not ssim at all": []byte("rotation,airline\nR1,LH\n"),
		"huge first line": []byte(strings.Repeat("1", 70_000)),
	}
	for name, src := range tests {
		t.Run(name, func(t *testing.T) {
			n := 0
			_, err := Read(bytes.NewReader(src), Options{}, func(DatedLeg) error { n++; return nil })
			if !errors.Is(err, ErrNoHeader) {
				t.Fatalf("err %v, want ErrNoHeader", err)
			}
			if n != 0 {
				t.Errorf("%d legs imported", n)
			}
		})
	}
}

func TestStrict(t *testing.T) {
	src := file(hdr(), carrierRec(), legRec(), legRec(set(29, "1X34567")), legRec(set(14, " ")), trailerRec())
	var seen []Rejection
	n := 0
	st, err := Read(bytes.NewReader(src), Options{Strict: true, OnReject: func(r Rejection) { seen = append(seen, r) }},
		func(DatedLeg) error { n++; return nil })
	var rej Rejection
	if !errors.As(err, &rej) {
		t.Fatalf("err %v, want a Rejection", err)
	}
	if want := `ssim: line 4: flight leg: days of operation "1X34567" invalid at column 30`; err.Error() != want {
		t.Errorf("err %q, want %q", err, want)
	}
	if rej.Line != 4 || len(seen) != 1 || st.Rejected != 1 {
		t.Errorf("rejection %+v, OnReject calls %d, stats %+v", rej, len(seen), st)
	}
	if n != 2 || st.DatedLegs != 2 {
		t.Errorf("%d legs before the rejection, want 2", n)
	}

	// A structural problem stops strict reading too.
	_, err = Read(bytes.NewReader(file(hdr(), carrierRec(), legRec())), Options{Strict: true}, nil)
	if !errors.As(err, &rej) || rej.Line != 4 || rej.Record != "" {
		t.Errorf("missing trailer: err %v", err)
	}
}

func TestOpenEnded(t *testing.T) {
	open := legRec(set(22, "00XXX00"))
	// Carrier validity to 12APR26: Mondays 30MAR and 06APR.
	checkRejections(t, file(hdr(), carrierRec(set(22, "12APR26")), open, trailerRec()), Options{Strict: true}, nil, 2)
	// Open carrier validity with Options.OpenEnd: Mondays up to 20APR26.
	checkRejections(t, file(hdr(), carrierRec(set(22, "00XXX00")), open, trailerRec()),
		Options{Strict: true, OpenEnd: Date{2026, 4, 20}}, nil, 4)
	// Open period from: carrier validity from (29MAR26, a Sunday) to 12APR26.
	checkRejections(t, file(hdr(), carrierRec(), legRec(set(15, "00XXX00"), set(29, "      7")), trailerRec()), Options{Strict: true}, nil, 3)
	// Blank carrier validity behaves as open.
	checkRejections(t, file(hdr(), carrierRec(set(22, "       ")), open, trailerRec()), Options{},
		[]wantRej{{3, "flight leg: period to is open-ended (00XXX00) and the carrier record (line 2) has no validity to"}}, 0)
}

func TestTwoDigitYears(t *testing.T) {
	for _, tt := range []struct {
		yy   string
		year int
	}{{"00", 2000}, {"69", 2069}, {"70", 1970}, {"99", 1999}} {
		day, open, ok := parseDDMMMYY([]byte("01JAN" + tt.yy))
		if !ok || open || dateFromDays(day) != (Date{tt.year, 1, 1}) {
			t.Errorf("01JAN%s: %v %v %v", tt.yy, dateFromDays(day), open, ok)
		}
	}
	if _, _, ok := parseDDMMMYY([]byte("29FEB25")); ok {
		t.Error("29FEB25 accepted")
	}
	if _, _, ok := parseDDMMMYY([]byte("29FEB28")); !ok {
		t.Error("29FEB28 rejected")
	}
}
