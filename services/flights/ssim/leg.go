package ssim

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DatedLeg is one operation of one leg on one day: what a type 3 record
// expands to. All strings are upper case without padding.
type DatedLeg struct {
	Airline      string // 2–3 characters, e.g. "LH"
	Number       int    // 0–9999
	Suffix       string // operational suffix: "" or one letter A–Z
	IVI          int    // itinerary variation identifier, 1–99
	LegSeq       int    // leg sequence number, 1–99
	ServiceType  byte   // A–Z, e.g. 'J'
	Origin       string // departure station, 3 letters
	Destination  string // arrival station, 3 letters
	Departure    time.Time
	Arrival      time.Time // always after Departure
	DayOfOrigin  Date
	AircraftType string // 1–3 characters, e.g. "32A"
	// Onward is the zero Onward when the record names no onward flight. It
	// is a value rather than a pointer so that expanding a record does not
	// allocate per dated leg.
	Onward Onward
	// Record is the line number of the type 3 record the leg came from; 0
	// for legs not read from a file. Writers ignore it.
	Record int
}

// Onward is the onward flight of a leg's aircraft (type 3 columns 138–146).
type Onward struct {
	Airline string
	Number  int
	Suffix  string
	Layover int // aircraft rotation layover, days, 0–9
}

// IsZero reports whether o names no onward flight.
func (o Onward) IsZero() bool { return o == Onward{} }

// Designator identifies a dated leg uniquely in a schedule: airline,
// flight number, operational suffix, departure airport and day of origin.
type Designator struct {
	Airline     string
	Number      int
	Suffix      string
	Origin      string
	DayOfOrigin Date
}

// Designator returns the leg's designator.
func (l DatedLeg) Designator() Designator {
	return Designator{l.Airline, l.Number, l.Suffix, l.Origin, l.DayOfOrigin}
}

// String returns the canonical form "LH0400/FRA/2026-03-29", or
// "LH0400A/FRA/2026-03-29" with a suffix. The flight number is always four
// digits so that the form sorts by flight and parses without ambiguity even
// for airline codes that end in a digit ("U2", "9W").
func (d Designator) String() string {
	b := make([]byte, 0, 24)
	b = append(b, d.Airline...)
	b = appendNumber4(b, d.Number)
	b = append(b, d.Suffix...)
	b = append(b, '/')
	b = append(b, d.Origin...)
	b = append(b, '/')
	b = d.DayOfOrigin.appendTo(b)
	return string(b)
}

func appendNumber4(b []byte, n int) []byte {
	if n < 0 || n > 9999 {
		return strconv.AppendInt(b, int64(n), 10)
	}
	return append(b, byte('0'+n/1000), byte('0'+n/100%10), byte('0'+n/10%10), byte('0'+n%10))
}

// ParseDesignator parses the form String returns.
func ParseDesignator(s string) (Designator, error) {
	flight, rest, ok1 := strings.Cut(s, "/")
	origin, day, ok2 := strings.Cut(rest, "/")
	if !ok1 || !ok2 {
		return Designator{}, fmt.Errorf("designator %q: want AIRLINE+NNNN[SUFFIX]/ORIGIN/YYYY-MM-DD", s)
	}
	var d Designator
	if n := len(flight); n > 0 && flight[n-1] >= 'A' && flight[n-1] <= 'Z' {
		d.Suffix = flight[n-1:]
		flight = flight[:n-1]
	}
	if len(flight) < 6 {
		return Designator{}, fmt.Errorf("designator %q: flight %q too short: want airline and four-digit number", s, flight)
	}
	num, ok := atoiFixed(flight[len(flight)-4:])
	if !ok {
		return Designator{}, fmt.Errorf("designator %q: flight number %q is not four digits", s, flight[len(flight)-4:])
	}
	d.Airline, d.Number = flight[:len(flight)-4], num
	if !validAirline(d.Airline) {
		return Designator{}, fmt.Errorf("designator %q: airline %q invalid", s, d.Airline)
	}
	if !validStation(origin) {
		return Designator{}, fmt.Errorf("designator %q: origin %q invalid", s, origin)
	}
	d.Origin = origin
	var err error
	if d.DayOfOrigin, err = ParseDate(day); err != nil {
		return Designator{}, fmt.Errorf("designator %q: day of origin: %w", s, err)
	}
	return d, nil
}

// validate reports the first thing that stops d from naming a leg.
func (d Designator) validate() error {
	switch {
	case !validAirline(d.Airline):
		return fmt.Errorf("airline %q invalid: want 2–3 characters A–Z, 0–9", d.Airline)
	case d.Number < 0 || d.Number > 9999:
		return fmt.Errorf("flight number %d out of range 0–9999", d.Number)
	case !validSuffix(d.Suffix):
		return fmt.Errorf("suffix %q invalid: want empty or one letter A–Z", d.Suffix)
	case !validStation(d.Origin):
		return fmt.Errorf("departure airport %q invalid: want 3 letters A–Z", d.Origin)
	case !d.DayOfOrigin.IsValid():
		return fmt.Errorf("day of origin %v invalid", d.DayOfOrigin)
	}
	return nil
}

func isUpper(c byte) bool      { return c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isUpperDigit(c byte) bool { return isUpper(c) || isDigit(c) }

func validAirline(s string) bool {
	if len(s) < 2 || len(s) > 3 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isUpperDigit(s[i]) {
			return false
		}
	}
	return true
}

func validStation(s string) bool {
	return len(s) == 3 && isUpper(s[0]) && isUpper(s[1]) && isUpper(s[2])
}

func validSuffix(s string) bool {
	return s == "" || (len(s) == 1 && isUpper(s[0]))
}

func validAircraftType(s string) bool {
	if len(s) < 1 || len(s) > 3 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isUpperDigit(s[i]) {
			return false
		}
	}
	return true
}
