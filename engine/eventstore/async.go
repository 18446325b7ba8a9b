package eventstore

import "context"

// AsyncAppender is a Store that can report an append's outcome through a
// function instead of keeping a goroutine waiting for the disk. A writer
// with many appends in flight (an aggregate runtime's shard) then needs
// no goroutine per append, and its answer reaches it one hand-off sooner.
type AsyncAppender interface {
	// AppendAsync is Append without the wait: it returns without waiting
	// for the disk, and calls done (not nil) exactly once with what Append
	// would have returned, after the events are durable or the append has
	// failed. done may run on a goroutine of the store that serves other
	// appends, so it must return quickly, must not block and must not call
	// the store; and it may run on the caller's goroutine before
	// AppendAsync returns (an append refused at once), so the caller must
	// not hold a lock done needs. The caller must leave events as they are
	// until done is called (AppendAsync, like Append, fills in the ids
	// events lack).
	AppendAsync(stream string, expect ExpectedVersion, events []NewEvent, done func(AppendResult, error))
}

// AppendAsync appends through s's AsyncAppender if it is one, and
// otherwise calls s.Append on a goroutine of its own; either way done is
// called exactly once with the outcome.
func AppendAsync(s Store, stream string, expect ExpectedVersion, events []NewEvent, done func(AppendResult, error)) {
	if a, ok := s.(AsyncAppender); ok {
		a.AppendAsync(stream, expect, events, done)
		return
	}
	go func() { done(s.Append(context.Background(), stream, expect, events)) }()
}
