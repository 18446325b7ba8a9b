package query

import (
	"context"
	"fmt"
	"io"
	"iter"

	"github.com/logbook/logbook/engine/eventstore"
)

// Events is one event query: it delivers pages of events in order (a
// stream's in sequence order, the others in global order), without gaps or
// duplicates. Each Next runs at most one backend query at a time, under a
// permit, and holds nothing between calls but its cursor: the consumer's
// own calls drive it, so a slow consumer costs no buffer and no goroutine.
//
// An Events is not safe for concurrent use. After an error other than
// io.EOF or ErrClosed, Next may be called again: the cursor moves only
// when a page is returned, so a retry resumes where the query stood.
type Events struct {
	j      *Reader
	filter eventstore.Filter
	cursor uint64 // the next seq (stream) or position to deliver
	to     uint64 // stream queries: the last seq to deliver, 0 for none
	live   bool

	bounded bool   // current queries: bound is set
	bound   uint64 // current queries: the head when the query began
	done    bool

	// changed is the signal taken before the last read, when that read
	// found nothing: the wait after it must use the very same channel.
	changed <-chan struct{}
}

// CurrentEventsByStream returns the events of stream with from <=
// Seq <= to (to == 0: no upper bound) that are stored when the query
// begins, then io.EOF.
func (j *Reader) CurrentEventsByStream(stream string, from, to uint64) *Events {
	return j.newEvents(eventstore.OfStream(stream), from, to, false)
}

// EventsByStream returns the events of stream with from <= Seq <=
// to (to == 0: no upper bound), stored now or later: it never ends unless
// to is reached (then io.EOF), ctx ends, or the reader is closed.
func (j *Reader) EventsByStream(stream string, from, to uint64) *Events {
	return j.newEvents(eventstore.OfStream(stream), from, to, true)
}

// CurrentAllEvents returns every event from position from (inclusive) up
// to the head of the log when the query begins, then io.EOF.
func (j *Reader) CurrentAllEvents(from uint64) *Events {
	return j.newEvents(eventstore.All(), from, 0, false)
}

// AllEvents returns every event from position from (inclusive) on, live.
func (j *Reader) AllEvents(from uint64) *Events {
	return j.newEvents(eventstore.All(), from, 0, true)
}

// CurrentEventsByTag returns the events carrying tag from position from
// (inclusive) up to the head of the log when the query begins, then
// io.EOF.
func (j *Reader) CurrentEventsByTag(tag string, from uint64) *Events {
	return j.newEvents(eventstore.Tagged(tag), from, 0, false)
}

// EventsByTag returns the events carrying tag from position from
// (inclusive) on, live.
func (j *Reader) EventsByTag(tag string, from uint64) *Events {
	return j.newEvents(eventstore.Tagged(tag), from, 0, true)
}

func (j *Reader) newEvents(f eventstore.Filter, from, to uint64, live bool) *Events {
	if from == 0 {
		from = 1
	}
	e := &Events{j: j, filter: f, cursor: from, to: to, live: live}
	if f.Kind == eventstore.FilterStream && to > 0 && from > to {
		e.done = true
	}
	return e
}

// Cursor is the sequence number (stream queries) or position (the others)
// of the next event the query will deliver: where to resume it later.
func (e *Events) Cursor() uint64 { return e.cursor }

// Next returns the next page of at most MaxBufferSize events. A current
// query returns io.EOF after its last page; a live one that has caught up
// waits for new events until ctx ends (returning ctx.Err()) or the reader
// is closed (ErrClosed).
func (e *Events) Next(ctx context.Context) ([]eventstore.Event, error) {
	for {
		if e.done {
			return nil, io.EOF
		}
		if e.j.closed() {
			return nil, ErrClosed
		}
		if e.changed != nil {
			// The last read found nothing; sleep on the signal taken
			// before it, which any commit since has fired.
			changed := e.changed
			if err := e.j.wait(ctx, changed); err != nil {
				return nil, err
			}
			e.changed = nil
		}
		var changed <-chan struct{}
		if e.live {
			changed = e.j.changed(e.filter)
		}
		evs, err := e.read(ctx)
		if err != nil {
			return nil, err
		}
		if len(evs) > 0 {
			return evs, nil
		}
		if e.done {
			return nil, io.EOF
		}
		if !e.live {
			e.done = true
			return nil, io.EOF
		}
		if changed == nil {
			// Polling: nothing to hold on to, wait a refresh interval.
			if err := e.j.wait(ctx, nil); err != nil {
				return nil, err
			}
			continue
		}
		e.changed = changed
	}
}

// read runs one backend query from the cursor and advances it past the
// events it returns.
func (e *Events) read(ctx context.Context) ([]eventstore.Event, error) {
	max := e.j.opts.MaxBufferSize
	if e.filter.Kind == eventstore.FilterStream && e.to > 0 {
		max = int(min(uint64(max), e.to-e.cursor+1))
	}
	if e.bounded && e.filter.Kind != eventstore.FilterStream && e.cursor > e.bound {
		e.done = true
		return nil, nil
	}
	var evs []eventstore.Event
	err := e.j.backend(ctx, func() error {
		if !e.live && !e.bounded {
			// A current query ends at the head of the log as it was
			// when the query began, however busy the writers are. The
			// head is read under the same permit as the first page.
			head, err := e.j.store.Head(ctx)
			if err != nil {
				return err
			}
			e.bound, e.bounded = head, true
			if e.filter.Kind != eventstore.FilterStream && e.cursor > e.bound {
				return nil
			}
		}
		var err error
		switch e.filter.Kind {
		case eventstore.FilterStream:
			evs, err = e.j.store.ReadStream(ctx, e.filter.Stream, e.cursor, max)
		case eventstore.FilterTag:
			evs, err = e.j.store.ReadTag(ctx, e.filter.Tag, e.cursor, max)
		default:
			evs, err = e.j.store.ReadAll(ctx, e.cursor, max)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("query: events of %s from %d: %w", e.filter, e.cursor, err)
	}
	if len(evs) > max {
		evs = evs[:max] // a backend that ignores max must not break the page bound
	}
	if !e.live {
		for i := range evs {
			if evs[i].Position > e.bound {
				evs, e.done = evs[:i], true
				break
			}
		}
	}
	if len(evs) == 0 {
		if !e.live && e.filter.Kind != eventstore.FilterStream && e.cursor > e.bound {
			e.done = true
		}
		return nil, nil
	}
	last := evs[len(evs)-1]
	if e.filter.Kind == eventstore.FilterStream {
		e.cursor = last.Seq + 1
		if e.to > 0 && e.cursor > e.to {
			e.done = true
		}
	} else {
		e.cursor = last.Position + 1
		if !e.live && e.cursor > e.bound {
			e.done = true
		}
	}
	return evs, nil
}

// All returns the rest of the query as an iterator of events. It stops at
// the end of a current query; any other error is yielded once, with a
// zero event, and ends it. Breaking out of the loop leaves the query at
// the first event not yielded, so it can be resumed.
func (e *Events) All(ctx context.Context) iter.Seq2[eventstore.Event, error] {
	return func(yield func(eventstore.Event, error) bool) {
		for {
			evs, err := e.Next(ctx)
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(eventstore.Event{}, err)
				return
			}
			for i, ev := range evs {
				if !yield(ev, nil) {
					if i+1 < len(evs) {
						e.rewind(evs[i+1])
					}
					return
				}
			}
		}
	}
}

// rewind moves the cursor back to ev, delivered by Next but not consumed.
func (e *Events) rewind(ev eventstore.Event) {
	if e.filter.Kind == eventstore.FilterStream {
		e.cursor = ev.Seq
	} else {
		e.cursor = ev.Position
	}
	e.done = false // ev is within the query's bounds, so it is not over
	e.changed = nil
}
