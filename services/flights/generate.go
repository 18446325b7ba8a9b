package flights

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"
)

// GenerateOptions sizes a generated schedule. The defaults are a Lufthansa
// summer season: about 12,850 flights a week for 31 weeks, flown
// hub-and-spoke from FRA and MUC.
type GenerateOptions struct {
	Weeks          int     // default 31
	FlightsPerWeek int     // default 12,850
	Violations     float64 // fraction of legs given each kind of violation, default 0.01
	Seed           uint64  // default 1
	Start          time.Time
	Airline        string // default "LH"
}

func (c GenerateOptions) withDefaults() GenerateOptions {
	if c.Weeks <= 0 {
		c.Weeks = 31
	}
	if c.FlightsPerWeek <= 0 {
		c.FlightsPerWeek = 12_850
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Start.IsZero() {
		c.Start = time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC) // first day of the IATA summer season 2026
	}
	if c.Airline == "" {
		c.Airline = "LH"
	}
	return c
}

// GeneratedSchedule is a schedule with its rotations, ready to be written
// as SSIM and a rotation file.
type GeneratedSchedule struct {
	Airline   string
	Rotations []RotationLegs
	// Injected are the violations in the schedule, counted as CheckSchedule
	// (and so `flights check`) counts them. Before injection the schedule
	// has none.
	Injected CheckCounts
}

// RotationLegs is a rotation's legs, in order.
type RotationLegs struct {
	ID   string
	Legs []Leg
}

// Hubs and spokes with flight times from the hubs, in minutes; codes and
// times are real-looking, not a timetable.
var (
	hubs   = []string{"FRA", "MUC"}
	spokes = []struct {
		code string
		mins int
	}{
		{"AMS", 70}, {"ARN", 125}, {"ATH", 170}, {"BCN", 120}, {"BEG", 110}, {"BER", 65}, {"BHX", 95},
		{"BIO", 125}, {"BLL", 80}, {"BLQ", 80}, {"BRE", 60}, {"BRS", 100}, {"BRU", 60}, {"BSL", 55},
		{"BUD", 85}, {"CDG", 75}, {"CPH", 80}, {"CTA", 140}, {"DBV", 110}, {"DRS", 60}, {"DUB", 120},
		{"DUS", 50}, {"EDI", 120}, {"FCO", 105}, {"FLR", 90}, {"GOT", 100}, {"GVA", 70}, {"GDN", 95},
		{"HAJ", 55}, {"HAM", 65}, {"HEL", 145}, {"IST", 175}, {"KRK", 90}, {"KTW", 85}, {"LED", 170},
		{"LHR", 100}, {"LIN", 75}, {"LIS", 175}, {"LJU", 65}, {"LUX", 50}, {"LYS", 75}, {"MAD", 150},
		{"MAN", 110}, {"MRS", 100}, {"MXP", 70}, {"NAP", 115}, {"NCE", 95}, {"NUE", 45}, {"OPO", 165},
		{"OSL", 125}, {"OTP", 140}, {"PMI", 125}, {"PRG", 60}, {"RIX", 130}, {"SKG", 150}, {"SOF", 135},
		{"STR", 45}, {"SVQ", 170}, {"SZG", 50}, {"TLS", 115}, {"TRN", 80}, {"TXL", 65}, {"VCE", 75},
		{"VIE", 70}, {"VLC", 135}, {"VNO", 130}, {"WAW", 105}, {"WRO", 80}, {"ZAG", 75}, {"ZRH", 55},
		{"BOS", 515}, {"ORD", 560}, {"JFK", 520}, {"EWR", 515}, {"IAD", 535}, {"YYZ", 530}, {"SFO", 665},
		{"LAX", 690}, {"MIA", 625}, {"DXB", 380}, {"DEL", 450}, {"BOM", 505}, {"PEK", 560}, {"PVG", 690},
		{"HND", 720}, {"ICN", 650}, {"SIN", 730}, {"BKK", 650}, {"JNB", 640}, {"CPT", 700}, {"GRU", 710},
		{"EZE", 810}, {"MEX", 700}, {"TLV", 245}, {"CAI", 230}, {"RUH", 330}, {"DOH", 360}, {"AMM", 245},
	}
)

// GenerateSchedule builds a season: aircraft based at a hub fly round
// trips to spokes every day, the same pattern every day, with turn times
// of 40–90 minutes (well above the 30-minute default minimum), so that the
// schedule has no violation until a fraction of its legs is given one of
// each kind.
func GenerateSchedule(cfg GenerateOptions) (*GeneratedSchedule, error) {
	cfg = cfg.withDefaults()
	if cfg.Violations < 0 || cfg.Violations > 0.2 {
		return nil, errors.New("generate: violations must be a fraction between 0 and 0.2")
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	perDay := int(math.Ceil(float64(cfg.FlightsPerWeek) / 7))
	days := cfg.Weeks * 7
	if perDay > 9000 {
		return nil, errors.New("generate: at most 63,000 flights a week (flight numbers run out)")
	}

	// Daily patterns: each aircraft's day, as (origin, destination,
	// departure minute, duration) legs, until perDay legs are planned.
	type slot struct {
		from, to string
		dep, dur int
		number   int
	}
	var patterns [][]slot
	number := 100
	for planned := 0; planned < perDay; {
		hub := hubs[len(patterns)%len(hubs)]
		t := 330 + rng.IntN(90) // first departure 05:30–07:00 UTC
		var day []slot
		for planned < perDay {
			s := spokes[rng.IntN(len(spokes))]
			if s.mins > 640 {
				// The round trip would not be back in time for the
				// next morning's departure.
				continue
			}
			// A long-haul aircraft makes one round trip a day; short-haul
			// ones fly until about 21:00.
			if s.mins > 300 && len(day) > 0 {
				break
			}
			back := t + s.mins + 40 + rng.IntN(30)
			if back+s.mins > 21*60+30 && len(day) > 0 && s.mins <= 300 {
				break
			}
			day = append(day, slot{hub, s.code, t, s.mins, number}, slot{s.code, hub, back, s.mins, number + 1})
			number += 2
			planned += 2
			t = back + s.mins + 45 + rng.IntN(45)
			if s.mins > 300 {
				break
			}
		}
		patterns = append(patterns, day)
	}

	g := &GeneratedSchedule{Airline: cfg.Airline}
	for a, day := range patterns {
		rot := RotationLegs{ID: fmt.Sprintf("%s-R%04d", cfg.Airline, a+1)}
		for d := 0; d < days; d++ {
			date := cfg.Start.AddDate(0, 0, d)
			for _, s := range day {
				dep := date.Add(time.Duration(s.dep) * time.Minute)
				l := Leg{
					Airline: cfg.Airline, Number: s.number, Origin: s.from, Destination: s.to,
					DayOfOrigin: date.Format(time.DateOnly),
					Departure:   dep, Arrival: dep.Add(time.Duration(s.dur) * time.Minute),
					AircraftType: aircraftFor(s.dur),
				}
				l.ID = GeneratedLegID(l.Designator(), 1)
				rot.Legs = append(rot.Legs, l)
			}
		}
		g.Rotations = append(g.Rotations, rot)
	}
	if base := g.check(); base.Continuity+base.MinGroundTime+base.DuplicateDesignator != 0 {
		return nil, fmt.Errorf("generate: the base schedule has violations %+v (a generator bug)", base)
	}
	g.inject(rng, cfg.Violations)
	g.Injected = g.check()
	return g, nil
}

func aircraftFor(mins int) string {
	switch {
	case mins > 600:
		return "388"
	case mins > 300:
		return "359"
	case mins > 120:
		return "321"
	default:
		return "320"
	}
}

// GeneratedLegID names the n-th leg (from 1) with a designator: the
// designator in URL-safe form, "LH0400-FRA-20260329", with "~n" from the
// second on.
func GeneratedLegID(d Designator, n int) string {
	id := fmt.Sprintf("%s%04d%s-%s-%s", d.Airline, d.Number, d.Suffix, d.Origin,
		d.DayOfOrigin[0:4]+d.DayOfOrigin[5:7]+d.DayOfOrigin[8:10])
	if n > 1 {
		id += "~" + strconv.Itoa(n)
	}
	return id
}

func (g *GeneratedSchedule) check() CheckCounts {
	m := make(map[string][]Leg, len(g.Rotations))
	for _, r := range g.Rotations {
		m[r.ID] = r.Legs
	}
	return CheckSchedule(m, nil, nil)
}

// inject gives about frac of the legs each kind of violation, touching
// every leg at most once so that the kinds do not mask one another.
func (g *GeneratedSchedule) inject(rng *rand.Rand, frac float64) {
	var total int
	for _, r := range g.Rotations {
		total += len(r.Legs)
	}
	n := int(math.Round(frac * float64(total)))
	if n == 0 {
		return
	}
	type ref struct{ r, i int }
	touched := map[ref]bool{}
	// Legs with both neighbours untouched: a violation on a pair needs
	// the other leg of the pair left alone.
	pick := func() (ref, bool) {
		for range 1000 {
			x := ref{rng.IntN(len(g.Rotations)), 0}
			legs := g.Rotations[x.r].Legs
			if len(legs) < 3 {
				continue
			}
			x.i = 1 + rng.IntN(len(legs)-2)
			if !touched[x] && !touched[ref{x.r, x.i - 1}] && !touched[ref{x.r, x.i + 1}] {
				return x, true
			}
		}
		return ref{}, false
	}
	// Continuity: the leg departs from another airport than the previous
	// one reached.
	for range n {
		x, ok := pick()
		if !ok {
			break
		}
		l := &g.Rotations[x.r].Legs[x.i]
		prev := g.Rotations[x.r].Legs[x.i-1]
		for l.Origin == prev.Destination || l.Origin == l.Destination {
			l.Origin = spokes[rng.IntN(len(spokes))].code
		}
		l.ID = GeneratedLegID(l.Designator(), 1)
		touched[x] = true
	}
	// Minimal ground time: the leg leaves 5–25 minutes after the previous
	// one arrived (the default minimum is 30).
	for range n {
		x, ok := pick()
		if !ok {
			break
		}
		legs := g.Rotations[x.r].Legs
		l := &legs[x.i]
		dur := l.Arrival.Sub(l.Departure)
		l.Departure = legs[x.i-1].Arrival.Add(time.Duration(5+rng.IntN(21)) * time.Minute)
		l.Arrival = l.Departure.Add(dur)
		touched[x] = true
	}
	// Duplicate designators: a leg takes the flight number of another leg
	// leaving the same airport on the same day; each such pair is two
	// violations, so n/2 pairs.
	byOriginDay := map[[2]string][]ref{}
	for r, rot := range g.Rotations {
		for i, l := range rot.Legs {
			byOriginDay[[2]string{l.Origin, l.DayOfOrigin}] = append(byOriginDay[[2]string{l.Origin, l.DayOfOrigin}], ref{r, i})
		}
	}
	keys := make([][2]string, 0, len(byOriginDay))
	for k, v := range byOriginDay {
		if len(v) >= 2 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for pairs, tries := 0, 0; pairs < n/2 && len(keys) > 0 && tries < 100*n; tries++ {
		k := keys[rng.IntN(len(keys))]
		cands := byOriginDay[k]
		a, b := cands[rng.IntN(len(cands))], cands[rng.IntN(len(cands))]
		if a == b || touched[a] || touched[b] {
			continue
		}
		la, lb := &g.Rotations[a.r].Legs[a.i], &g.Rotations[b.r].Legs[b.i]
		lb.Number = la.Number
		lb.ID = GeneratedLegID(lb.Designator(), 2)
		touched[a], touched[b] = true, true
		pairs++
	}
	for r := range g.Rotations {
		sortLegs(g.Rotations[r].Legs)
	}
}
