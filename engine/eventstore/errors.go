package eventstore

import (
	"errors"
	"fmt"
)

// Sentinel errors. Backends wrap them with context; test with errors.Is.
var (
	ErrInvalidStreamID        = errors.New("eventstore: invalid stream id")
	ErrInvalidTag             = errors.New("eventstore: invalid tag")
	ErrInvalidEvent           = errors.New("eventstore: invalid event")
	ErrInvalidExpectedVersion = errors.New("eventstore: invalid expected version")
	ErrEmptyAppend            = errors.New("eventstore: append has no events")
	ErrEventTooLarge          = errors.New("eventstore: event too large")
	ErrAppendTooLarge         = errors.New("eventstore: append too large")
	ErrDuplicateEventID       = errors.New("eventstore: event id already used by a different append")
	ErrInvalidSnapshot        = errors.New("eventstore: invalid snapshot")
	ErrVersionConflict        = errors.New("eventstore: version conflict")
	ErrClosed                 = errors.New("eventstore: store closed")
	// ErrReadOnly is what a read-only store (a replica following a
	// primary: httpreplica.Store, kafkabus.ReplicaStore) answers every
	// write with.
	ErrReadOnly = errors.New("eventstore: read-only store; send writes to the primary")
)

// ConflictError is returned when an append's expected version does not
// match the stream. errors.Is(err, ErrVersionConflict) holds for it.
type ConflictError struct {
	Stream   string
	Expected ExpectedVersion
	Actual   uint64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("eventstore: version conflict on stream %q: expected %s, actual version %d", e.Stream, e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrVersionConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrVersionConflict }

// LimitError reports input that breaks one of the store's Limits.
// errors.Is matches its Kind (ErrEventTooLarge, ErrInvalidStreamID, …).
type LimitError struct {
	Kind   error  // one of the sentinel errors above
	Detail string // what exactly was wrong, for people
}

func (e *LimitError) Error() string { return e.Kind.Error() + ": " + e.Detail }

// Unwrap exposes Kind to errors.Is.
func (e *LimitError) Unwrap() error { return e.Kind }
