package window

import (
	"errors"
	"fmt"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

// Kind is the shape of an aggregation's windows.
type Kind uint8

const (
	// KindTumbling windows are fixed-size, adjacent and non-overlapping:
	// every event falls in exactly one.
	KindTumbling Kind = iota + 1
	// KindHopping windows are fixed-size and start every Advance, so an
	// event falls in Size/Advance of them (rounded up).
	KindHopping
	// KindSession windows are per key and as long as activity lasts: an
	// event less than Gap after the previous one of its key extends the
	// session, and an event between two sessions can merge them.
	KindSession
)

func (k Kind) String() string {
	switch k {
	case KindTumbling:
		return "tumbling"
	case KindHopping:
		return "hopping"
	case KindSession:
		return "session"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Window says how events are grouped in time.
type Window struct {
	Kind    Kind
	Size    time.Duration // tumbling and hopping
	Advance time.Duration // hopping
	Gap     time.Duration // session
}

// Tumbling returns windows [k·size, (k+1)·size) from the Unix epoch.
func Tumbling(size time.Duration) Window { return Window{Kind: KindTumbling, Size: size} }

// Hopping returns windows of size starting at every multiple of advance.
func Hopping(size, advance time.Duration) Window {
	return Window{Kind: KindHopping, Size: size, Advance: advance}
}

// Session returns session windows with the given inactivity gap.
func Session(gap time.Duration) Window { return Window{Kind: KindSession, Gap: gap} }

// Record is what an aggregation takes from one event. Extract fills the
// slices in place; they come sized to the definition's Dims, Values and
// Distinct, and are reused for the next event.
type Record struct {
	Time     time.Time
	Dims     []string  // one per Definition.Dims, in order
	Values   []float64 // one per Definition.Values
	Distinct []string  // one per Definition.Distinct
}

// Definition declares an aggregation.
type Definition struct {
	// Name identifies the aggregation in queries, metrics and its URL
	// (letters, digits, '-', '_', '.').
	Name string
	// Window is the shape of the windows.
	Window Window
	// RollUps are coarser tumbling windows kept alongside a tumbling
	// aggregation's own (Window.Size): each must be a multiple of the
	// previous size. They hold exactly the events of their base windows
	// (lateness is decided on the base window), so an hour is the exact
	// roll-up of its minutes, and a query by hour or day reads one entry
	// per key instead of 60 or 1440.
	RollUps []time.Duration
	// Grace is how long after its end a window still accepts events.
	Grace time.Duration
	// Dims names the key dimensions, Values the numeric fields (count,
	// sum, min, max and average of each are kept), Distinct the fields
	// whose distinct values are counted.
	Dims     []string
	Values   []string
	Distinct []string
	// DistinctExact is how many distinct values per window and field are
	// kept as a set (default 1000): up to it the count is exact, beyond it
	// the set becomes a HyperLogLog sketch (precision 14, about 0.8 %
	// standard error) and the count an estimate, marked as such.
	DistinctExact int
	// Extract reads an event into r and reports whether the event belongs
	// to the aggregation (false: skipped). It is where a service filters
	// by type or stream and takes its fields; it must not keep r. The
	// event time must be set.
	Extract func(ev *eventstore.Event, r *Record) bool
}

// maxLevels bounds the roll-up levels (the level is one key byte).
const maxLevels = 8

func (d *Definition) validate() error {
	if !validName(d.Name) {
		return fmt.Errorf("window: aggregation name %q: want 1-64 letters, digits, '-', '_' or '.'", d.Name)
	}
	if d.Extract == nil {
		return errors.New("window: definition has no Extract function")
	}
	w := d.Window
	switch w.Kind {
	case KindTumbling:
		if w.Size <= 0 {
			return errors.New("window: tumbling windows need a positive size")
		}
	case KindHopping:
		if w.Size <= 0 || w.Advance <= 0 || w.Advance > w.Size {
			return errors.New("window: hopping windows need 0 < advance <= size")
		}
	case KindSession:
		if w.Gap <= 0 {
			return errors.New("window: session windows need a positive gap")
		}
	default:
		return fmt.Errorf("window: unknown window kind %d", w.Kind)
	}
	if len(d.RollUps) > 0 && w.Kind != KindTumbling {
		return errors.New("window: roll-ups are for tumbling windows only")
	}
	if len(d.RollUps)+1 > maxLevels {
		return fmt.Errorf("window: at most %d roll-ups", maxLevels-1)
	}
	prev := w.Size
	for _, r := range d.RollUps {
		if r <= prev || r%prev != 0 {
			return fmt.Errorf("window: roll-up %s is not a larger multiple of %s", r, prev)
		}
		prev = r
	}
	if d.Grace < 0 {
		return errors.New("window: negative grace")
	}
	if d.DistinctExact < 0 {
		return errors.New("window: negative DistinctExact")
	}
	seen := map[string]bool{}
	for _, group := range [][]string{d.Dims, d.Values, d.Distinct} {
		for _, n := range group {
			if !validName(n) {
				return fmt.Errorf("window: field name %q: want 1-64 letters, digits, '-', '_' or '.'", n)
			}
			if reserved[n] {
				return fmt.Errorf("window: field name %q is a query parameter", n)
			}
			if seen[n] {
				return fmt.Errorf("window: field name %q used twice", n)
			}
			seen[n] = true
		}
	}
	return nil
}

// reserved are the query parameters of the HTTP handler; dimension
// filters share their namespace.
var reserved = map[string]bool{
	"from": true, "to": true, "unit": true, "group_by": true, "final": true,
	"live": true, "format": true, "limit": true,
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// levelSizes returns the window size of each level: the base windows,
// then the roll-ups. Sessions have one level of no fixed size.
func (d *Definition) levelSizes() []int64 {
	switch d.Window.Kind {
	case KindSession:
		return []int64{0}
	case KindHopping:
		return []int64{int64(d.Window.Size)}
	}
	s := []int64{int64(d.Window.Size)}
	for _, r := range d.RollUps {
		s = append(s, int64(r))
	}
	return s
}

// floorDiv rounds t down to a multiple of d, also for times before 1970.
func floorDiv(t, d int64) int64 {
	q := t / d
	if t%d != 0 && t < 0 {
		q--
	}
	return q * d
}

// closedAt tells whether a window ending at end is closed (past its
// grace) at stream time st. Tumbling and hopping windows close once
// end + grace <= st, as Kafka Streams' time windows do. Sessions close
// once end + grace < st: a session's end is its last event + gap, and
// Kafka Streams keeps a session open while last + gap + grace >= st.
func (d *Definition) closedAt(end, st int64) bool {
	if st == noTime {
		return false
	}
	if d.Window.Kind == KindSession {
		return end < st-int64(d.Grace)
	}
	return end <= st-int64(d.Grace)
}
