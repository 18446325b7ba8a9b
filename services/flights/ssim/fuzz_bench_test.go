package ssim

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

func FuzzRead(f *testing.F) {
	basic, err := os.ReadFile("testdata/basic.ssim")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(basic, false)
	f.Add(bytes.ReplaceAll(basic, []byte("\n"), []byte("\r\n")), true)
	f.Add(file(hdr(), carrierRec(set(2, "L")), legRec(set(193, "A1")), segRec(), trailerRec()), false)
	f.Add(file(hdr(), carrierRec(), legRec(set(22, "00XXX00"), set(36, "2")), trailerRec()), false)
	f.Add(file(hdr(), carrierRec(), legRec(set(138, "LH  4011A"))), true)
	f.Add([]byte("\xEF\xBB\xBF"+hdr()), false)

	f.Fuzz(func(t *testing.T, src []byte, strict bool) {
		if len(src) > 1<<16 {
			return
		}
		var legs []DatedLeg
		rejected := 0
		opts := Options{Strict: strict, OnReject: func(r Rejection) {
			rejected++
			if r.Reason == "" || r.Line < 1 || len(r.Record) > excerptLen {
				t.Fatalf("bad rejection %+v", r)
			}
		}}
		// A record may expand to ~36,500 legs (a 100-year period); the
		// costly checks look at the first legs only so that every exec,
		// and the fuzzer's minimization, stays fast.
		st, err := Read(bytes.NewReader(src), opts, func(l DatedLeg) error {
			if !l.Arrival.After(l.Departure) {
				t.Fatalf("arrival %v not after departure %v", l.Arrival, l.Departure)
			}
			if dv := utcDay(l.Departure.Unix()) - l.DayOfOrigin.days(); dv < -2 || dv > 10 {
				t.Fatalf("departure %v is %d days from day of origin %v", l.Departure, dv, l.DayOfOrigin)
			}
			if len(legs) < 50 {
				if d, err := ParseDesignator(l.Designator().String()); err != nil || d != l.Designator() {
					t.Fatalf("designator %v does not round-trip: %v", l.Designator(), err)
				}
				legs = append(legs, l)
			}
			return nil
		})
		if st.Rejected != rejected || st.Records+st.Padding != st.Lines {
			t.Fatalf("stats %+v, %d rejections seen", st, rejected)
		}
		if strict && st.Rejected > 1 {
			t.Fatalf("strict mode went on after a rejection: %+v", st)
		}
		if err == nil && st.Headers == 0 {
			t.Fatalf("no error without a header: %+v", st)
		}
		// Whatever the writer accepts must read back identically.
		for _, l := range legs {
			var buf bytes.Buffer
			w := NewWriter(&buf, CarrierInfo{Airline: l.Airline})
			if w.Write(l) != nil {
				continue
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			back, _, err := ReadAll(&buf, Options{Strict: true})
			if err != nil || len(back) != 1 || !legEqual(withoutRecord(back[0]), withoutRecord(l)) {
				t.Fatalf("leg %s does not round-trip: %v %v", formatLeg(l), back, err)
			}
		}
	})
}

func withoutRecord(l DatedLeg) DatedLeg { l.Record = 0; return l }

// benchData returns an SSIM file of n type 3 records. With season, each
// record is a weekly pattern over a 31-week season (like real airline
// files, about 3.5 days a week: ~110 dated legs per record); otherwise each
// record is one dated leg (what the plain Writer produces).
func benchData(b *testing.B, n int, season bool) ([]byte, int) {
	b.Helper()
	r := rand.New(rand.NewPCG(42, 42))
	stations := []string{"FRA", "MUC", "JFK", "SIN", "BOM", "LHR", "CDG", "PMI", "HAM", "TXL", "ZRH", "VIE"}
	var buf bytes.Buffer
	w := NewWriter(&buf, CarrierInfo{Airline: "LH", ValidFrom: Date{2026, 3, 29}, ValidTo: Date{2026, 10, 24}})
	if err := w.begin(); err != nil {
		b.Fatal(err)
	}
	from := Date{2026, 3, 29}.days()
	for i := range n {
		k := legKey{airline: "LH", number: i % 10000, ivi: 1 + i/10000%99, legSeq: 1, service: 'J',
			origin: stations[r.IntN(len(stations))], dest: stations[r.IntN(len(stations))], aircraft: "320",
			std: r.IntN(minutesPerDay), depVar: 0}
		k.sta = (k.std + 60 + r.IntN(600)) % minutesPerDay
		if k.sta <= k.std {
			k.arrVar = 1
		}
		if i%3 == 0 {
			k.onward = Onward{Airline: "LH", Number: (i + 1) % 10000}
		}
		if season {
			if err := w.flightLeg(&k, from, from+31*7-1, uint8(1+r.IntN(127)), false); err != nil {
				b.Fatal(err)
			}
		} else {
			d := from + r.IntN(31*7)
			if err := w.flightLeg(&k, d, d, 1<<(ssimWeekday(d)-1), false); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	st, err := Read(bytes.NewReader(buf.Bytes()), Options{Strict: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return buf.Bytes(), st.DatedLegs
}

func BenchmarkRead(b *testing.B) {
	for _, season := range []bool{true, false} {
		name := "one-leg-records"
		if season {
			name = "season-records"
		}
		b.Run(name, func(b *testing.B) {
			data, legs := benchData(b, 100_000, season)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			var sink time.Time
			start := time.Now()
			for b.Loop() {
				if _, err := Read(bytes.NewReader(data), Options{Strict: true}, func(l DatedLeg) error {
					sink = l.Arrival
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			_ = sink
			b.ReportMetric(float64(legs)*float64(b.N)/time.Since(start).Seconds(), "legs/s")
			b.ReportMetric(float64(legs), "legs/op")
		})
	}
}

func BenchmarkWrite(b *testing.B) {
	// Flights on weekly patterns with gaps, plus stray single legs: what a
	// schedule export looks like.
	legs := randomSchedule(rand.New(rand.NewPCG(1, 1)), 100_000)
	for _, compact := range []bool{false, true} {
		b.Run(fmt.Sprintf("compact=%v", compact), func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				w := NewWriter(discard{}, CarrierInfo{Airline: "LH"})
				if compact {
					w = NewCompactWriter(discard{}, CarrierInfo{Airline: "LH"})
				}
				for _, l := range legs {
					if err := w.Write(l); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(legs))*float64(b.N)/time.Since(start).Seconds(), "legs/s")
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
