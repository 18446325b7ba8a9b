package query

import (
	"context"
	"fmt"
	"io"
	"iter"

	"github.com/logbook/logbook/engine/eventstore"
)

// StreamIDs is a query of the ids of the streams. It
// lists the streams through the store's index, a page at a time; a live
// query then follows the log and delivers each stream whose first event
// appears in it.
//
// The switch from listing to following must neither miss nor repeat a
// stream created while the listing ran. The query reads the head h0 before
// listing and follows the log from h0+1; a stream created after h0 may also
// have been listed, if its name came after the listing's cursor when it was
// created. Those are exactly the streams created while some page was being
// listed, so the names of every page listed after the log moved past h0
// are remembered, until the follower passes the head read after the last
// page: nothing later can have been listed. On a quiet log nothing is
// remembered; under writes, at most the names listed meanwhile, for as
// long as the follower needs to catch up with the listing.
//
// A StreamIDs is not safe for concurrent use.
type StreamIDs struct {
	j    *Reader
	live bool

	listing bool
	started bool
	after   string // listing cursor: the last name listed
	h0      uint64 // head before the listing began

	listed map[string]struct{} // names listed that the follower may meet again
	h1     uint64              // head after the listing ended
	cursor uint64              // follower: next position
	done   bool

	changed <-chan struct{}
	pending []string // ids of a page that All stopped in the middle of
}

// CurrentStreamIDs returns the ids of the streams that exist, in byte
// order, then io.EOF.
func (j *Reader) CurrentStreamIDs() *StreamIDs {
	return &StreamIDs{j: j, listing: true}
}

// StreamIDs returns the ids of the streams that exist, in byte order,
// then those of new streams as their first event commits. Each id is
// delivered once.
func (j *Reader) StreamIDs() *StreamIDs {
	return &StreamIDs{j: j, listing: true, live: true}
}

// Next returns the next page of at most MaxBufferSize stream ids. A
// current query returns io.EOF after its last page; a live one waits for
// new streams until ctx ends or the reader is closed (ErrClosed).
func (p *StreamIDs) Next(ctx context.Context) ([]string, error) {
	if ids := p.pending; len(ids) > 0 {
		p.pending = nil
		return ids, nil
	}
	for {
		if p.done {
			return nil, io.EOF
		}
		if p.j.closed() {
			return nil, ErrClosed
		}
		if p.listing {
			ids, err := p.list(ctx)
			if err != nil || len(ids) > 0 {
				return ids, err
			}
			continue
		}
		ids, err := p.follow(ctx)
		if err != nil || len(ids) > 0 {
			return ids, err
		}
	}
}

// list reads one page of the listing. It returns no ids when the listing
// is over, having switched the query to following (or ended it).
func (p *StreamIDs) list(ctx context.Context) ([]string, error) {
	var ids []string
	var after uint64
	err := p.j.backend(ctx, func() error {
		var err error
		if p.live && !p.started {
			if p.h0, err = p.j.store.Head(ctx); err != nil {
				return err
			}
		}
		if ids, err = p.j.store.ListStreams(ctx, p.after, p.j.opts.MaxBufferSize); err != nil {
			return err
		}
		if p.live {
			after, err = p.j.store.Head(ctx)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("query: stream ids after %q: %w", p.after, err)
	}
	p.started = true
	if len(ids) > p.j.opts.MaxBufferSize {
		ids = ids[:p.j.opts.MaxBufferSize]
	}
	if len(ids) > 0 {
		p.after = ids[len(ids)-1]
		if p.live && after > p.h0 {
			// The log moved while this page (or an earlier one) was
			// listed: a stream among these may be met again by the
			// follower.
			if p.listed == nil {
				p.listed = make(map[string]struct{})
			}
			for _, id := range ids {
				p.listed[id] = struct{}{}
			}
		}
		return ids, nil
	}
	p.listing = false
	if !p.live {
		p.done = true
		return nil, nil
	}
	p.h1, p.cursor = after, p.h0+1
	if p.h1 < p.cursor {
		p.listed = nil
	}
	return nil, nil
}

// follow reads one page of the log after the listing and returns the
// streams that begin in it, waiting first if the last page was empty.
func (p *StreamIDs) follow(ctx context.Context) ([]string, error) {
	if p.changed != nil {
		changed := p.changed
		if err := p.j.wait(ctx, changed); err != nil {
			return nil, err
		}
		p.changed = nil
	}
	changed := p.j.changed(eventstore.All())
	var evs []eventstore.Event
	err := p.j.backend(ctx, func() error {
		var err error
		evs, err = p.j.store.ReadAll(ctx, p.cursor, p.j.opts.MaxBufferSize)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("query: stream ids: new streams from position %d: %w", p.cursor, err)
	}
	if len(evs) == 0 {
		if changed == nil {
			return nil, p.j.wait(ctx, nil)
		}
		p.changed = changed
		return nil, nil
	}
	var ids []string
	for _, ev := range evs {
		if ev.Seq != 1 {
			continue
		}
		if _, ok := p.listed[ev.Stream]; ok && ev.Position <= p.h1 {
			continue
		}
		ids = append(ids, ev.Stream)
	}
	p.cursor = evs[len(evs)-1].Position + 1
	if p.cursor > p.h1 {
		p.listed = nil // nothing from here on was listed
	}
	return ids, nil
}

// All returns the rest of the query as an iterator of ids, like
// Events.All. Breaking out of the loop keeps the ids not yet yielded for
// the next call.
func (p *StreamIDs) All(ctx context.Context) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for {
			ids, err := p.Next(ctx)
			if err == io.EOF {
				return
			}
			if err != nil {
				yield("", err)
				return
			}
			for i, id := range ids {
				if !yield(id, nil) {
					p.pending = ids[i+1:]
					return
				}
			}
		}
	}
}
