package flights

import (
	"math"
	"strings"
	"time"
)

// The validation view's compact legs and rotations: codes and times
// packed, the designator packed into a key without pointers.

// vleg is a leg as the view keeps it: its id, codes, designator and times
// packed into fields without pointers but odd. The view holds every leg of
// the schedule, so what a leg costs the collector is most of what a
// collection costs a server holding a season: legs live in a slab of
// chunks (legSlab), each chunk one object, and refer to their rotation by
// index, so a collection marks a few hundred chunks and reads one nil
// pointer per leg, where it used to mark every leg and its id string. A
// leg whose fields do not pack — a code longer than four characters
// (Leg.Validate does not bound the aircraft type), times not in UTC (a
// planner may send an offset) — keeps the Leg as it came in odd, and its
// packed fields are not used. An id longer than maxInlineID is kept in
// Validation.longIDs.
type vleg struct {
	odd      *Leg
	dep, arr int64 // departure and arrival, Unix nanoseconds
	k        dkey  // airline, number, suffix, origin, day of origin
	dest     code
	aircraft code
	self     legRef
	rot      uint32 // the rotation's index in Validation.rots
	hasNext  bool   // a leg follows it in its rotation (airportPrev)
	idLen    uint8  // bytes of id in use; longID if the id is in Validation.longIDs
	id       [maxInlineID]byte
}

// maxInlineID is the longest leg id a vleg holds itself: a UUID's 36
// characters (generated ids are about 20).
const (
	maxInlineID = 36
	longID      = 0xff
)

// legRef names a leg in the view's slab: its slot plus one, so that the
// zero legRef is none.
type legRef uint32

// legChunk is the legs of one slab chunk.
const legChunk = 1024

// legSlab holds the view's legs. Chunks never move, so a *vleg into one
// stays valid until its slot is released; released slots are reused.
type legSlab struct {
	chunks []*[legChunk]vleg
	used   uint32 // slots handed out, released ones included
	free   []legRef
}

func (s *legSlab) at(r legRef) *vleg {
	i := uint32(r) - 1
	return &s.chunks[i/legChunk][i%legChunk]
}

// alloc returns a zeroed leg whose self is its own legRef.
func (s *legSlab) alloc() *vleg {
	var r legRef
	if n := len(s.free); n > 0 {
		r, s.free = s.free[n-1], s.free[:n-1]
	} else {
		if s.used%legChunk == 0 {
			s.chunks = append(s.chunks, new([legChunk]vleg))
		}
		s.used++
		r = legRef(s.used)
	}
	l := s.at(r)
	*l = vleg{self: r}
	return l
}

// release frees l's slot. Nothing may refer to l afterwards.
func (s *legSlab) release(l *vleg) {
	r := l.self
	*l = vleg{}
	s.free = append(s.free, r)
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
	x := v.legs.alloc()
	x.rot = r.idx
	if len(l.ID) <= maxInlineID {
		x.idLen = uint8(copy(x.id[:], l.ID))
	} else {
		x.idLen = longID
		v.longIDs[x.self] = l.ID
	}
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

// freeLeg releases a leg taken out of the view.
func (v *Validation) freeLeg(l *vleg) {
	if l.idLen == longID {
		delete(v.longIDs, l.self)
	}
	v.legs.release(l)
}

// at is the leg r names.
func (v *Validation) at(r legRef) *vleg { return v.legs.at(r) }

// legID is l's id.
func (v *Validation) legID(l *vleg) string {
	if l.idLen == longID {
		return v.longIDs[l.self]
	}
	return string(l.id[:l.idLen])
}

// appendLegID appends l's id to b, making no string of it.
func (v *Validation) appendLegID(b []byte, l *vleg) []byte {
	if l.idLen == longID {
		return append(b, v.longIDs[l.self]...)
	}
	return append(b, l.id[:l.idLen]...)
}

// hasID tells whether l's id is id, without making a string of it.
func (v *Validation) hasID(l *vleg, id string) bool {
	if l.idLen == longID {
		return v.longIDs[l.self] == id
	}
	return string(l.id[:l.idLen]) == id
}

// rotation is l's rotation.
func (v *Validation) rotation(l *vleg) *vrot { return v.rots[l.rot] }

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
	return Leg{ID: v.legID(l), Airline: d.Airline, Number: d.Number, Suffix: d.Suffix, Origin: d.Origin,
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
	idx   uint32   // in Validation.rots
	legs  []legRef // sorted by departure
	pairs map[string]*Violation
}

// newVrot makes rotation id and gives it its index.
func (v *Validation) newVrot(id string) *vrot {
	r := &vrot{id: id, idx: uint32(len(v.rots)), pairs: map[string]*Violation{}}
	v.rots = append(v.rots, r)
	return r
}

// find returns a rotation's leg by id, or nil. A scan: planners remove
// and move legs far less often than they add them, and a rotation's
// legs are a few thousand at most, so an index by id would cost every
// leg of the schedule memory for little.
func (v *Validation) find(rotID, id string) *vleg {
	if r := v.rotations[rotID]; r != nil {
		for _, ref := range r.legs {
			if l := v.at(ref); v.hasID(l, id) {
				return l
			}
		}
	}
	return nil
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
