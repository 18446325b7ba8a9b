// Package verify is the report of an event store's offline check, shared
// by the backends that make it (pebblestore.Verify, pgstore.Verify): the
// log's head, how many events and streams it holds, and every problem
// found, each of a kind named here.
//
// A backend's check is a list of independent checks, each adding the
// problems of one invariant to a Report, so that a new invariant (or a
// relaxed one, as deleting events relaxes "every position holds an
// event") is one function more or less.
package verify

import "fmt"

// Kind names the invariant a problem breaks.
type Kind string

const (
	// Format: the store's format marker or schema is missing or foreign.
	Format Kind = "format"
	// Gap: a position of the log between 1 and the head holds no event.
	Gap Kind = "position-gap"
	// Head: the recorded head is not the last position of the log.
	Head Kind = "head"
	// Corrupt: a record cannot be decoded, or a page or block fails its
	// checksum.
	Corrupt Kind = "corrupt"
	// StreamVersion: a stream's version is not the number of its events,
	// or its sequence numbers are not 1, 2, 3, … in log order.
	StreamVersion Kind = "stream-version"
	// StreamIndex: an entry of the stream index names no such event, or an
	// event has no entry.
	StreamIndex Kind = "stream-index"
	// TagIndex: an entry of the tag index names an event without that
	// tag, or an event's tag has no entry.
	TagIndex Kind = "tag-index"
	// Snapshot: a snapshot lies beyond its stream's version.
	Snapshot Kind = "snapshot"
)

// Problem is one thing found wrong.
type Problem struct {
	Kind     Kind   `json:"kind"`
	Position uint64 `json:"position,omitempty"`
	Stream   string `json:"stream,omitempty"`
	Detail   string `json:"detail"`
}

func (p Problem) String() string {
	s := string(p.Kind)
	if p.Position > 0 {
		s += fmt.Sprintf(" at position %d", p.Position)
	}
	if p.Stream != "" {
		s += fmt.Sprintf(" (stream %q)", p.Stream)
	}
	return s + ": " + p.Detail
}

// MaxProblems bounds the problems a Report lists; the rest are counted
// in Report.MoreProblems.
const MaxProblems = 1000

// Report is what a check found. Problems is never nil, so that its JSON
// is a list.
type Report struct {
	// Head is the log's last position.
	Head uint64 `json:"head"`
	// Events and Streams count what the log holds.
	Events  uint64 `json:"events"`
	Streams uint64 `json:"streams"`
	// Problems lists what is wrong, at most MaxProblems of them.
	Problems []Problem `json:"problems"`
	// MoreProblems counts the problems found beyond MaxProblems.
	MoreProblems uint64 `json:"more_problems,omitempty"`
}

// New returns an empty report.
func New() *Report { return &Report{Problems: []Problem{}} }

// OK says whether no problem was found.
func (r *Report) OK() bool { return len(r.Problems) == 0 && r.MoreProblems == 0 }

// Add records a problem.
func (r *Report) Add(kind Kind, pos uint64, stream, format string, args ...any) {
	if len(r.Problems) >= MaxProblems {
		r.MoreProblems++
		return
	}
	r.Problems = append(r.Problems, Problem{Kind: kind, Position: pos, Stream: stream, Detail: fmt.Sprintf(format, args...)})
}

// Has says whether a problem of kind was found (for tests and callers
// that act on one kind).
func (r *Report) Has(kind Kind) bool {
	for _, p := range r.Problems {
		if p.Kind == kind {
			return true
		}
	}
	return false
}

// Err is nil when the report is clean, else an error naming the first
// problem and how many there are.
func (r *Report) Err() error {
	if r.OK() {
		return nil
	}
	n := uint64(len(r.Problems)) + r.MoreProblems
	return fmt.Errorf("store check found %d problem(s), the first: %s", n, r.Problems[0])
}
