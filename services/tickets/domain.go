// Package tickets is the ticketing service of a multi-sport event: tickets
// for a sport, a day and a seat, which customers search, book and return —
// the use case of "Performance modelling and simulation of skewed demand
// in complex systems" (Shephard, 2017), called "the paper" below.
// Demand is skewed — one sport (athletics) is wanted far more than the
// others. Every request runs through a Gate (gate.go): Direct, the
// default, runs it on the store at once; the experiment rig in
// lab/ticketrig supplies gates that put requests on emulated store nodes
// behind the paper's architectures, to measure how the hot sport's demand
// spreads to the cold ones.
//
// The domain (this file) is plain values and functions: one event-sourced
// aggregate per ticket, so booking is decided against that ticket's state
// alone and two bookings of one seat are serialized by the aggregate
// runtime's optimistic concurrency. The search read model (search.go) is a
// projection of the booking events.
package tickets

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Domain errors. The HTTP layer maps them to statuses.
var (
	// ErrTaken: the ticket is booked by someone else. Who holds it is
	// deliberately not part of the error.
	ErrTaken = errors.New("ticket is already booked")
	// ErrNotHeld: a return by someone who does not hold the ticket.
	ErrNotHeld = errors.New("ticket is not booked by this owner")
	// ErrNotFound: no such ticket in the catalogue.
	ErrNotFound = errors.New("no such ticket")
	// ErrInvalid: a malformed command or query.
	ErrInvalid = errors.New("invalid")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Catalogue says which tickets exist: for every sport, PerSport tickets
// numbered 0…PerSport-1, spread over Days days (ticket n is on day
// n mod Days + 1, seat n / Days + 1). It is configuration, not events: a
// ticket that was never booked has no stream.
type Catalogue struct {
	Sports   []string
	PerSport int
	Days     int
}

// DefaultSports are the paper's three: athletics in hot demand, cycling and
// diving not.
var DefaultSports = []string{"athletics", "cycling", "diving"}

// Sports returns the three default sports, or n sports named athletics,
// cycling, diving, then sport-0003, sport-0004, … when n > 3.
func Sports(n int) []string {
	s := make([]string, 0, n)
	for i := range n {
		if i < len(DefaultSports) {
			s = append(s, DefaultSports[i])
		} else {
			s = append(s, fmt.Sprintf("sport-%04d", i))
		}
	}
	return s
}

var sportRe = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// Validate checks the catalogue's shape.
func (c Catalogue) Validate() error {
	if len(c.Sports) == 0 || len(c.Sports) > 10_000 {
		return invalid("%d sports: want 1–10000", len(c.Sports))
	}
	if c.PerSport < 1 || c.PerSport > 100_000 {
		return invalid("%d tickets per sport: want 1–100000", c.PerSport)
	}
	if c.Days < 1 || c.Days > 366 {
		return invalid("%d days: want 1–366", c.Days)
	}
	seen := map[string]bool{}
	for _, s := range c.Sports {
		if !sportRe.MatchString(s) {
			return invalid("sport %q: want lower-case letters, digits and dashes", s)
		}
		if seen[s] {
			return invalid("sport %q listed twice", s)
		}
		seen[s] = true
	}
	return nil
}

// TicketID names ticket n of sport: "athletics.42".
func TicketID(sport string, n int) string { return sport + "." + strconv.Itoa(n) }

// Ticket is one seat on one day of one sport, and who holds it.
type Ticket struct {
	ID    string `json:"id"`
	Sport string `json:"sport"`
	Day   int    `json:"day"`
	Seat  int    `json:"seat"`
	Owner string `json:"owner,omitempty"` // empty: available
}

// Ticket returns ticket id as the catalogue defines it (unbooked), or
// ErrNotFound.
func (c Catalogue) Ticket(id string) (Ticket, error) {
	sport, num, ok := strings.Cut(id, ".")
	if !ok {
		return Ticket{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || n >= c.PerSport || strconv.Itoa(n) != num || c.SportIndex(sport) < 0 {
		return Ticket{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return c.nth(sport, n), nil
}

func (c Catalogue) nth(sport string, n int) Ticket {
	return Ticket{ID: TicketID(sport, n), Sport: sport, Day: n%c.Days + 1, Seat: n/c.Days + 1}
}

// SportIndex returns the position of sport in the catalogue, -1 if absent.
func (c Catalogue) SportIndex(sport string) int {
	for i, s := range c.Sports {
		if s == sport {
			return i
		}
	}
	return -1
}

var ownerRe = regexp.MustCompile(`^[\p{L}\p{N}][\p{L}\p{N} ._@-]{0,63}$`)

// ValidOwner reports whether owner is an acceptable customer name: 1–64
// letters, digits, spaces and ._@- , starting with a letter or digit.
func ValidOwner(owner string) bool { return ownerRe.MatchString(owner) }

// Commands on a ticket.
type Command interface{ isCommand() }

// Book allocates the ticket to Owner. Booking a ticket one already holds
// is accepted and changes nothing.
type Book struct{ Owner string }

// Return releases Owner's ticket.
type Return struct{ Owner string }

func (Book) isCommand()   {}
func (Return) isCommand() {}

// Events of a ticket.
type Event interface{ isEvent() }

// TicketBooked: Owner now holds the ticket.
type TicketBooked struct {
	Owner string `json:"owner"`
}

// TicketReturned: Owner gave the ticket back; it is available again.
type TicketReturned struct {
	Owner string `json:"owner"`
}

func (TicketBooked) isEvent()   {}
func (TicketReturned) isEvent() {}

// Decide validates cmd against the ticket's state.
func Decide(t Ticket, cmd Command) ([]Event, error) {
	if t.Sport == "" {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, t.ID)
	}
	switch c := cmd.(type) {
	case Book:
		if !ValidOwner(c.Owner) {
			return nil, invalid("owner %q: want 1–64 letters, digits, spaces or ._@-", c.Owner)
		}
		switch t.Owner {
		case "":
			return []Event{TicketBooked{Owner: c.Owner}}, nil
		case c.Owner:
			return nil, nil
		default:
			return nil, ErrTaken
		}
	case Return:
		if !ValidOwner(c.Owner) {
			return nil, invalid("owner %q: want 1–64 letters, digits, spaces or ._@-", c.Owner)
		}
		if t.Owner != c.Owner {
			return nil, ErrNotHeld
		}
		return []Event{TicketReturned{Owner: c.Owner}}, nil
	}
	return nil, invalid("unknown command %T", cmd)
}

// Evolve applies one event.
func Evolve(t Ticket, ev Event) Ticket {
	switch e := ev.(type) {
	case TicketBooked:
		t.Owner = e.Owner
	case TicketReturned:
		t.Owner = ""
	}
	return t
}
