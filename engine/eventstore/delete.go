package eventstore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Deleting and expiring.
//
// A store that can remove events implements Deleter, an optional
// interface (test for it with a type assertion): pebblestore's does;
// read-only replicas do not. Its model is EventStoreDB's:
//
//   - A soft delete (DeleteSoft) hides every event of the stream: reading
//     it fails with ErrStreamDeleted. The stream's version stays where it
//     was, so StreamVersion still reports it and a later append recreates
//     the stream, continuing the numbering (an append expecting
//     Exactly(version) or Any succeeds; one expecting NoStream conflicts,
//     as the stream had events). Reads of the recreated stream return the
//     events appended since.
//   - A hard delete (DeleteHard) hides the events for good: reading the
//     stream, and any later append to it, fail with ErrStreamTombstoned.
//     Its snapshot is dropped.
//   - TruncateStream(before) hides the events with Seq < before; reads
//     start at before. A truncation point past the end of the stream is
//     taken as the end: events appended later are never hidden by it.
//   - A Retention rule, per stream or per stream-id prefix, expires events
//     older than MaxAge or beyond the newest MaxCount. A sweep (Sweep, and
//     a background pass) turns each rule into a truncation of the streams
//     it matches, so an expired event disappears at the next pass, not at
//     the very moment it expires.
//
// The global order after a removal: positions are never reused, so the
// log keeps its order but acquires holes. ReadAll, ReadTag and
// subscriptions skip removed events: they return the next event that is
// still there, and a reader's cursor (last position + 1) moves past the
// hole with its next page, so no reader stalls on it. Positions stay
// increasing, but consecutive events of ReadAll are no longer
// necessarily consecutive positions. Every position at or below Head is
// either an event a read returns or a removed one; a removed event never
// comes back, nor does its position hold anything else.
//
// Removal is logical at once and physical later: the call returns once
// the removal is durable and every read started after it no longer sees
// the events; the space they take is reclaimed by a background pass,
// bounded in the I/O it takes (see the backend's options).
type Deleter interface {
	// DeleteStream deletes a stream, softly or for good (see DeleteMode).
	// Deleting a stream that has no events is allowed; a soft delete of a
	// hard-deleted stream fails with ErrStreamTombstoned, a hard one
	// succeeds again.
	DeleteStream(ctx context.Context, stream string, mode DeleteMode) error
	// TruncateStream removes the events of stream with Seq < before.
	TruncateStream(ctx context.Context, stream string, before uint64) error
	// SetRetention adds or replaces the rule for r.Stream or r.Prefix; a
	// rule with MaxAge and MaxCount both zero clears it.
	SetRetention(ctx context.Context, r Retention) error
	// Retentions lists the rules in force.
	Retentions(ctx context.Context) ([]Retention, error)
	// Sweep runs one pass of the background work now: it applies the
	// retention rules and reclaims the space of what was removed.
	Sweep(ctx context.Context) (SweepStats, error)
}

// DeleteMode says how DeleteStream deletes.
type DeleteMode uint8

const (
	// DeleteSoft hides the stream's events; a later append recreates it.
	DeleteSoft DeleteMode = iota + 1
	// DeleteHard hides them and forbids any later append (a tombstone).
	DeleteHard
)

func (m DeleteMode) String() string {
	switch m {
	case DeleteSoft:
		return "soft"
	case DeleteHard:
		return "hard"
	default:
		return fmt.Sprintf("DeleteMode(%d)", uint8(m))
	}
}

// Retention expires the events of one stream (Stream) or of every stream
// whose id starts with Prefix; exactly one of the two is set. MaxAge
// expires events whose commit time is older than that; MaxCount keeps
// only the newest MaxCount events. Zero means no limit; both zero clears
// the rule.
type Retention struct {
	Stream   string
	Prefix   string
	MaxAge   time.Duration
	MaxCount uint64
}

// Validate checks the rule's shape (not its stream id or prefix against
// a store's limits).
func (r Retention) Validate() error {
	switch {
	case (r.Stream == "") == (r.Prefix == ""):
		return fmt.Errorf("%w: a retention rule names a stream or a prefix, exactly one", ErrInvalidRetention)
	case r.MaxAge < 0:
		return fmt.Errorf("%w: negative maximum age %v", ErrInvalidRetention, r.MaxAge)
	}
	return nil
}

// SweepStats tells what one sweep did.
type SweepStats struct {
	Truncated int // streams whose retention rules moved their truncation point
	Removed   int // events physically removed
	Pending   int // streams with removed events not yet reclaimed (the pass stopped at its budget)
}

var (
	// ErrStreamDeleted is what reading a soft-deleted stream returns
	// (until an append recreates it).
	ErrStreamDeleted = errors.New("eventstore: stream deleted")
	// ErrStreamTombstoned is what reading, or appending to, a
	// hard-deleted stream returns.
	ErrStreamTombstoned = errors.New("eventstore: stream hard-deleted; it cannot be written again")
	// ErrInvalidRetention reports a malformed retention rule.
	ErrInvalidRetention = errors.New("eventstore: invalid retention rule")
)
