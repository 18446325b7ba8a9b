// Package flights is a flight-schedule planning service, after the one in
// Dębski and Szczepanik's master's thesis "Scalable Architecture of Cloud
// Application Based on CQRS and Event Sourcing" (AGH Kraków with Lufthansa
// Systems, 2015): rotations of legs, airplanes assigned to rotations,
// airports and airplanes with minimal ground times, and the three
// validations — rotation continuity, minimal ground time and unique flight
// designator.
//
// The domain (this file and the decide/evolve functions) is plain values
// and functions. The write model runs it on the aggregate runtime; the
// validation read model (validation.go) maintains the violations
// incrementally from the event log.
package flights

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/benbjohnson/immutable"
)

// Domain errors. The HTTP layer maps them to statuses.
var (
	// ErrOverlap: a leg would overlap another leg of its rotation — the
	// only invariant enforced while planning; the other rules are checked
	// by the validations when the planner asks, since a schedule being
	// planned may break them for a while.
	ErrOverlap = errors.New("leg overlaps another leg of the rotation")
	// ErrInvalid: a command is malformed (bad airport code, arrival before
	// departure, …).
	ErrInvalid = errors.New("invalid")
	// ErrNotFound: the rotation, airplane or leg does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: creating something that already exists.
	ErrExists = errors.New("already exists")
	// ErrRemoved: acting on a removed rotation or airplane.
	ErrRemoved = errors.New("removed")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Leg is a directed flight of an airplane between two airports at a given
// time, identified for planners by its flight designator.
type Leg struct {
	ID           string    `json:"id"`
	Airline      string    `json:"airline"`
	Number       int       `json:"number"`
	Suffix       string    `json:"suffix,omitempty"`
	Origin       string    `json:"origin"`
	Destination  string    `json:"destination"`
	DayOfOrigin  string    `json:"day_of_origin"` // YYYY-MM-DD
	Departure    time.Time `json:"departure"`     // UTC
	Arrival      time.Time `json:"arrival"`       // UTC
	AircraftType string    `json:"aircraft_type,omitempty"`
}

// Designator is the flight designator of a leg, which names it uniquely in
// a schedule: airline, flight number, optional suffix, departure airport
// and day of origin.
type Designator struct {
	Airline     string
	Number      int
	Suffix      string
	Origin      string
	DayOfOrigin string
}

// Designator returns the leg's flight designator.
func (l *Leg) Designator() Designator {
	return Designator{l.Airline, l.Number, l.Suffix, l.Origin, l.DayOfOrigin}
}

// String formats a designator as LH400A/FRA/2026-03-29.
func (d Designator) String() string {
	return d.Airline + strconv.Itoa(d.Number) + d.Suffix + "/" + d.Origin + "/" + d.DayOfOrigin
}

var (
	airportRe = regexp.MustCompile(`^[A-Z]{3}$`)
	airlineRe = regexp.MustCompile(`^[A-Z0-9]{2}[A-Z]?$`)
	suffixRe  = regexp.MustCompile(`^[A-Z]?$`)
	dateRe    = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	regRe     = regexp.MustCompile(`^[A-Z0-9][A-Z0-9-]{1,9}$`)
)

// ValidAirport reports whether code looks like an IATA airport code.
func ValidAirport(code string) bool { return airportRe.MatchString(code) }

// Validate checks a leg's fields; it says nothing about other legs.
func (l *Leg) Validate() error {
	switch {
	case l.ID == "":
		return invalid("leg has no id")
	case !airlineRe.MatchString(l.Airline):
		return invalid("leg %s: airline %q is not a 2–3 character IATA/ICAO designator", l.ID, l.Airline)
	case l.Number < 1 || l.Number > 9999:
		return invalid("leg %s: flight number %d not in 1–9999", l.ID, l.Number)
	case !suffixRe.MatchString(l.Suffix):
		return invalid("leg %s: operational suffix %q is not one letter", l.ID, l.Suffix)
	case !airportRe.MatchString(l.Origin):
		return invalid("leg %s: origin %q is not an IATA airport code", l.ID, l.Origin)
	case !airportRe.MatchString(l.Destination):
		return invalid("leg %s: destination %q is not an IATA airport code", l.ID, l.Destination)
	case !dateRe.MatchString(l.DayOfOrigin):
		return invalid("leg %s: day of origin %q is not YYYY-MM-DD", l.ID, l.DayOfOrigin)
	case l.Departure.IsZero() || l.Arrival.IsZero():
		return invalid("leg %s: departure and arrival are required", l.ID)
	case !l.Arrival.After(l.Departure):
		return invalid("leg %s: arrival %s is not after departure %s", l.ID, l.Arrival.Format(time.RFC3339), l.Departure.Format(time.RFC3339))
	case l.Arrival.Sub(l.Departure) > 48*time.Hour:
		return invalid("leg %s: a flight of %s is not plausible", l.ID, l.Arrival.Sub(l.Departure))
	}
	day, err := time.Parse(time.DateOnly, l.DayOfOrigin)
	if err != nil {
		return invalid("leg %s: day of origin %q: %v", l.ID, l.DayOfOrigin, err)
	}
	if y := l.Departure.UTC().Year(); y < MinYear || y > MaxYear {
		return invalid("leg %s: departure in %d, outside %d–%d", l.ID, y, MinYear, MaxYear)
	}
	// The day of origin is the local date the flight starts on: a leg
	// departs on it (the day before in UTC, east of Greenwich) or, as a
	// later leg of a multi-leg flight, up to a few days after.
	if d := l.Departure.UTC().Sub(day); d < -24*time.Hour || d >= 4*24*time.Hour {
		return invalid("leg %s: departure %s is not on or shortly after its day of origin %s", l.ID, l.Departure.UTC().Format(time.RFC3339), l.DayOfOrigin)
	}
	return nil
}

// The years a leg may depart in: the view orders legs by nanoseconds
// since 1970 in 64 bits (good until 2262), and SSIM writes two-digit
// years.
const (
	MinYear = 1970
	MaxYear = 2199
)

func overlaps(a, b *Leg) bool { return a.Departure.Before(b.Arrival) && b.Departure.Before(a.Arrival) }

// Rotation aggregate --------------------------------------------------------

// Rotation is an ordered list of legs that do not overlap in time.
type Rotation struct {
	ID      string `json:"id"`
	Created bool   `json:"created"`
	Removed bool   `json:"removed"`
	Legs    []Leg  `json:"legs"` // sorted by departure
	// ids is the set of the legs' ids, a persistent map so that each new
	// state shares it with the last instead of copying it: checking a new
	// leg's id then costs O(log n), not a scan of the rotation. It is
	// derived from Legs (nil after a snapshot is decoded, rebuilt on the
	// next event).
	ids *immutable.Map[string, struct{}]
	// tip is the length of the longest state built on Legs' backing
	// array; see EvolveRotation. Only the goroutine evolving states
	// touches it.
	tip *int
}

var idHasher = immutable.NewHasher("")

func (r *Rotation) hasLeg(id string) bool {
	if r.ids != nil {
		_, ok := r.ids.Get(id)
		return ok
	}
	return r.leg(id) >= 0
}

// withIDs returns r with its id set built, if it was not.
func (r Rotation) withIDs() Rotation {
	if r.ids == nil {
		b := immutable.NewMapBuilder[string, struct{}](idHasher)
		for i := range r.Legs {
			b.Set(r.Legs[i].ID, struct{}{})
		}
		r.ids = b.Map()
	}
	return r
}

// Rotation commands.
type (
	CreateRotation struct{}
	RemoveRotation struct{}
	AddLeg         struct{ Leg Leg }
	AddLegs        struct{ Legs []Leg } // bulk: all or nothing
	RemoveLeg      struct{ LegID string }
	MoveLeg        struct {
		LegID     string
		Departure time.Time
		Arrival   time.Time
	}
)

// Rotation events.
type (
	RotationCreated struct{}
	RotationRemoved struct{}
	LegsAdded       struct {
		Legs []Leg `json:"legs"`
	}
	LegRemoved struct {
		LegID string `json:"leg_id"`
	}
	LegMoved struct {
		LegID     string    `json:"leg_id"`
		Departure time.Time `json:"departure"`
		Arrival   time.Time `json:"arrival"`
	}
)

// RotationCommand and RotationEvent are the sum types of the aggregate.
type (
	RotationCommand any
	RotationEvent   any
)

// DecideRotation validates a command against a rotation.
func DecideRotation(r Rotation, cmd RotationCommand) ([]RotationEvent, error) {
	if _, ok := cmd.(CreateRotation); ok {
		if r.Created {
			return nil, fmt.Errorf("rotation %s: %w", r.ID, ErrExists)
		}
		return []RotationEvent{RotationCreated{}}, nil
	}
	if !r.Created {
		return nil, fmt.Errorf("rotation %s: %w", r.ID, ErrNotFound)
	}
	if r.Removed {
		return nil, fmt.Errorf("rotation %s: %w", r.ID, ErrRemoved)
	}
	switch c := cmd.(type) {
	case RemoveRotation:
		return []RotationEvent{RotationRemoved{}}, nil
	case AddLeg:
		if err := r.canAdd([]Leg{c.Leg}); err != nil {
			return nil, err
		}
		return []RotationEvent{LegsAdded{Legs: []Leg{c.Leg}}}, nil
	case AddLegs:
		if len(c.Legs) == 0 {
			return nil, invalid("no legs to add")
		}
		if err := r.canAdd(c.Legs); err != nil {
			return nil, err
		}
		return []RotationEvent{LegsAdded{Legs: c.Legs}}, nil
	case RemoveLeg:
		if r.leg(c.LegID) < 0 {
			return nil, fmt.Errorf("leg %s of rotation %s: %w", c.LegID, r.ID, ErrNotFound)
		}
		return []RotationEvent{LegRemoved{LegID: c.LegID}}, nil
	case MoveLeg:
		i := r.leg(c.LegID)
		if i < 0 {
			return nil, fmt.Errorf("leg %s of rotation %s: %w", c.LegID, r.ID, ErrNotFound)
		}
		moved := r.Legs[i]
		moved.Departure, moved.Arrival = c.Departure.UTC(), c.Arrival.UTC()
		if err := moved.Validate(); err != nil {
			return nil, err
		}
		for j := range r.Legs {
			if j != i && overlaps(&r.Legs[j], &moved) {
				return nil, fmt.Errorf("%w: leg %s moved to %s–%s would overlap leg %s", ErrOverlap, c.LegID,
					moved.Departure.Format(time.RFC3339), moved.Arrival.Format(time.RFC3339), r.Legs[j].ID)
			}
		}
		return []RotationEvent{LegMoved{LegID: c.LegID, Departure: moved.Departure, Arrival: moved.Arrival}}, nil
	}
	return nil, invalid("unknown rotation command %T", cmd)
}

// canAdd checks new legs: valid, unique ids, no overlap with each other or
// with the rotation's legs.
func (r *Rotation) canAdd(legs []Leg) error {
	sorted := make([]*Leg, len(legs))
	for i := range legs {
		if err := legs[i].Validate(); err != nil {
			return err
		}
		sorted[i] = &legs[i]
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Departure.Before(sorted[j].Departure) })
	for i := 1; i < len(sorted); i++ {
		if overlaps(sorted[i-1], sorted[i]) {
			return fmt.Errorf("%w: legs %s and %s overlap", ErrOverlap, sorted[i-1].ID, sorted[i].ID)
		}
	}
	for _, l := range sorted {
		if r.hasLeg(l.ID) {
			return fmt.Errorf("leg %s in rotation %s: %w", l.ID, r.ID, ErrExists)
		}
		// The rotation's legs are sorted: only the neighbours of the
		// insertion point can overlap.
		i := sort.Search(len(r.Legs), func(i int) bool { return !r.Legs[i].Departure.Before(l.Departure) })
		for _, j := range []int{i - 1, i} {
			if j >= 0 && j < len(r.Legs) && overlaps(&r.Legs[j], l) {
				return fmt.Errorf("%w: leg %s (%s %s–%s) overlaps leg %s", ErrOverlap, l.ID, l.Designator(),
					l.Departure.Format(time.RFC3339), l.Arrival.Format(time.RFC3339), r.Legs[j].ID)
			}
		}
	}
	ids := make(map[string]struct{}, len(legs))
	for i := range legs {
		if _, dup := ids[legs[i].ID]; dup {
			return invalid("leg id %s given twice", legs[i].ID)
		}
		ids[legs[i].ID] = struct{}{}
	}
	return nil
}

func (r *Rotation) leg(id string) int {
	for i := range r.Legs {
		if r.Legs[i].ID == id {
			return i
		}
	}
	return -1
}

// EvolveRotation applies an event. It copies the legs it changes, so a
// state once returned is never modified.
func EvolveRotation(r Rotation, ev RotationEvent) Rotation {
	r = r.withIDs()
	switch e := ev.(type) {
	case RotationCreated:
		r.Created = true
	case RotationRemoved:
		r.Removed = true
	case LegsAdded:
		n := len(r.Legs)
		if len(e.Legs) == 1 && (n == 0 || r.Legs[n-1].Departure.Before(e.Legs[0].Departure)) {
			// The common case, a leg after the last: append in place when
			// this state is the longest one on its backing array (tip),
			// so no other state can see the element written, or the
			// element it saw be overwritten; otherwise copy, with room
			// to spare. That saves copying a thousand-leg rotation on
			// every added leg while keeping every state immutable.
			if r.tip != nil && *r.tip == n && cap(r.Legs) > n {
				r.Legs = append(r.Legs, e.Legs[0])
			} else {
				legs := make([]Leg, n+1, max(2*(n+1), 8))
				copy(legs, r.Legs)
				legs[n] = e.Legs[0]
				r.Legs, r.tip = legs, new(int)
			}
			*r.tip = n + 1
			r.ids = r.ids.Set(e.Legs[0].ID, struct{}{})
			return r
		}
		for _, l := range e.Legs {
			r.ids = r.ids.Set(l.ID, struct{}{})
		}
		legs := make([]Leg, 0, n+len(e.Legs))
		legs = append(legs, r.Legs...)
		if len(e.Legs) == 1 {
			l := e.Legs[0]
			at := sort.Search(len(legs), func(i int) bool { return l.Departure.Before(legs[i].Departure) })
			legs = slices.Insert(legs, at, l)
		} else {
			legs = append(legs, e.Legs...)
			sortLegs(legs)
		}
		r.Legs, r.tip = legs, nil
	case LegRemoved:
		if i := r.leg(e.LegID); i >= 0 {
			legs := make([]Leg, 0, len(r.Legs)-1)
			legs = append(legs, r.Legs[:i]...)
			r.Legs, r.tip = append(legs, r.Legs[i+1:]...), nil
			r.ids = r.ids.Delete(e.LegID)
		}
	case LegMoved:
		if i := r.leg(e.LegID); i >= 0 {
			legs := append([]Leg(nil), r.Legs...)
			legs[i].Departure, legs[i].Arrival = e.Departure, e.Arrival
			sortLegs(legs)
			r.Legs, r.tip = legs, nil
		}
	}
	return r
}

func sortLegs(legs []Leg) {
	sort.SliceStable(legs, func(i, j int) bool { return legs[i].Departure.Before(legs[j].Departure) })
}

// Airplane aggregate --------------------------------------------------------

// Airplane is identified by its registration.
type Airplane struct {
	Registration  string `json:"registration"`
	Type          string `json:"type"`
	MinGroundTime int    `json:"min_ground_time"` // minutes
	Rotation      string `json:"rotation,omitempty"`
	Created       bool   `json:"created"`
	Removed       bool   `json:"removed"`
}

// Airplane commands.
type (
	CreateAirplane struct {
		Type          string
		MinGroundTime int
	}
	RemoveAirplane           struct{}
	AssignRotation           struct{ Rotation string }
	UnassignRotation         struct{}
	SetAirplaneMinGroundTime struct{ Minutes int }
)

// Airplane events.
type (
	AirplaneCreated struct {
		Type          string `json:"type"`
		MinGroundTime int    `json:"min_ground_time"`
	}
	AirplaneRemoved  struct{}
	RotationAssigned struct {
		Rotation string `json:"rotation"`
	}
	RotationUnassigned struct {
		Rotation string `json:"rotation"`
	}
	AirplaneMinGroundTimeSet struct {
		Minutes int `json:"minutes"`
	}
)

type (
	AirplaneCommand any
	AirplaneEvent   any
)

// MaxGroundTime bounds ground times a planner may set: a day.
const MaxGroundTime = 24 * 60

// ValidRegistration reports whether reg looks like an aircraft registration.
func ValidRegistration(reg string) bool { return regRe.MatchString(reg) }

// DecideAirplane validates a command against an airplane.
func DecideAirplane(a Airplane, cmd AirplaneCommand) ([]AirplaneEvent, error) {
	if c, ok := cmd.(CreateAirplane); ok {
		if a.Created {
			return nil, fmt.Errorf("airplane %s: %w", a.Registration, ErrExists)
		}
		if !ValidRegistration(a.Registration) {
			return nil, invalid("registration %q: letters, digits and dashes, 2–10 characters", a.Registration)
		}
		if strings.TrimSpace(c.Type) == "" || len(c.Type) > 16 {
			return nil, invalid("aircraft type %q: 1–16 characters", c.Type)
		}
		if c.MinGroundTime < 0 || c.MinGroundTime > MaxGroundTime {
			return nil, invalid("minimal ground time %d not in 0–%d minutes", c.MinGroundTime, MaxGroundTime)
		}
		return []AirplaneEvent{AirplaneCreated{Type: c.Type, MinGroundTime: c.MinGroundTime}}, nil
	}
	if !a.Created {
		return nil, fmt.Errorf("airplane %s: %w", a.Registration, ErrNotFound)
	}
	if a.Removed {
		return nil, fmt.Errorf("airplane %s: %w", a.Registration, ErrRemoved)
	}
	switch c := cmd.(type) {
	case RemoveAirplane:
		evs := []AirplaneEvent{}
		if a.Rotation != "" {
			evs = append(evs, RotationUnassigned{Rotation: a.Rotation})
		}
		return append(evs, AirplaneRemoved{}), nil
	case AssignRotation:
		if c.Rotation == "" {
			return nil, invalid("no rotation to assign")
		}
		if c.Rotation == a.Rotation {
			return nil, nil
		}
		var evs []AirplaneEvent
		if a.Rotation != "" {
			evs = append(evs, RotationUnassigned{Rotation: a.Rotation})
		}
		return append(evs, RotationAssigned{Rotation: c.Rotation}), nil
	case UnassignRotation:
		if a.Rotation == "" {
			return nil, fmt.Errorf("airplane %s has no rotation: %w", a.Registration, ErrNotFound)
		}
		return []AirplaneEvent{RotationUnassigned{Rotation: a.Rotation}}, nil
	case SetAirplaneMinGroundTime:
		if c.Minutes < 0 || c.Minutes > MaxGroundTime {
			return nil, invalid("minimal ground time %d not in 0–%d minutes", c.Minutes, MaxGroundTime)
		}
		if c.Minutes == a.MinGroundTime {
			return nil, nil
		}
		return []AirplaneEvent{AirplaneMinGroundTimeSet{Minutes: c.Minutes}}, nil
	}
	return nil, invalid("unknown airplane command %T", cmd)
}

// EvolveAirplane applies an event.
func EvolveAirplane(a Airplane, ev AirplaneEvent) Airplane {
	switch e := ev.(type) {
	case AirplaneCreated:
		a.Created, a.Type, a.MinGroundTime = true, e.Type, e.MinGroundTime
	case AirplaneRemoved:
		a.Removed = true
	case RotationAssigned:
		a.Rotation = e.Rotation
	case RotationUnassigned:
		a.Rotation = ""
	case AirplaneMinGroundTimeSet:
		a.MinGroundTime = e.Minutes
	}
	return a
}

// Airport aggregate ---------------------------------------------------------

// DefaultAirportMinGroundTime applies to airports no planner has set a
// minimal ground time for, in minutes. The generator and `flights check`
// count violations against it.
const DefaultAirportMinGroundTime = 30

// Airport holds an airport's minimal ground time.
type Airport struct {
	Code          string `json:"code"`
	MinGroundTime int    `json:"min_ground_time"`
	Set           bool   `json:"set"`
}

// SetAirportMinGroundTime is the airport's one command.
type SetAirportMinGroundTime struct{ Minutes int }

// AirportMinGroundTimeSet is the airport's one event.
type AirportMinGroundTimeSet struct {
	Minutes int `json:"minutes"`
}

type (
	AirportCommand any
	AirportEvent   any
)

// DecideAirport validates a command against an airport.
func DecideAirport(a Airport, cmd AirportCommand) ([]AirportEvent, error) {
	c, ok := cmd.(SetAirportMinGroundTime)
	if !ok {
		return nil, invalid("unknown airport command %T", cmd)
	}
	if !ValidAirport(a.Code) {
		return nil, invalid("airport %q is not an IATA code", a.Code)
	}
	if c.Minutes < 0 || c.Minutes > MaxGroundTime {
		return nil, invalid("minimal ground time %d not in 0–%d minutes", c.Minutes, MaxGroundTime)
	}
	if a.Set && a.MinGroundTime == c.Minutes {
		return nil, nil
	}
	return []AirportEvent{AirportMinGroundTimeSet{Minutes: c.Minutes}}, nil
}

// EvolveAirport applies an event.
func EvolveAirport(a Airport, ev AirportEvent) Airport {
	if e, ok := ev.(AirportMinGroundTimeSet); ok {
		a.MinGroundTime, a.Set = e.Minutes, true
	}
	return a
}
