// Package query runs queries over the event streams of any
// eventstore.Store — the ids of its streams, the events of one stream, of
// the whole log, or of a tag — throttled so that any number of them can
// run without crushing the backend. Each comes finite ("current": it ends
// at the head of the log as it stood when it began) and live (it goes on
// with new events):
//
//	finite ("current")         live              reads
//	CurrentStreamIDs           StreamIDs         the ids of the streams
//	CurrentEventsByStream      EventsByStream    one stream (from seq, to seq)
//	CurrentAllEvents           AllEvents         the whole log (from position)
//	CurrentEventsByTag         EventsByTag       one tag (from position)
//
// # Akka.Persistence.Query's names
//
// The eight queries are those of Akka.Persistence.Query, under logbook's
// own names (the engine calls an event stream a stream):
//
//	Akka.Persistence.Query               logbook
//	persistence id                       stream (id)
//	sequence nr                          seq (eventstore.Event.Seq)
//	offset (exclusive)                   position (inclusive, see below)
//	read journal (ReadJournal)           Reader
//	PersistenceIds / CurrentPersistenceIds
//	                                     StreamIDs / CurrentStreamIDs
//	EventsByPersistenceId / Current…     EventsByStream / CurrentEventsByStream
//	AllEvents / CurrentAllEvents         AllEvents / CurrentAllEvents
//	EventsByTag / CurrentEventsByTag     EventsByTag / CurrentEventsByTag
//	QueryThrottler                       Permitter
//	max-buffer-size, refresh-interval,   Options.MaxBufferSize, RefreshInterval,
//	max-concurrent-queries               MaxConcurrentQueries
//
// Every from is inclusive (0 means the beginning), as everywhere in
// logbook: a consumer that has processed position p resumes from p+1. This
// differs from Akka, whose offsets are exclusive.
//
// # Go API
//
//	r, err := query.New(store, query.Options{MaxBufferSize: 100, MaxConcurrentQueries: 100})
//	q := r.EventsByStream("order-42", 1, 0)
//	for {
//		evs, err := q.Next(ctx) // a page of at most MaxBufferSize events
//		if err == io.EOF { break } // only current queries (or a reached "to") end
//		if err != nil { ... }      // ctx.Err(), ErrClosed, or a backend error
//		...
//	}
//
// or, one event at a time, for ev, err := range q.All(ctx) { … }.
//
// The iterators are pulled: each Next runs one backend query, while its
// caller waits, and returns its page. No goroutine belongs to a query and
// nothing is buffered, so back-pressure is simply the consumer not
// calling Next, and a query costs only its small struct between calls —
// a hundred thousand idle live queries cost a few megabytes plus their
// consumers. Cancelling ctx ends a Next at once (the query can be resumed
// with a later Next); Reader.Close ends every live query.
//
// # Throttling
//
// Every backend call a query makes (ReadStream, ReadAll, ReadTag,
// ListStreams, and the Head read that bounds a current query) runs under a
// permit of the reader's Permitter, MaxConcurrentQueries of them, granted
// in FIFO order and always given back: after success, failure, a panic, or
// cancellation while waiting. A permit is held for one call, never while
// the consumer handles a page, and the call runs on one of the
// permitter's worker goroutines (as many as permits), so that the deep
// stack of a backend read is not kept by every consumer's goroutine.
// The Registerer option exports the
// permitter's gauges: logbook_query_throttler_waiters,
// logbook_query_throttler_permits_in_use, logbook_query_throttler_permits,
// and the counter logbook_query_backend_queries_total.
//
// # Live queries: woken, not polling
//
// If the store can signal commits (it has backend.Tail's Changed
// method, as pebblestore does, also when wrapped by a decorator that
// offers Unwrap() eventstore.Store), a live query that has caught up sleeps on
// that signal, taken before its last read so that a commit between the
// read and the sleep still wakes it: no gap, no duplicate, no timer, and
// a commit to one stream wakes only that stream's queries. Otherwise it
// asks again every RefreshInterval, which is what a SQL backend would do.
//
// # HTTP
//
// NewHandler serves all eight over HTTP as NDJSON (one JSON object per
// line, flushed per page) or server-sent events. Events are EventJSON
// objects; stream ids are {"stream": ID}. A failure after the
// response has begun is written in-band — an NDJSON line {"error":
// PROBLEM} or an SSE "error" event — and a finished current query sends
// an SSE "end" event. Bad parameters are answered 400 with an RFC 9457
// problem (application/problem+json).
package query
