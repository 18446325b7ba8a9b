// Package aggregate is the write-model runtime: event-sourced aggregates
// as plain values (state, decide, evolve; no storage or concurrency in the
// domain code), run one writer per aggregate on many shards, cached in
// memory, snapshotted, and persisted with optimistic concurrency on every
// append.
//
// Domain code supplies a Definition: Decide (state, command → events or a
// domain error) and Evolve (state, event → state), with codecs for events
// and snapshots. It knows nothing of storage, goroutines or HTTP.
//
// The path of one command:
//
//	Execute → shard (hash of the id) → cached entry, or snapshot + events
//	  → Decide → eventstore.AppendAsync(expected version) ─ fsync ─→ reply
//	  → back on the shard: the new state, idempotency keys, snapshots
//
// A shard never waits for an append: while one aggregate's events are being
// written, the shard goes on with other aggregates, and commands for the
// busy aggregate queue behind it and are decided together, as one append,
// when it completes. That is how a few dozen shards keep thousands of
// appends in flight, and how a hot aggregate's commands share fsyncs. The
// commands are answered as soon as their append is durable, where the
// store reports it (eventstore.AsyncAppender); a state read that comes
// after such an answer waits for the shard to take the new state.
package aggregate

import (
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Definition describes one kind of aggregate. All functions must be pure:
// Decide and Evolve get and return plain values, and a state returned by
// Evolve must not be mutated afterwards (the runtime keeps it, and may be
// encoding it for a snapshot).
type Definition[S, C, E any] struct {
	// Kind names the aggregate type. Its streams are named Kind-id, and
	// every event is tagged Kind.
	Kind string
	// Initial returns the state of an aggregate that has no events.
	Initial func(id string) S
	// Decide validates a command against the current state and returns the
	// events it causes, or a domain error that the caller gets back as is.
	Decide func(state S, cmd C) ([]E, error)
	// Evolve applies one event to the state.
	Evolve func(state S, ev E) S
	// Events encodes and decodes events (and upcasts old ones).
	Events EventCodec[E]
	// Tags, if set, adds tags to an event (besides Kind).
	Tags func(id string, ev E) []string
	// Snapshots, if set with SnapshotEvery > 0, stores the state every
	// SnapshotEvery events, so that loading replays only what follows.
	Snapshots     SnapshotCodec[S]
	SnapshotEvery int
	// Weight, if set, is the approximate size of a state in bytes, and
	// Options.CacheBytes bounds the weight of the aggregates the cache
	// keeps that are not in use.
	Weight func(S) int
}

// Options tune a Runtime. The zero value is a reasonable default.
type Options struct {
	// Shards is the number of shard goroutines (default 64: about ten
	// times more shards than workers, so that aggregates hashed to shards
	// spread evenly over the workers).
	Shards int
	// CacheSize bounds the aggregates kept in memory across all shards
	// (default 100,000); the least recently used is passivated first.
	CacheSize int
	// CacheBytes bounds the Weight (Definition.Weight) of the aggregates
	// kept in memory that were not used in the last second (default 32
	// MiB; without a Weight, only CacheSize bounds the cache). Each shard
	// keeps its share; aggregates in use stay whatever they weigh, so
	// that a shard with several large ones busy at once does not reload
	// them command after command.
	CacheBytes int64
	// IdleTimeout passivates an aggregate unused for this long (default 10
	// minutes; negative disables).
	IdleTimeout time.Duration
	// MaxRetries bounds how often a command is re-decided after another
	// writer changed its aggregate (default 3).
	MaxRetries int
	// IdempotencyKeys is how many command keys each aggregate remembers
	// (default 128).
	IdempotencyKeys int
	// Registerer receives the runtime's metrics (nil: none).
	Registerer prometheus.Registerer
	// Logger receives the runtime's logs (nil: slog.Default()).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Shards <= 0 {
		o.Shards = 64
	}
	if o.CacheSize <= 0 {
		o.CacheSize = 100_000
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = 32 << 20
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 10 * time.Minute
	}
	if o.MaxRetries <= 0 {
		o.MaxRetries = 3
	}
	if o.IdempotencyKeys <= 0 {
		o.IdempotencyKeys = 128
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Result tells what a command did.
type Result[E any] struct {
	ID       string // the aggregate's id
	Events   []E    // the events the command caused (none for a no-op)
	FirstSeq uint64 // the first event's sequence number, 0 if none
	Version  uint64 // the aggregate's version after the command
	Position uint64 // global position of the last event, 0 if none
	// Duplicate is true when the command's idempotency key had been seen:
	// nothing was decided or written, and the fields describe the original
	// (Events is then empty).
	Duplicate bool
}

// ErrClosed is returned by a Runtime after Close.
var ErrClosed = errors.New("aggregate: runtime closed")

// ErrNotFound is returned by State for an aggregate with no events.
var ErrNotFound = errors.New("aggregate: not found")

// ErrPanic is a Decide or Evolve function that panicked: the command
// fails (or, for a stored event Evolve cannot take, every command to that
// aggregate), and the runtime serves the others.
var ErrPanic = errors.New("aggregate: decide or evolve panicked")

// ErrKeyReused refuses a command whose idempotency key the aggregate has
// seen with another command: a key names one command, and answering the
// second as a duplicate of the first would tell its sender it took effect.
var ErrKeyReused = errors.New("aggregate: idempotency key already used for another command")

// ErrExists is returned by Create when the aggregate already has events.
var ErrExists = errors.New("aggregate already exists")
