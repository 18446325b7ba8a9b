package backend

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/logbook/logbook/engine/eventstore"
)

// Tail is what a backend provides so that NewSubscription can follow it.
type Tail interface {
	// ReadFiltered reads the events selected by f from cursor on (a
	// position, or a sequence number for a stream filter).
	ReadFiltered(ctx context.Context, f eventstore.Filter, cursor uint64, max int) ([]eventstore.Event, error)
	// Changed returns a channel that is closed once an event selected by f
	// may have become readable after the call (and when the store closes).
	// Taking the channel before reading is what makes the switch from
	// catch-up to live free of gaps.
	Changed(f eventstore.Filter) <-chan struct{}
}

// ReadFiltered is Tail.ReadFiltered for a Store: the read that matches
// f's kind.
func ReadFiltered(ctx context.Context, s eventstore.Store, f eventstore.Filter, cursor uint64, max int) ([]eventstore.Event, error) {
	switch f.Kind {
	case eventstore.FilterStream:
		return s.ReadStream(ctx, f.Stream, cursor, max)
	case eventstore.FilterTag:
		return s.ReadTag(ctx, f.Tag, cursor, max)
	default:
		return s.ReadAll(ctx, cursor, max)
	}
}

// NewSubscription returns a Subscription that pulls from t: it reads
// pages of at most batch events (default 512) from its cursor, and when
// it finds nothing it sleeps until t signals a commit. A backend's
// Subscribe returns it, after checking the filter (Limits.ValidateFilter). Because the subscriber's own calls do
// the reading, nothing is buffered on its behalf, however slow it is.
func NewSubscription(t Tail, f eventstore.Filter, from uint64, batch int) eventstore.Subscription {
	if from == 0 {
		from = 1
	}
	if batch <= 0 {
		batch = 512
	}
	s := &tailSub{tail: t, filter: f, batch: batch, done: make(chan struct{})}
	s.cursor.Store(from)
	return s
}

type tailSub struct {
	tail   Tail
	filter eventstore.Filter
	batch  int

	mu     sync.Mutex // serializes Next calls
	cursor atomic.Uint64

	closeOnce sync.Once
	done      chan struct{}
}

func (s *tailSub) Next(ctx context.Context) ([]eventstore.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		select {
		case <-s.done:
			return nil, eventstore.ErrClosed
		default:
		}
		changed := s.tail.Changed(s.filter)
		evs, err := s.tail.ReadFiltered(ctx, s.filter, s.cursor.Load(), s.batch)
		if errors.Is(err, eventstore.ErrStreamDeleted) {
			// A soft-deleted stream: nothing to deliver until an append
			// recreates it.
			evs, err = nil, nil
		}
		if err != nil {
			return nil, err
		}
		if len(evs) > 0 {
			last := evs[len(evs)-1]
			if s.filter.Kind == eventstore.FilterStream {
				s.cursor.Store(last.Seq + 1)
			} else {
				s.cursor.Store(last.Position + 1)
			}
			return evs, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.done:
			return nil, eventstore.ErrClosed
		}
	}
}

func (s *tailSub) Cursor() uint64 { return s.cursor.Load() }

func (s *tailSub) Close() error {
	s.closeOnce.Do(func() { close(s.done) })
	return nil
}
