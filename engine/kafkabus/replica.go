package kafkabus

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/backend"
)

// ReplicaStore is a read-only eventstore.Store for a read replica: it
// delivers the live log from Kafka and everything else from a fallback
// store (the primary's database, or an httpreplica.Store).
//
//   - Subscribe(All, from) catches up from the fallback while it is more
//     than a window behind the fallback's head, then reads every
//     partition of the topic directly (no consumer group: every replica
//     gets every event), merges them back into exact position order, and
//     reads from the fallback any position Kafka does not deliver.
//   - Subscribe with a tag or stream filter, and every read (Head,
//     ReadAll, ReadStream, ReadStreamBackward, ReadTag, ListStreams,
//     StreamVersion, LoadSnapshot), are the fallback's.
//   - Append and SaveSnapshot return eventstore.ErrReadOnly.
//   - Close does nothing: each subscription's Close stops its own Kafka
//     client, and the fallback belongs to the caller.
type ReplicaStore struct {
	backend.ReadOnly // Append and SaveSnapshot

	cfg      Config
	topic    string
	fallback eventstore.Store
	opts     replicaOptions
}

var _ eventstore.Store = (*ReplicaStore)(nil)

type replicaOptions struct {
	window     int64
	seekMargin time.Duration
	gapWait    time.Duration
	batch      int
	buffer     int
}

// ReplicaOption tunes a ReplicaStore.
type ReplicaOption func(*replicaOptions)

// WithCatchUpWindow sets how far behind the fallback's head a subscription
// may be and still switch to Kafka (default 1000 events); further behind,
// it reads pages from the fallback. A negative window never catches up
// from the fallback: the subscription goes to Kafka at once, and the
// fallback only fills what Kafka lacks.
func WithCatchUpWindow(events int64) ReplicaOption {
	return func(o *replicaOptions) { o.window = events }
}

// WithSeekMargin sets how much earlier than the commit time of the last
// event delivered the partitions are sought (default 1 minute): commit
// times come from the primary's clock, which may step back a little.
// Records before the cursor are read and dropped; events the margin misses
// are read from the fallback.
func WithSeekMargin(d time.Duration) ReplicaOption {
	return func(o *replicaOptions) { o.seekMargin = d }
}

// WithGapWait bounds how long a subscription waits for a position while
// later ones have arrived (default 2s) before reading it from the
// fallback. It waits not at all once every partition has delivered a
// later position: each partition is in position order, so the missing one
// is not coming (retention deleted it).
func WithGapWait(d time.Duration) ReplicaOption {
	return func(o *replicaOptions) { o.gapWait = d }
}

// NewReplicaStore returns a ReplicaStore following topic, with fallback
// for reads and for what Kafka does not hold.
func NewReplicaStore(cfg Config, topic string, fallback eventstore.Store, opts ...ReplicaOption) *ReplicaStore {
	o := replicaOptions{window: 1000, seekMargin: time.Minute, gapWait: 2 * time.Second, batch: 1000, buffer: 4096}
	for _, opt := range opts {
		opt(&o)
	}
	return &ReplicaStore{cfg: cfg, topic: topic, fallback: fallback, opts: o}
}

// Subscribe implements eventstore.Store; see ReplicaStore.
func (s *ReplicaStore) Subscribe(ctx context.Context, f eventstore.Filter, from uint64) (eventstore.Subscription, error) {
	if f.Kind != eventstore.FilterAll {
		return s.fallback.Subscribe(ctx, f, from)
	}
	from = max(from, 1)
	subCtx, cancel := context.WithCancel(context.Background())
	sub := &replicaSub{
		store:  s,
		ctx:    subCtx,
		cancel: cancel,
		events: make(chan result, s.opts.buffer),
		done:   make(chan struct{}),
	}
	sub.cursor.Store(from)
	go sub.pump(from)
	return sub, nil
}

type result struct {
	ev  eventstore.Event
	err error
}

// replicaSub is fed by a goroutine of its own (pump), so that Next can take
// whatever has arrived. The channel is bounded: a slow consumer stops the
// pump, and the pump stops fetching.
type replicaSub struct {
	store   *ReplicaStore
	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	events  chan result
	done    chan struct{} // closed when pump returns
	cursor  atomic.Uint64
	pending error // met while gathering a batch; returned by the next call
}

func (s *replicaSub) Next(ctx context.Context) ([]eventstore.Event, error) {
	if s.ctx.Err() != nil {
		return nil, eventstore.ErrClosed
	}
	if err := s.pending; err != nil {
		return nil, err
	}
	var out []eventstore.Event
	take := func(r result, ok bool) bool {
		switch {
		case !ok:
			s.pending = eventstore.ErrClosed
		case r.err != nil:
			s.pending = r.err
		default:
			out = append(out, r.ev)
			return true
		}
		return false
	}
	select {
	case r, ok := <-s.events:
		if !take(r, ok) {
			return nil, s.pending
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for len(out) < s.store.opts.batch {
		select {
		case r, ok := <-s.events:
			if take(r, ok) {
				continue
			}
		default:
		}
		break
	}
	s.cursor.Store(out[len(out)-1].Position + 1)
	return out, nil
}

func (s *replicaSub) Cursor() uint64 { return s.cursor.Load() }

// Close stops the pump and waits for it, so that no Kafka client outlives
// the subscription.
func (s *replicaSub) Close() error {
	s.cancel()
	<-s.done
	return nil
}

// pump delivers from position next on: from the fallback while far
// behind, then from Kafka. Errors go to Next; the pump then stops.
func (s *replicaSub) pump(next uint64) {
	defer close(s.done)
	defer close(s.events)
	err := s.run(next)
	if err != nil && s.ctx.Err() == nil {
		select {
		case s.events <- result{err: err}:
		case <-s.ctx.Done():
		}
	}
}

func (s *replicaSub) send(ev eventstore.Event) error {
	select {
	case s.events <- result{ev: ev}:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// fill delivers positions next..upTo (inclusive) from the fallback and
// returns the position after upTo. Positions the fallback skips are
// events removed from the store (eventstore.Deleter): Kafka may lack them
// because they were removed before they were published.
func (s *replicaSub) fill(next, upTo uint64) (uint64, error) {
	for next <= upTo {
		evs, err := s.store.fallback.ReadAll(s.ctx, next, int(min(upTo-next+1, uint64(s.store.opts.batch))))
		if err != nil {
			return next, fmt.Errorf("kafkabus: reading positions %d-%d from the fallback: %w", next, upTo, err)
		}
		if len(evs) == 0 {
			head, err := s.store.fallback.Head(s.ctx)
			if err != nil {
				return next, fmt.Errorf("kafkabus: fallback head: %w", err)
			}
			if head < upTo {
				return next, fmt.Errorf("kafkabus: the fallback store lacks position %d, which Kafka has events after", next)
			}
			return upTo + 1, nil // next..upTo were all removed
		}
		for _, ev := range evs {
			if ev.Position > upTo {
				return upTo + 1, nil
			}
			if ev.Position < next {
				return next, fmt.Errorf("kafkabus: the fallback gave position %d where %d or later was next", ev.Position, next)
			}
			if err := s.send(ev); err != nil {
				return next, err
			}
			next = ev.Position + 1
		}
	}
	return next, nil
}

func (s *replicaSub) run(next uint64) error {
	st, o := s.store, s.store.opts
	fb := st.fallback
	// Catch up from the fallback while far behind: a sequential read of
	// the store is cheaper than a scan of every partition.
	var lastTime time.Time
	for o.window >= 0 {
		head, err := fb.Head(s.ctx)
		if err != nil {
			return fmt.Errorf("kafkabus: fallback head: %w", err)
		}
		if int64(head)-int64(next) < o.window {
			break
		}
		evs, err := fb.ReadAll(s.ctx, next, o.batch)
		if err != nil {
			return fmt.Errorf("kafkabus: catching up from %d: %w", next, err)
		}
		if len(evs) == 0 {
			break // a head ahead of what reads show: let Kafka bring the rest
		}
		for _, ev := range evs {
			// A hole is an event removed from the store.
			if ev.Position < next {
				return fmt.Errorf("kafkabus: the fallback gave position %d where %d or later was next", ev.Position, next)
			}
			if err := s.send(ev); err != nil {
				return err
			}
			next = ev.Position + 1
			lastTime = ev.Time
		}
	}
	// Seek every partition to a little before the commit time of the last
	// event delivered: records are stamped with their commit time, so
	// every event after it is at or after that offset.
	seek := kgo.NewOffset().AtStart()
	if next > 1 {
		if lastTime.IsZero() {
			evs, err := fb.ReadAll(s.ctx, next-1, 1)
			if err != nil {
				return fmt.Errorf("kafkabus: reading position %d for its time: %w", next-1, err)
			}
			if len(evs) > 0 && evs[0].Position == next-1 {
				lastTime = evs[0].Time
			}
		}
		if !lastTime.IsZero() {
			seek = kgo.NewOffset().AfterMilli(lastTime.Add(-o.seekMargin).UnixMilli())
		}
	}
	cl, err := st.cfg.client(
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeTopics(st.topic),
		kgo.ConsumeResetOffset(seek),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	partitions, err := partitionCount(s.ctx, kadm.NewClient(cl), st.topic)
	if err != nil {
		return err
	}

	m := merger{pending: map[uint64]eventstore.Event{}, seen: map[int32]uint64{}, partitions: partitions}
	var gapSince time.Time
	for {
		for {
			ev, ok := m.take(next)
			if !ok {
				break
			}
			if err := s.send(ev); err != nil {
				return err
			}
			next++
		}
		m.drop(next)
		pollCtx, cancel := s.ctx, context.CancelFunc(func() {})
		if m.len() == 0 {
			gapSince = time.Time{}
		} else {
			// next is missing while later positions are here.
			if gapSince.IsZero() {
				gapSince = time.Now()
			}
			if m.allPast(next) || time.Since(gapSince) >= o.gapWait {
				if next, err = s.fill(next, m.min()-1); err != nil {
					return err
				}
				gapSince = time.Time{}
				continue
			}
			pollCtx, cancel = context.WithDeadline(s.ctx, gapSince.Add(o.gapWait))
		}
		fetches := cl.PollFetches(pollCtx)
		cancel()
		if s.ctx.Err() != nil {
			return s.ctx.Err()
		}
		var ferr error
		fetches.EachError(func(_ string, _ int32, err error) {
			if ferr == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && !kerr.IsRetriable(err) {
				ferr = err
			}
		})
		if ferr != nil {
			return fmt.Errorf("kafkabus: fetching %s: %w", st.topic, ferr)
		}
		var derr error
		fetches.EachRecord(func(r *kgo.Record) {
			if derr != nil {
				return
			}
			ev, err := decodeRecord(r)
			if err != nil {
				derr = err
				return
			}
			m.add(r.Partition, ev, next)
		})
		if derr != nil {
			return derr
		}
	}
}

// merger puts the partitions' records back into position order.
type merger struct {
	pending    map[uint64]eventstore.Event
	order      posHeap
	seen       map[int32]uint64 // the highest position each partition delivered
	partitions int
}

func (m *merger) add(partition int32, ev eventstore.Event, next uint64) {
	m.seen[partition] = max(m.seen[partition], ev.Position)
	if ev.Position < next {
		return // delivered already (the seek margin reads some twice)
	}
	if _, dup := m.pending[ev.Position]; dup {
		return
	}
	m.pending[ev.Position] = ev
	heap.Push(&m.order, ev.Position)
}

func (m *merger) take(pos uint64) (eventstore.Event, bool) {
	ev, ok := m.pending[pos]
	if ok {
		delete(m.pending, pos)
		heap.Pop(&m.order) // pos is the smallest: nothing below next is kept
	}
	return ev, ok
}

// drop forgets positions below next (filled from the fallback meanwhile).
func (m *merger) drop(next uint64) {
	for len(m.order) > 0 && m.order[0] < next {
		delete(m.pending, heap.Pop(&m.order).(uint64))
	}
}

func (m *merger) len() int    { return len(m.order) }
func (m *merger) min() uint64 { return m.order[0] }

// allPast reports whether every partition has delivered a position beyond
// pos: partitions are each in position order, so pos will not come.
func (m *merger) allPast(pos uint64) bool {
	if len(m.seen) < m.partitions {
		return false
	}
	for _, p := range m.seen {
		if p <= pos {
			return false
		}
	}
	return true
}

type posHeap []uint64

func (h posHeap) Len() int           { return len(h) }
func (h posHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h posHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *posHeap) Push(x any)        { *h = append(*h, x.(uint64)) }
func (h *posHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// The reads are the fallback's.

func (s *ReplicaStore) Head(ctx context.Context) (uint64, error) { return s.fallback.Head(ctx) }
func (s *ReplicaStore) ReadAll(ctx context.Context, from uint64, max int) ([]eventstore.Event, error) {
	return s.fallback.ReadAll(ctx, from, max)
}
func (s *ReplicaStore) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]eventstore.Event, error) {
	return s.fallback.ReadStream(ctx, stream, from, max)
}
func (s *ReplicaStore) ReadStreamBackward(ctx context.Context, stream string, from uint64, max int) ([]eventstore.Event, error) {
	return s.fallback.ReadStreamBackward(ctx, stream, from, max)
}
func (s *ReplicaStore) ReadTag(ctx context.Context, tag string, from uint64, max int) ([]eventstore.Event, error) {
	return s.fallback.ReadTag(ctx, tag, from, max)
}
func (s *ReplicaStore) ListStreams(ctx context.Context, after string, max int) ([]string, error) {
	return s.fallback.ListStreams(ctx, after, max)
}
func (s *ReplicaStore) StreamVersion(ctx context.Context, stream string) (uint64, error) {
	return s.fallback.StreamVersion(ctx, stream)
}
func (s *ReplicaStore) LoadSnapshot(ctx context.Context, stream string) (eventstore.Snapshot, bool, error) {
	return s.fallback.LoadSnapshot(ctx, stream)
}

// Close does nothing: subscriptions close themselves, and the fallback is
// the caller's to close.
func (s *ReplicaStore) Close() error { return nil }
