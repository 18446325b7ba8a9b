package flights

import (
	"fmt"
	"time"
)

// The checks the validation view keeps: continuity and minimum ground
// time between consecutive legs of a rotation, duplicate designators, and
// the index of the violations they find.

// setNext records whether a has a successor, keeping the airport index
// — rotations with legs that have a successor, by the airport those
// arrive at — in step.
func (v *Validation) setNext(a, next *vleg) {
	if a == nil {
		return
	}
	switch {
	case !a.hasNext && next != nil:
		v.linkPrev(a)
	case a.hasNext && next == nil:
		v.unlinkPrev(a)
	}
}

func (v *Validation) dropPair(r *vrot, a, b *vleg) {
	for _, c := range []Check{Continuity, MinGroundTime} {
		if x := r.pairs[v.pairID(c, a, b)]; x != nil {
			v.removeViolation(x)
			delete(r.pairs, x.ID)
		}
	}
}

func (v *Validation) addPair(r *vrot, a, b *vleg) {
	for _, x := range v.pairViolations(r, v.planeMGT(r), a, b) {
		r.pairs[x.ID] = x
		v.addViolation(x)
	}
}

func (v *Validation) planeMGT(r *vrot) int {
	if reg := v.rotPlane[r.id]; reg != "" {
		if a := v.airplanes[reg]; a != nil && !a.Removed {
			return a.MinGroundTime
		}
	}
	return 0
}

// pairViolations evaluates the two pair rules on consecutive legs a, b.
func (v *Validation) pairViolations(r *vrot, planeMGT int, a, b *vleg) []*Violation {
	var out []*Violation
	if !v.continues(a, b) {
		out = append(out, &Violation{
			ID: v.pairID(Continuity, a, b), Check: Continuity, Rotation: r.id,
			Legs: []string{v.legID(a), v.legID(b)}, Airlines: v.airlines(a, b), Airport: v.origin(b), Time: b.departure(),
			Detail: fmt.Sprintf("%s arrives at %s but %s departs from %s", v.designator(a), v.destination(a), v.designator(b), v.origin(b)),
		})
	}
	need := max(v.minGroundAfter(a), planeMGT)
	if gap := b.departure().Sub(a.arrival()); gap < time.Duration(need)*time.Minute {
		out = append(out, &Violation{
			ID: v.pairID(MinGroundTime, a, b), Check: MinGroundTime, Rotation: r.id,
			Legs: []string{v.legID(a), v.legID(b)}, Airlines: v.airlines(a, b), Airport: v.destination(a), Time: b.departure(),
			Detail: fmt.Sprintf("ground time %s at %s between %s and %s, minimum %d min", fmtGap(gap), v.destination(a), v.designator(a), v.designator(b), need),
		})
	}
	return out
}

// recomputePairs re-evaluates every consecutive pair of one rotation and
// updates only the violations that changed: for bulk loads and for
// changes that concern all its pairs (an airplane's minimum).
func (v *Validation) recomputePairs(r *vrot) {
	fresh := make(map[string]*Violation)
	for i, ref := range r.legs {
		var next *vleg
		if i+1 < len(r.legs) {
			next = v.at(r.legs[i+1])
		}
		v.setNext(v.at(ref), next)
	}
	planeMGT := v.planeMGT(r)
	for i := 0; i+1 < len(r.legs); i++ {
		for _, x := range v.pairViolations(r, planeMGT, v.at(r.legs[i]), v.at(r.legs[i+1])) {
			fresh[x.ID] = x
		}
	}
	for id, old := range r.pairs {
		if nv, ok := fresh[id]; !ok || nv.Detail != old.Detail || !nv.Time.Equal(old.Time) {
			v.removeViolation(old)
			delete(r.pairs, id)
		}
	}
	for id, nv := range fresh {
		if _, ok := r.pairs[id]; !ok {
			r.pairs[id] = nv
			v.addViolation(nv)
		}
	}
}

func (v *Validation) linkPrev(l *vleg) {
	dest := v.destination(l)
	m := v.airportPrev[dest]
	if m == nil {
		m = map[*vrot]int{}
		v.airportPrev[dest] = m
	}
	m[v.rotation(l)]++
	l.hasNext = true
}

func (v *Validation) unlinkPrev(l *vleg) {
	if !l.hasNext {
		return
	}
	dest := v.destination(l)
	if m := v.airportPrev[dest]; m != nil {
		r := v.rotation(l)
		if m[r]--; m[r] <= 0 {
			delete(m, r)
			if len(m) == 0 {
				delete(v.airportPrev, dest)
			}
		}
	}
	l.hasNext = false
}

// minGroundAfter is the minimum ground time at the airport l arrives at.
func (v *Validation) minGroundAfter(l *vleg) int {
	if m, ok := v.airportMGT[v.destination(l)]; ok {
		return m
	}
	return DefaultAirportMinGroundTime
}

func fmtGap(d time.Duration) string {
	if d < 0 {
		return "-" + fmtGap(-d)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

func (v *Validation) airlines(a, b *vleg) []string {
	x, y := v.airline(a), v.airline(b)
	if x != y {
		return []string{x, y}
	}
	return []string{x}
}

func (v *Validation) pairID(c Check, a, b *vleg) string {
	id := make([]byte, 0, 64)
	id = append(append(append(append(id, c...), ':'), v.rotation(a).id...), ':')
	id = append(v.appendLegID(id, a), ':')
	return string(v.appendLegID(id, b))
}

// sameDesignator returns the legs with l's designator (l among them if
// it is indexed). A one-leg answer is in one, so that the common case
// allocates nothing.
func (v *Validation) sameDesignator(l *vleg, one *[1]legRef) []legRef {
	k, ok := l.designatorKey()
	if !ok {
		return v.oddDesigs[l.odd.Designator()]
	}
	if x := v.designators[k]; x != 0 {
		one[0] = x
		return one[:]
	}
	return v.dupDesigs[k]
}

// setSameDesignator records the legs with l's designator (none: deletes).
func (v *Validation) setSameDesignator(l *vleg, same []legRef) {
	k, ok := l.designatorKey()
	if !ok {
		d := l.odd.Designator()
		if len(same) == 0 {
			delete(v.oddDesigs, d)
		} else {
			v.oddDesigs[d] = same
		}
		return
	}
	switch len(same) {
	case 0:
		delete(v.designators, k)
		delete(v.dupDesigs, k)
	case 1:
		v.designators[k] = same[0]
		delete(v.dupDesigs, k)
	default:
		delete(v.designators, k)
		v.dupDesigs[k] = same
	}
}

func (v *Validation) addDesignator(l *vleg) {
	if k, ok := l.designatorKey(); ok && v.designators[k] == 0 && v.dupDesigs[k] == nil {
		v.designators[k] = l.self // the designator's first leg
		return
	}
	// A duplicates' slice grows in place (the index holds the only
	// reference); a single leg's answer (one) has no room and is copied.
	var one [1]legRef
	same := append(v.sameDesignator(l, &one), l.self)
	v.setSameDesignator(l, same)
	switch {
	case len(same) == 2:
		v.addViolation(v.dupViolation(v.at(same[0])))
		v.addViolation(v.dupViolation(l))
	case len(same) > 2:
		v.addViolation(v.dupViolation(l))
	}
}

func (v *Validation) removeDesignator(l *vleg) {
	var one [1]legRef
	same := v.sameDesignator(l, &one)
	for i, x := range same {
		if x == l.self {
			same = append(same[:i:i], same[i+1:]...)
			break
		}
	}
	if old := v.violations[v.dupID(l)]; old != nil {
		v.removeViolation(old)
	}
	if len(same) == 1 {
		if old := v.violations[v.dupID(v.at(same[0]))]; old != nil {
			v.removeViolation(old)
		}
	}
	v.setSameDesignator(l, same)
}

// refreshDuplicate re-indexes a moved leg's duplicate violation (its time
// changed).
func (v *Validation) refreshDuplicate(l *vleg) {
	if old := v.violations[v.dupID(l)]; old != nil {
		v.removeViolation(old)
		v.addViolation(v.dupViolation(l))
	}
}

func (v *Validation) dupID(l *vleg) string {
	id := make([]byte, 0, 64)
	id = append(append(append(append(id, DuplicateDesignator...), ':'), v.rotation(l).id...), ':')
	return string(v.appendLegID(id, l))
}

func (v *Validation) dupViolation(l *vleg) *Violation {
	return &Violation{
		ID: v.dupID(l), Check: DuplicateDesignator, Rotation: v.rotation(l).id,
		Legs: []string{v.legID(l)}, Airlines: []string{v.airline(l)}, Airport: v.origin(l), Time: l.departure(),
		Detail: fmt.Sprintf("flight designator %s is used by more than one leg", v.designator(l)),
	}
}

func (v *Validation) addViolation(x *Violation) {
	v.violations[x.ID] = x
	t := x.Time.UnixNano()
	v.byCheck.ReplaceOrInsert(vkey{string(x.Check), t, x.ID})
	v.byTime.ReplaceOrInsert(vkey{"", t, x.ID})
	for _, a := range x.Airlines {
		v.byAirline.ReplaceOrInsert(vkey{a, t, x.ID})
	}
	m := v.byRotation[x.Rotation]
	if m == nil {
		m = map[string]*Violation{}
		v.byRotation[x.Rotation] = m
	}
	m[x.ID] = x
	v.counts[x.Check]++
}

func (v *Validation) removeViolation(x *Violation) {
	if v.violations[x.ID] != x {
		return
	}
	delete(v.violations, x.ID)
	t := x.Time.UnixNano()
	v.byCheck.Delete(vkey{string(x.Check), t, x.ID})
	v.byTime.Delete(vkey{"", t, x.ID})
	for _, a := range x.Airlines {
		v.byAirline.Delete(vkey{a, t, x.ID})
	}
	if m := v.byRotation[x.Rotation]; m != nil {
		delete(m, x.ID)
		if len(m) == 0 {
			delete(v.byRotation, x.Rotation)
		}
	}
	v.counts[x.Check]--
}
