package eventstore

import "context"

// Store is an event log. All methods are safe for concurrent use.
//
// Positions and sequence numbers start at 1; a "from" argument is
// inclusive, so a reader that has processed position p resumes from p+1.
// Reads return at most max events (a backend may cap max further) and an
// empty slice once nothing more is there; they only ever return events
// whose append has been acknowledged as durable.
type Store interface {
	// Append writes events to the end of one stream, atomically, if the
	// stream's version satisfies expect. It returns after the events are
	// durable. A conflict returns a *ConflictError. An append whose event
	// IDs were all stored before, by one earlier append to the same stream,
	// writes nothing and returns that append's result with Duplicate set.
	// An append that goes ahead fills in the IDs events lack. Once Append
	// returns it keeps no reference to events, even when it returns
	// because ctx ended and the append may still be written: the caller
	// may reuse the slice.
	Append(ctx context.Context, stream string, expect ExpectedVersion, events []NewEvent) (AppendResult, error)

	// ReadStream returns the events of stream with Seq >= from, in order.
	ReadStream(ctx context.Context, stream string, from uint64, max int) ([]Event, error)
	// ReadStreamBackward returns events of stream with Seq <= from, newest
	// first; from == 0 starts at the end.
	ReadStreamBackward(ctx context.Context, stream string, from uint64, max int) ([]Event, error)
	// ReadAll returns events with Position >= from in global order.
	// Removed events (Deleter) are skipped, so positions may jump; it
	// returns an empty page only when nothing is left up to the head.
	ReadAll(ctx context.Context, from uint64, max int) ([]Event, error)
	// ReadTag returns events carrying tag with Position >= from, in global
	// order, through an index.
	ReadTag(ctx context.Context, tag string, from uint64, max int) ([]Event, error)
	// ListStreams returns stream ids greater than after, in byte order.
	ListStreams(ctx context.Context, after string, max int) ([]string, error)
	// StreamVersion returns the sequence number of the stream's last event,
	// 0 if it has none.
	StreamVersion(ctx context.Context, stream string) (uint64, error)
	// Head returns the position of the last durable event, 0 if none.
	Head(ctx context.Context) (uint64, error)

	// Subscribe follows the events selected by filter from position from
	// (a sequence number for a stream filter): it catches up from storage,
	// then delivers new events as they commit.
	Subscribe(ctx context.Context, filter Filter, from uint64) (Subscription, error)

	// SaveSnapshot stores the latest snapshot of a stream, replacing an
	// older one. Snapshots are a cache: one may be lost in a crash.
	SaveSnapshot(ctx context.Context, snap Snapshot) error
	// LoadSnapshot returns the stream's latest snapshot, if any.
	LoadSnapshot(ctx context.Context, stream string) (Snapshot, bool, error)

	Close() error
}

// Subscription delivers events in order, without gaps or duplicates, for
// as long as its consumer keeps calling Next. The store never buffers for a
// subscriber: one that falls behind simply reads from storage.
type Subscription interface {
	// Next blocks until at least one event is available (or ctx ends, or
	// the subscription or store is closed) and returns the next batch.
	Next(ctx context.Context) ([]Event, error)
	// Cursor is the position (sequence number for a stream filter) of the
	// next event Next will return.
	Cursor() uint64
	Close() error
}
