package flights

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"sort"
	"time"
)

// The validation view's queries: counts, the schedule's size, rotations
// and pages of violations.

// vkey is an entry of the violation indexes (byCheck, byAirline,
// byTime): the index's key, then the violation's time and id.
type vkey struct {
	k  string
	t  int64
	id string
}

func lessKey(a, b vkey) bool {
	if a.k != b.k {
		return a.k < b.k
	}
	if a.t != b.t {
		return a.t < b.t
	}
	return a.id < b.id
}

// Filter selects violations. Zero fields select everything.
type Filter struct {
	Check    Check
	Rotation string
	Airline  string
	From, To time.Time // on the violation's time; To exclusive
}

// Page is one page of violations; Next is the cursor of the following
// page, empty at the end.
type Page struct {
	Violations []Violation `json:"violations"`
	Next       string      `json:"next,omitempty"`
}

// Counts are the number of violations per check.
type Counts struct {
	Continuity          int `json:"continuity"`
	MinGroundTime       int `json:"min_ground_time"`
	DuplicateDesignator int `json:"duplicate_designator"`
	Total               int `json:"total"`
}

// Counts returns the violation counts.
func (v *Validation) Counts() (Counts, uint64) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	c := Counts{
		Continuity:          v.counts[Continuity],
		MinGroundTime:       v.counts[MinGroundTime],
		DuplicateDesignator: v.counts[DuplicateDesignator],
	}
	c.Total = c.Continuity + c.MinGroundTime + c.DuplicateDesignator
	return c, v.checkpoint
}

// Stats are the schedule's size.
type Stats struct {
	Legs      int `json:"legs"`
	Rotations int `json:"rotations"`
	Airplanes int `json:"airplanes"`
}

// Stats returns the schedule's size.
func (v *Validation) Stats() Stats {
	v.mu.RLock()
	defer v.mu.RUnlock()
	planes := 0
	for _, a := range v.airplanes {
		if a.Created && !a.Removed {
			planes++
		}
	}
	return Stats{Legs: v.nlegs, Rotations: len(v.rotations), Airplanes: planes}
}

// Rotations returns every rotation with its legs, in id order.
func (v *Validation) Rotations() []RotationLegs {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]RotationLegs, 0, len(v.rotations))
	for id, r := range v.rotations {
		legs := make([]Leg, len(r.legs))
		for i, ref := range r.legs {
			legs[i] = v.leg(v.at(ref))
		}
		out = append(out, RotationLegs{ID: id, Legs: legs})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// RotationValid reports whether a rotation exists and has no violation.
func (v *Validation) RotationValid(id string) (valid, exists bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.rotations[id] == nil {
		return false, false
	}
	return len(v.byRotation[id]) == 0, true
}

// ErrBadCursor is returned for a cursor this view did not hand out.
var ErrBadCursor = fmt.Errorf("%w: malformed page cursor", ErrInvalid)

// Violations returns up to limit violations matching f, ordered by time
// (then id), starting after cursor.
func (v *Validation) Violations(f Filter, cursor string, limit int) (Page, error) {
	after, err := decodeCursor(cursor)
	if err != nil {
		return Page{}, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	match := func(x *Violation) bool {
		return (f.Check == "" || x.Check == f.Check) &&
			(f.Rotation == "" || x.Rotation == f.Rotation) &&
			(f.Airline == "" || contains(x.Airlines, f.Airline)) &&
			(f.From.IsZero() || !x.Time.Before(f.From)) &&
			(f.To.IsZero() || x.Time.Before(f.To))
	}
	var out []Violation
	var next string
	take := func(x *Violation) bool {
		if !match(x) {
			return true
		}
		if len(out) == limit {
			next = encodeCursor(out[len(out)-1])
			return false
		}
		out = append(out, *x)
		return true
	}
	if f.Rotation != "" {
		// A rotation's violations are few: sort them.
		all := make([]*Violation, 0, len(v.byRotation[f.Rotation]))
		for _, x := range v.byRotation[f.Rotation] {
			if after == nil || lessKey(*after, vkey{"", x.Time.UnixNano(), x.ID}) {
				all = append(all, x)
			}
		}
		sort.Slice(all, func(i, j int) bool {
			return lessKey(vkey{"", all[i].Time.UnixNano(), all[i].ID}, vkey{"", all[j].Time.UnixNano(), all[j].ID})
		})
		for _, x := range all {
			if !take(x) {
				break
			}
		}
		return Page{Violations: out, Next: next}, nil
	}
	tree, k := v.byTime, ""
	switch {
	case f.Airline != "":
		tree, k = v.byAirline, f.Airline
	case f.Check != "":
		tree, k = v.byCheck, string(f.Check)
	}
	lo := vkey{k: k, t: -1 << 63}
	if !f.From.IsZero() {
		lo.t = f.From.UnixNano()
	}
	if after != nil && lessKey(lo, vkey{k, after.t, after.id}) {
		lo = vkey{k, after.t, after.id + "\x00"}
	}
	hi := vkey{k: k + "\x00"}
	if !f.To.IsZero() {
		hi = vkey{k: k, t: f.To.UnixNano()}
	}
	tree.AscendRange(lo, hi, func(it vkey) bool { return take(v.violations[it.id]) })
	return Page{Violations: out, Next: next}, nil
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

func encodeCursor(x Violation) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(x.Time.UnixNano()))
	return base64.RawURLEncoding.EncodeToString(append(b, x.ID...))
}

func decodeCursor(c string) (*vkey, error) {
	if c == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 9 {
		return nil, ErrBadCursor
	}
	return &vkey{t: int64(binary.BigEndian.Uint64(b)), id: string(b[8:])}, nil
}
