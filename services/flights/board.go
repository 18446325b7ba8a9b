package flights

import (
	"sort"
	"strings"
	"time"
)

// The schedule board (the web UI's main screen, as airline planning tools draw it): one
// lane per rotation, its legs on a time axis. A season has hundreds of
// rotations of a thousand legs each, so the board never asks for all of
// it: it lists the lanes that match its filters, then asks for the legs
// and violations of the lanes and the time window on screen. Both answers
// come from the validation view, whose rotations keep their legs sorted
// by departure: a window is two binary searches per lane.

// LaneFilter selects the board's lanes. Zero fields select everything.
type LaneFilter struct {
	From, To time.Time // lanes with a leg overlapping [From, To)
	Airline  string    // … of this airline
	Airport  string    // … from or to this airport
	Airplane string    // lanes whose airplane's registration contains this (case-insensitive)
	Rotation string    // lanes whose rotation id contains this (case-insensitive)
}

// Lane is one rotation of the board.
type Lane struct {
	Rotation     string `json:"rotation"`
	Airplane     string `json:"airplane,omitempty"`
	AirplaneType string `json:"airplane_type,omitempty"`
	Legs         int    `json:"legs"`       // legs in the filter's date range
	Violations   int    `json:"violations"` // all the rotation's violations
}

// Lanes is the answer of /api/board/lanes.
type Lanes struct {
	Lanes []Lane `json:"lanes"`
	// First departure and last arrival of the matching legs (zero when
	// no lane matches): where the board's time axis starts and ends.
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Position uint64    `json:"position"`
}

// window returns the indexes [i, j) of the legs of r that overlap
// [from, to). Legs of a rotation do not overlap, so sorted by departure
// they are sorted by arrival too.
func (v *Validation) window(r *vrot, from, to time.Time) (int, int) {
	i := 0
	if !from.IsZero() {
		i = sort.Search(len(r.legs), func(k int) bool { return v.at(r.legs[k]).arrival().After(from) })
	}
	j := len(r.legs)
	if !to.IsZero() {
		j = sort.Search(len(r.legs), func(k int) bool { return !v.at(r.legs[k]).departure().Before(to) })
	}
	return i, max(i, j)
}

// BoardLanes lists the lanes matching f, in rotation id order.
func (v *Validation) BoardLanes(f LaneFilter) Lanes {
	plane, rot := strings.ToLower(f.Airplane), strings.ToLower(f.Rotation)
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := Lanes{Lanes: []Lane{}, Position: v.checkpoint}
	for id, r := range v.rotations {
		reg := v.rotPlane[id]
		if plane != "" && !strings.Contains(strings.ToLower(reg), plane) ||
			rot != "" && !strings.Contains(strings.ToLower(id), rot) {
			continue
		}
		i, j := v.window(r, f.From, f.To)
		if f.Airline != "" || f.Airport != "" {
			// A lane matches when one of its legs in the range does; the
			// scan stops there, so only lanes that do not match cost
			// their whole range.
			k := i
			for ; k < j; k++ {
				l := v.at(r.legs[k])
				if (f.Airline == "" || v.airline(l) == f.Airline) &&
					(f.Airport == "" || v.origin(l) == f.Airport || v.destination(l) == f.Airport) {
					break
				}
			}
			if k == j {
				continue
			}
		} else if i == j && (!f.From.IsZero() || !f.To.IsZero()) {
			continue // nothing in the date range
		}
		lane := Lane{Rotation: id, Airplane: reg, Legs: j - i, Violations: len(v.byRotation[id])}
		if a := v.airplanes[reg]; a != nil {
			lane.AirplaneType = a.Type
		}
		if i < j {
			if d := v.at(r.legs[i]).departure(); out.From.IsZero() || d.Before(out.From) {
				out.From = d
			}
			if a := v.at(r.legs[j-1]).arrival(); a.After(out.To) {
				out.To = a
			}
		}
		out.Lanes = append(out.Lanes, lane)
	}
	sort.Slice(out.Lanes, func(i, j int) bool { return out.Lanes[i].Rotation < out.Lanes[j].Rotation })
	return out
}

// LaneWindow is one lane's legs and violations in a time window.
type LaneWindow struct {
	Rotation   string      `json:"rotation"`
	Airplane   string      `json:"airplane,omitempty"`
	Legs       []Leg       `json:"legs"`
	Violations []Violation `json:"violations"`
}

// Window is the answer of /api/board/legs.
type Window struct {
	From     time.Time    `json:"from"`
	To       time.Time    `json:"to"`
	Lanes    []LaneWindow `json:"lanes"`
	Position uint64       `json:"position"`
}

// BoardWindow returns, for each named rotation that exists, its legs
// overlapping [from, to) and its violations whose time (the second leg's
// departure) is in [from, to), both in time order. A pair violation is
// drawn between its two legs; a client that fetches a margin around what
// it shows has both.
func (v *Validation) BoardWindow(rotations []string, from, to time.Time) Window {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := Window{From: from, To: to, Lanes: make([]LaneWindow, 0, len(rotations)), Position: v.checkpoint}
	for _, id := range rotations {
		r := v.rotations[id]
		if r == nil {
			continue
		}
		i, j := v.window(r, from, to)
		lw := LaneWindow{Rotation: id, Airplane: v.rotPlane[id], Legs: make([]Leg, 0, j-i), Violations: []Violation{}}
		for _, ref := range r.legs[i:j] {
			l := v.at(ref)
			lw.Legs = append(lw.Legs, v.leg(l))
		}
		for _, x := range v.byRotation[id] {
			if !x.Time.Before(from) && x.Time.Before(to) {
				lw.Violations = append(lw.Violations, *x)
			}
		}
		sort.Slice(lw.Violations, func(a, b int) bool {
			va, vb := &lw.Violations[a], &lw.Violations[b]
			if !va.Time.Equal(vb.Time) {
				return va.Time.Before(vb.Time)
			}
			return va.ID < vb.ID
		})
		out.Lanes = append(out.Lanes, lw)
	}
	return out
}

// BoardMeta is what the board's filters offer: the airlines and airports
// that legs use, the airplanes, and the schedule's extent.
type BoardMeta struct {
	Airlines  []string   `json:"airlines"`
	Airports  []string   `json:"airports"`
	Airplanes []Airplane `json:"airplanes"`
	From      time.Time  `json:"from"`
	To        time.Time  `json:"to"`
	Stats     Stats      `json:"schedule"`
	Position  uint64     `json:"position"`
}

// BoardMeta scans the schedule once. The HTTP layer caches the answer by
// view position, so it is computed once per change, not per request.
func (v *Validation) BoardMeta() BoardMeta {
	v.mu.RLock()
	defer v.mu.RUnlock()
	airlines, airports := map[string]bool{}, map[string]bool{}
	m := BoardMeta{Airplanes: []Airplane{}, Position: v.checkpoint}
	var seen []string // a rotation's airports and airlines: few, repeated daily
	note := func(x string) {
		for _, y := range seen {
			if x == y {
				return
			}
		}
		seen = append(seen, x)
	}
	for _, r := range v.rotations {
		seen = seen[:0]
		for _, ref := range r.legs {
			l := v.at(ref)
			note(v.origin(l))
			note(v.destination(l))
			if len(seen) > 64 { // not a repeating pattern: a map is faster now
				for _, x := range seen {
					airports[x] = true
				}
				seen = seen[:0]
			}
		}
		for _, x := range seen {
			airports[x] = true
		}
		seen = seen[:0]
		for _, ref := range r.legs {
			l := v.at(ref)
			note(v.airline(l))
		}
		for _, x := range seen {
			airlines[x] = true
		}
		if n := len(r.legs); n > 0 {
			if d := v.at(r.legs[0]).departure(); m.From.IsZero() || d.Before(m.From) {
				m.From = d
			}
			if a := v.at(r.legs[n-1]).arrival(); a.After(m.To) {
				m.To = a
			}
		}
	}
	for _, a := range v.airplanes {
		if a.Created && !a.Removed {
			m.Airplanes = append(m.Airplanes, *a)
		}
	}
	sort.Slice(m.Airplanes, func(i, j int) bool { return m.Airplanes[i].Registration < m.Airplanes[j].Registration })
	m.Airlines, m.Airports = sortedKeys(airlines), sortedKeys(airports)
	m.Stats = Stats{Legs: v.nlegs, Rotations: len(v.rotations), Airplanes: len(m.Airplanes)}
	return m
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
