package flights

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"

	"github.com/logbook/logbook/engine/eventstore"
)

// Check names one of the three validations a planned schedule must pass
// before it is published.
type Check string

const (
	Continuity          Check = "continuity"           // a leg departs where the previous one arrived
	MinGroundTime       Check = "min_ground_time"      // ground time ≥ airport's and airplane's minimum
	DuplicateDesignator Check = "duplicate_designator" // no two legs share a flight designator
)

// Checks lists the checks in a fixed order.
var Checks = []Check{Continuity, MinGroundTime, DuplicateDesignator}

// Violation is one broken rule. Pair checks (continuity, ground time) name
// two consecutive legs of a rotation; a duplicate designator names one leg
// (each leg whose designator another leg shares is one violation).
type Violation struct {
	ID       string    `json:"id"`
	Check    Check     `json:"check"`
	Rotation string    `json:"rotation"`
	Legs     []string  `json:"legs"`
	Airlines []string  `json:"airlines"`
	Airport  string    `json:"airport"`
	Time     time.Time `json:"time"` // the (second) leg's departure
	Detail   string    `json:"detail"`
}

// Validation is the validation read model: the schedule as the log
// describes it, and its violations, kept up to date event by event. Every
// change touches only the rotations, airports and designators it concerns,
// and queries walk ordered indexes, so their cost follows the size of the
// answer, not of the schedule.
type Validation struct {
	mu         sync.RWMutex
	checkpoint uint64

	nlegs       int // legs of every rotation
	rotations   map[string]*vrot
	airplanes   map[string]*Airplane
	rotPlane    map[string]string   // rotation -> registration of its airplane
	rotAssigned map[string][]string // rotation -> airplanes naming it, in the order assigned
	airportMGT  map[string]int
	airportPrev map[string]map[*vrot]int // airport -> rotations with legs arriving there that have a next leg, and how many
	designators map[dkey]*vleg           // the leg of each designator only one leg has
	dupDesigs   map[dkey][]*vleg         // the legs of each designator more than one has
	oddDesigs   map[Designator][]*vleg   // legs whose designator does not pack
	names       map[code]string          // the spelling of every packed code

	violations map[string]*Violation
	byCheck    *btree.BTreeG[vkey] // key: check
	byAirline  *btree.BTreeG[vkey] // key: airline
	byTime     *btree.BTreeG[vkey] // key: ""
	byRotation map[string]map[string]*Violation
	counts     map[Check]int

	// The last digest and the position it is of (digest.go).
	digestMu  sync.Mutex
	digestSum string
	digestPos uint64
	digests   atomic.Int64 // computations, for tests
}

// vleg is a leg as the view keeps it: its codes, designator and times
// packed into fields without pointers. The view holds every leg of the
// schedule; packed, a leg is a third of the memory it was as a Leg and
// the collector scans three pointers of it instead of eleven (and no
// strings of its own but its id), which is most of what a collection
// costs a server holding a season. A leg whose fields do not pack — a
// code longer than four characters (Leg.Validate does not bound the
// aircraft type), times not in UTC (a planner may send an offset) —
// keeps the Leg as it came in odd, and its packed fields are not used.
type vleg struct {
	id       string
	rotation *vrot
	odd      *Leg
	dep, arr int64 // departure and arrival, Unix nanoseconds
	k        dkey  // airline, number, suffix, origin, day of origin
	dest     code
	aircraft code
	hasNext  bool // a leg follows it in its rotation (airportPrev)
}

// code is an airline, airport or aircraft type code of up to four
// characters (IATA's and ICAO's), zero bytes after a shorter one.
type code [4]byte

func packCode(s string) (code, bool) {
	var c code
	if len(s) > len(c) || strings.IndexByte(s, 0) >= 0 {
		return c, false // a zero byte would pack like a shorter code
	}
	copy(c[:], s)
	return c, true
}

// fitsNanos tells whether t is UTC and within Unix nanoseconds' range,
// so that time.Unix(0, t.UnixNano()).UTC() gives t back.
func fitsNanos(t time.Time) bool {
	return t.Location() == time.UTC && t.Equal(time.Unix(0, t.UnixNano()))
}

// newLeg packs l for rotation r.
func (v *Validation) newLeg(r *vrot, l *Leg) *vleg {
	x := &vleg{id: l.ID, rotation: r}
	k, ok := pack(l.Designator())
	dest, okd := packCode(l.Destination)
	aircraft, oka := packCode(l.AircraftType)
	if !ok || !okd || !oka || !fitsNanos(l.Departure) || !fitsNanos(l.Arrival) {
		c := *l
		x.odd = &c
		return x
	}
	x.k, x.dest, x.aircraft = k, dest, aircraft
	x.dep, x.arr = l.Departure.UnixNano(), l.Arrival.UnixNano()
	v.intern(k.airline, l.Airline)
	v.intern(k.origin, l.Origin)
	v.intern(dest, l.Destination)
	v.intern(aircraft, l.AircraftType)
	return x
}

func (v *Validation) intern(c code, s string) {
	if _, ok := v.names[c]; !ok {
		v.names[c] = s
	}
}

// name spells a packed code.
func (v *Validation) name(c code) string {
	if s, ok := v.names[c]; ok {
		return s
	}
	n := len(c)
	for n > 0 && c[n-1] == 0 {
		n--
	}
	return string(c[:n])
}

func (l *vleg) departure() time.Time {
	if l.odd != nil {
		return l.odd.Departure
	}
	return time.Unix(0, l.dep).UTC()
}

func (l *vleg) arrival() time.Time {
	if l.odd != nil {
		return l.odd.Arrival
	}
	return time.Unix(0, l.arr).UTC()
}

func (v *Validation) airline(l *vleg) string {
	if l.odd != nil {
		return l.odd.Airline
	}
	return v.name(l.k.airline)
}

func (v *Validation) origin(l *vleg) string {
	if l.odd != nil {
		return l.odd.Origin
	}
	return v.name(l.k.origin)
}

func (v *Validation) destination(l *vleg) string {
	if l.odd != nil {
		return l.odd.Destination
	}
	return v.name(l.dest)
}

// designatorKey is l's packed designator, or false if it does not pack.
func (l *vleg) designatorKey() (dkey, bool) {
	if l.odd != nil {
		return pack(l.odd.Designator())
	}
	return l.k, true
}

func (v *Validation) designator(l *vleg) Designator {
	if l.odd != nil {
		return l.odd.Designator()
	}
	d := Designator{Airline: v.name(l.k.airline), Number: int(l.k.number), Origin: v.name(l.k.origin),
		DayOfOrigin: time.Unix(int64(l.k.day)*86400, 0).UTC().Format(time.DateOnly)}
	if l.k.suffix != 0 {
		d.Suffix = string([]byte{l.k.suffix})
	}
	return d
}

// leg is l as a Leg.
func (v *Validation) leg(l *vleg) Leg {
	if l.odd != nil {
		return *l.odd
	}
	d := v.designator(l)
	return Leg{ID: l.id, Airline: d.Airline, Number: d.Number, Suffix: d.Suffix, Origin: d.Origin,
		Destination: v.name(l.dest), DayOfOrigin: d.DayOfOrigin, Departure: l.departure(), Arrival: l.arrival(),
		AircraftType: v.name(l.aircraft)}
}

// continues tells whether b departs where a arrives.
func (v *Validation) continues(a, b *vleg) bool {
	if a.odd == nil && b.odd == nil {
		return a.dest == b.k.origin
	}
	return v.destination(a) == v.origin(b)
}

type vrot struct {
	id    string
	legs  []*vleg // sorted by departure
	pairs map[string]*Violation
}

func newVrot(id string) *vrot {
	return &vrot{id: id, pairs: map[string]*Violation{}}
}

// find returns a rotation's leg by id, or nil. A scan: planners remove
// and move legs far less often than they add them, and a rotation's
// legs are a few thousand at most, so an index by id would cost every
// leg of the schedule memory for little.
func (v *Validation) find(rotID, id string) *vleg {
	if r := v.rotations[rotID]; r != nil {
		for _, l := range r.legs {
			if l.id == id {
				return l
			}
		}
	}
	return nil
}

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

// NewValidation returns an empty view.
func NewValidation() *Validation {
	return &Validation{
		rotations:   map[string]*vrot{},
		airplanes:   map[string]*Airplane{},
		rotPlane:    map[string]string{},
		rotAssigned: map[string][]string{},
		airportMGT:  map[string]int{},
		airportPrev: map[string]map[*vrot]int{},
		designators: map[dkey]*vleg{},
		dupDesigs:   map[dkey][]*vleg{},
		oddDesigs:   map[Designator][]*vleg{},
		names:       map[code]string{},
		violations:  map[string]*Violation{},
		byCheck:     btree.NewG(32, lessKey),
		byAirline:   btree.NewG(32, lessKey),
		byTime:      btree.NewG(32, lessKey),
		byRotation:  map[string]map[string]*Violation{},
		counts:      map[Check]int{},
	}
}

// Checkpoint is the position of the last event applied (projection.View).
func (v *Validation) Checkpoint(context.Context) (uint64, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.checkpoint, nil
}

// Position is the position of the last event applied; cheaper than
// Checkpoint for callers that hold no context.
func (v *Validation) Position() uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.checkpoint
}

// Stream prefixes of the three aggregates: a stream is the prefix and
// the aggregate id.
const (
	RotationPrefix = "rotation-"
	AirplanePrefix = "airplane-"
	AirportPrefix  = "airport-"
)

// Apply applies a batch of events in log order (projection.View). Events
// already applied (position at or below the checkpoint) are skipped, so
// replays are harmless. Queries see a batch whole or not at all.
func (v *Validation) Apply(_ context.Context, batch []eventstore.Event) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	for i := range batch {
		ev := &batch[i]
		if ev.Position <= v.checkpoint {
			continue
		}
		if err := v.apply(ev); err != nil {
			return fmt.Errorf("validation view: event %d (%s on %s): %w", ev.Position, ev.Type, ev.Stream, err)
		}
		v.checkpoint = ev.Position
	}
	return nil
}

func (v *Validation) apply(ev *eventstore.Event) error {
	switch {
	case strings.HasPrefix(ev.Stream, RotationPrefix):
		id := ev.Stream[len(RotationPrefix):]
		switch ev.Type {
		case "RotationCreated":
			if v.rotations[id] == nil {
				v.rotations[id] = newVrot(id)
			}
		case "RotationRemoved":
			v.removeRotation(id)
		case "LegsAdded":
			var e LegsAdded
			if err := json.Unmarshal(ev.Data, &e); err != nil {
				return err
			}
			v.addLegs(id, e.Legs)
		case "LegRemoved":
			var e LegRemoved
			if err := json.Unmarshal(ev.Data, &e); err != nil {
				return err
			}
			v.removeLeg(id, e.LegID)
		case "LegMoved":
			var e LegMoved
			if err := json.Unmarshal(ev.Data, &e); err != nil {
				return err
			}
			v.moveLeg(id, e)
		}
	case strings.HasPrefix(ev.Stream, AirplanePrefix):
		reg := ev.Stream[len(AirplanePrefix):]
		a := v.airplanes[reg]
		if a == nil {
			a = &Airplane{Registration: reg}
			v.airplanes[reg] = a
		}
		old := *a
		e, err := decodeAirplaneEvent(ev)
		if err != nil || e == nil {
			return err
		}
		*a = EvolveAirplane(*a, e)
		v.airplaneChanged(old, *a)
	case strings.HasPrefix(ev.Stream, AirportPrefix):
		if ev.Type == "AirportMinGroundTimeSet" {
			var e AirportMinGroundTimeSet
			if err := json.Unmarshal(ev.Data, &e); err != nil {
				return err
			}
			code := ev.Stream[len(AirportPrefix):]
			v.airportMGT[code] = e.Minutes
			touched := make([]*vrot, 0, len(v.airportPrev[code]))
			for r := range v.airportPrev[code] {
				touched = append(touched, r)
			}
			for _, r := range touched {
				v.recomputePairs(r)
			}
		}
	}
	return nil
}

func decodeAirplaneEvent(ev *eventstore.Event) (AirplaneEvent, error) {
	var e AirplaneEvent
	var err error
	switch ev.Type {
	case "AirplaneCreated":
		var x AirplaneCreated
		err, e = json.Unmarshal(ev.Data, &x), x
	case "AirplaneRemoved":
		e = AirplaneRemoved{}
	case "RotationAssigned":
		var x RotationAssigned
		err, e = json.Unmarshal(ev.Data, &x), x
	case "RotationUnassigned":
		var x RotationUnassigned
		err, e = json.Unmarshal(ev.Data, &x), x
	case "AirplaneMinGroundTimeSet":
		var x AirplaneMinGroundTimeSet
		err, e = json.Unmarshal(ev.Data, &x), x
	}
	return e, err
}

// airplaneChanged re-checks the rotations an airplane change concerns.
//
// Two airplanes may name one rotation; the latest assignment still in
// force wins. So each rotation keeps the airplanes naming it in the order
// they were assigned, and when the one in force is unassigned or removed,
// the one assigned before it is in force again.
func (v *Validation) airplaneChanged(old, cur Airplane) {
	reg := cur.Registration
	inForce := func(a Airplane) string {
		if a.Removed {
			return ""
		}
		return a.Rotation
	}
	from, to := inForce(old), inForce(cur)
	if from == to {
		if to != "" && v.rotPlane[to] == reg && cur.MinGroundTime != old.MinGroundTime {
			v.recomputeRotation(to)
		}
		return
	}
	if from != "" {
		v.rotAssigned[from] = slices.DeleteFunc(v.rotAssigned[from], func(x string) bool { return x == reg })
		v.planeInForce(from)
	}
	if to != "" {
		v.rotAssigned[to] = append(v.rotAssigned[to], reg)
		v.planeInForce(to)
	}
}

// planeInForce sets the airplane of rotation id to the last one assigned
// to it, and re-checks the rotation if that changed.
func (v *Validation) planeInForce(id string) {
	regs := v.rotAssigned[id]
	if len(regs) == 0 {
		delete(v.rotAssigned, id)
		if _, ok := v.rotPlane[id]; ok {
			delete(v.rotPlane, id)
			v.recomputeRotation(id)
		}
		return
	}
	if last := regs[len(regs)-1]; v.rotPlane[id] != last {
		v.rotPlane[id] = last
		v.recomputeRotation(id)
	}
}

func (v *Validation) recomputeRotation(id string) {
	if r := v.rotations[id]; r != nil {
		v.recomputePairs(r)
	}
}

func (v *Validation) addLegs(rotID string, legs []Leg) {
	r := v.rotations[rotID]
	if r == nil {
		r = newVrot(rotID)
		v.rotations[rotID] = r
	}
	if len(legs) == 1 {
		// A planner's single leg touches two pairs, however long the
		// rotation: re-evaluate those, not the rotation.
		l := v.newLeg(r, &legs[0])
		v.nlegs++
		v.addDesignator(l)
		v.insertLeg(r, l)
		return
	}
	for i := range legs {
		l := v.newLeg(r, &legs[i])
		v.nlegs++
		v.addDesignator(l)
		r.legs = append(r.legs, l)
	}
	sort.SliceStable(r.legs, func(i, j int) bool { return r.legs[i].departure().Before(r.legs[j].departure()) })
	v.recomputePairs(r)
}

func (v *Validation) removeLeg(rotID, id string) {
	l := v.find(rotID, id)
	if l == nil {
		return
	}
	v.deleteLeg(l.rotation, l)
	v.nlegs--
	v.removeDesignator(l)
}

func (v *Validation) moveLeg(rotID string, e LegMoved) {
	l := v.find(rotID, e.LegID)
	if l == nil {
		return
	}
	r := l.rotation
	v.deleteLeg(r, l)
	if l.odd == nil && fitsNanos(e.Departure) && fitsNanos(e.Arrival) {
		l.dep, l.arr = e.Departure.UnixNano(), e.Arrival.UnixNano()
	} else {
		moved := v.leg(l)
		moved.Departure, moved.Arrival = e.Departure, e.Arrival
		l.odd = &moved
	}
	v.refreshDuplicate(l)
	v.insertLeg(r, l)
}

// insertLeg puts l in its place in r: the pair it splits goes, the two it
// makes are evaluated. Legs of a rotation never overlap, so departures are
// unique and order them.
func (v *Validation) insertLeg(r *vrot, l *vleg) {
	dep := l.departure()
	at := sort.Search(len(r.legs), func(j int) bool { return dep.Before(r.legs[j].departure()) })
	var prev, next *vleg
	if at > 0 {
		prev = r.legs[at-1]
	}
	if at < len(r.legs) {
		next = r.legs[at]
	}
	if prev != nil && next != nil {
		v.dropPair(r, prev, next)
	}
	r.legs = slices.Insert(r.legs, at, l)
	v.setNext(prev, l)
	v.setNext(l, next)
	if prev != nil {
		v.addPair(r, prev, l)
	}
	if next != nil {
		v.addPair(r, l, next)
	}
}

// deleteLeg takes l out of r: its two pairs go, the pair its neighbours
// now make is evaluated.
func (v *Validation) deleteLeg(r *vrot, l *vleg) {
	dep := l.departure()
	i := sort.Search(len(r.legs), func(j int) bool { return !r.legs[j].departure().Before(dep) })
	for i < len(r.legs) && r.legs[i] != l {
		i++ // not reached while departures are unique; kept for safety
	}
	if i == len(r.legs) {
		return
	}
	var prev, next *vleg
	if i > 0 {
		prev = r.legs[i-1]
		v.dropPair(r, prev, l)
	}
	if i+1 < len(r.legs) {
		next = r.legs[i+1]
		v.dropPair(r, l, next)
	}
	r.legs = slices.Delete(r.legs, i, i+1)
	v.setNext(l, nil)
	v.setNext(prev, next)
	if prev != nil && next != nil {
		v.addPair(r, prev, next)
	}
}

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
		if x := r.pairs[pairID(c, a, b)]; x != nil {
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
			ID: pairID(Continuity, a, b), Check: Continuity, Rotation: r.id,
			Legs: []string{a.id, b.id}, Airlines: v.airlines(a, b), Airport: v.origin(b), Time: b.departure(),
			Detail: fmt.Sprintf("%s arrives at %s but %s departs from %s", v.designator(a), v.destination(a), v.designator(b), v.origin(b)),
		})
	}
	need := max(v.minGroundAfter(a), planeMGT)
	if gap := b.departure().Sub(a.arrival()); gap < time.Duration(need)*time.Minute {
		out = append(out, &Violation{
			ID: pairID(MinGroundTime, a, b), Check: MinGroundTime, Rotation: r.id,
			Legs: []string{a.id, b.id}, Airlines: v.airlines(a, b), Airport: v.destination(a), Time: b.departure(),
			Detail: fmt.Sprintf("ground time %s at %s between %s and %s, minimum %d min", fmtGap(gap), v.destination(a), v.designator(a), v.designator(b), need),
		})
	}
	return out
}

func (v *Validation) removeRotation(id string) {
	r := v.rotations[id]
	if r == nil {
		return
	}
	for _, l := range r.legs {
		v.unlinkPrev(l)
		v.removeDesignator(l)
	}
	v.nlegs -= len(r.legs)
	r.legs = nil
	v.recomputePairs(r)
	delete(v.rotations, id)
}

// recomputePairs re-evaluates every consecutive pair of one rotation and
// updates only the violations that changed: for bulk loads and for
// changes that concern all its pairs (an airplane's minimum).
func (v *Validation) recomputePairs(r *vrot) {
	fresh := make(map[string]*Violation)
	for i, l := range r.legs {
		var next *vleg
		if i+1 < len(r.legs) {
			next = r.legs[i+1]
		}
		v.setNext(l, next)
	}
	planeMGT := v.planeMGT(r)
	for i := 0; i+1 < len(r.legs); i++ {
		for _, x := range v.pairViolations(r, planeMGT, r.legs[i], r.legs[i+1]) {
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
	m[l.rotation]++
	l.hasNext = true
}

func (v *Validation) unlinkPrev(l *vleg) {
	if !l.hasNext {
		return
	}
	dest := v.destination(l)
	if m := v.airportPrev[dest]; m != nil {
		if m[l.rotation]--; m[l.rotation] <= 0 {
			delete(m, l.rotation)
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

func pairID(c Check, a, b *vleg) string {
	return string(c) + ":" + a.rotation.id + ":" + a.id + ":" + b.id
}

// dkey is a flight designator packed into a value without pointers: the
// index of a schedule's legs by designator then costs the collector
// nothing to scan and a fifth of the memory of one keyed by Designator
// (four strings), in 16 bytes. Every valid leg's designator packs
// (Leg.Validate); one that does not is indexed by its Designator instead.
type dkey struct {
	airline code
	origin  code
	suffix  byte
	number  uint16
	day     int32 // the day of origin, as days since 1970-01-01
}

// pack returns d's dkey, or false if a field does not fit.
func pack(d Designator) (dkey, bool) {
	var k dkey
	if len(d.Airline) > len(k.airline) || len(d.Origin) > len(k.origin) || len(d.Suffix) > 1 ||
		d.Number < 0 || d.Number > 0xffff || len(d.DayOfOrigin) != len("2006-01-02") {
		return k, false
	}
	for _, s := range []string{d.Airline, d.Origin, d.Suffix} {
		if strings.IndexByte(s, 0) >= 0 {
			return k, false // would pack like a shorter one
		}
	}
	copy(k.airline[:], d.Airline)
	copy(k.origin[:], d.Origin)
	if d.Suffix != "" {
		k.suffix = d.Suffix[0]
	}
	k.number = uint16(d.Number)
	day, err := time.Parse(time.DateOnly, d.DayOfOrigin)
	if err != nil { // the layout takes exactly one spelling of a day
		return k, false
	}
	days := day.Unix() / 86400
	if days < math.MinInt32 || days > math.MaxInt32 {
		return k, false
	}
	k.day = int32(days)
	return k, true
}

// sameDesignator returns the legs with l's designator (l among them if
// it is indexed). A one-leg answer is in one, so that the common case
// allocates nothing.
func (v *Validation) sameDesignator(l *vleg, one *[1]*vleg) []*vleg {
	k, ok := l.designatorKey()
	if !ok {
		return v.oddDesigs[l.odd.Designator()]
	}
	if x := v.designators[k]; x != nil {
		one[0] = x
		return one[:]
	}
	return v.dupDesigs[k]
}

// setSameDesignator records the legs with l's designator (none: deletes).
func (v *Validation) setSameDesignator(l *vleg, same []*vleg) {
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
	if k, ok := l.designatorKey(); ok && v.designators[k] == nil && v.dupDesigs[k] == nil {
		v.designators[k] = l // the designator's first leg
		return
	}
	// A duplicates' slice grows in place (the index holds the only
	// reference); a single leg's answer (one) has no room and is copied.
	var one [1]*vleg
	same := append(v.sameDesignator(l, &one), l)
	v.setSameDesignator(l, same)
	switch {
	case len(same) == 2:
		v.addViolation(v.dupViolation(same[0]))
		v.addViolation(v.dupViolation(l))
	case len(same) > 2:
		v.addViolation(v.dupViolation(l))
	}
}

func (v *Validation) removeDesignator(l *vleg) {
	var one [1]*vleg
	same := v.sameDesignator(l, &one)
	for i, x := range same {
		if x == l {
			same = append(same[:i:i], same[i+1:]...)
			break
		}
	}
	if old := v.violations[dupID(l)]; old != nil {
		v.removeViolation(old)
	}
	if len(same) == 1 {
		if old := v.violations[dupID(same[0])]; old != nil {
			v.removeViolation(old)
		}
	}
	v.setSameDesignator(l, same)
}

// refreshDuplicate re-indexes a moved leg's duplicate violation (its time
// changed).
func (v *Validation) refreshDuplicate(l *vleg) {
	if old := v.violations[dupID(l)]; old != nil {
		v.removeViolation(old)
		v.addViolation(v.dupViolation(l))
	}
}

func dupID(l *vleg) string { return string(DuplicateDesignator) + ":" + l.rotation.id + ":" + l.id }

func (v *Validation) dupViolation(l *vleg) *Violation {
	return &Violation{
		ID: dupID(l), Check: DuplicateDesignator, Rotation: l.rotation.id,
		Legs: []string{l.id}, Airlines: []string{v.airline(l)}, Airport: v.origin(l), Time: l.departure(),
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

// Queries ------------------------------------------------------------------

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
		for i, l := range r.legs {
			legs[i] = v.leg(l)
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
