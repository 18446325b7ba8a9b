package flights

import (
	"context"
	"encoding/json"
	"fmt"
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
	designators map[dkey]legRef          // the leg of each designator only one leg has
	dupDesigs   map[dkey][]legRef        // the legs of each designator more than one has
	oddDesigs   map[Designator][]legRef  // legs whose designator does not pack
	names       map[code]string          // the spelling of every packed code

	legs    legSlab           // every leg (validation_legs.go)
	rots    []*vrot           // every rotation made, by its idx; nil once removed (not reused: a pointer per rotation ever made)
	longIDs map[legRef]string // ids too long for a vleg

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

// NewValidation returns an empty view.
func NewValidation() *Validation {
	return &Validation{
		rotations:   map[string]*vrot{},
		airplanes:   map[string]*Airplane{},
		rotPlane:    map[string]string{},
		rotAssigned: map[string][]string{},
		airportMGT:  map[string]int{},
		airportPrev: map[string]map[*vrot]int{},
		designators: map[dkey]legRef{},
		dupDesigs:   map[dkey][]legRef{},
		oddDesigs:   map[Designator][]legRef{},
		longIDs:     map[legRef]string{},
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
				v.rotations[id] = v.newVrot(id)
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
		r = v.newVrot(rotID)
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
		r.legs = append(r.legs, l.self)
	}
	sort.SliceStable(r.legs, func(i, j int) bool { return v.at(r.legs[i]).departure().Before(v.at(r.legs[j]).departure()) })
	v.recomputePairs(r)
}

func (v *Validation) removeLeg(rotID, id string) {
	l := v.find(rotID, id)
	if l == nil {
		return
	}
	found := v.deleteLeg(v.rotation(l), l)
	v.nlegs--
	v.removeDesignator(l)
	if found {
		v.freeLeg(l) // else its slot may still be named somewhere: leave it
	}
}

func (v *Validation) moveLeg(rotID string, e LegMoved) {
	l := v.find(rotID, e.LegID)
	if l == nil {
		return
	}
	r := v.rotation(l)
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
	at := sort.Search(len(r.legs), func(j int) bool { return dep.Before(v.at(r.legs[j]).departure()) })
	var prev, next *vleg
	if at > 0 {
		prev = v.at(r.legs[at-1])
	}
	if at < len(r.legs) {
		next = v.at(r.legs[at])
	}
	if prev != nil && next != nil {
		v.dropPair(r, prev, next)
	}
	r.legs = slices.Insert(r.legs, at, l.self)
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
// now make is evaluated. It reports whether l was in r.
func (v *Validation) deleteLeg(r *vrot, l *vleg) bool {
	dep := l.departure()
	i := sort.Search(len(r.legs), func(j int) bool { return !v.at(r.legs[j]).departure().Before(dep) })
	for i < len(r.legs) && r.legs[i] != l.self {
		i++ // not reached while departures are unique; kept for safety
	}
	if i == len(r.legs) {
		return false
	}
	var prev, next *vleg
	if i > 0 {
		prev = v.at(r.legs[i-1])
		v.dropPair(r, prev, l)
	}
	if i+1 < len(r.legs) {
		next = v.at(r.legs[i+1])
		v.dropPair(r, l, next)
	}
	r.legs = slices.Delete(r.legs, i, i+1)
	v.setNext(l, nil)
	v.setNext(prev, next)
	if prev != nil && next != nil {
		v.addPair(r, prev, next)
	}
	return true
}

func (v *Validation) removeRotation(id string) {
	r := v.rotations[id]
	if r == nil {
		return
	}
	for _, ref := range r.legs {
		l := v.at(ref)
		v.unlinkPrev(l)
		v.removeDesignator(l)
		v.freeLeg(l)
	}
	v.nlegs -= len(r.legs)
	r.legs = nil
	v.recomputePairs(r)
	delete(v.rotations, id)
	v.rots[r.idx] = nil
}
