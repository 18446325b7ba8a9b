package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/eventstore"
)

// storeMetrics are the event store's metrics. Stores instrumented on one
// registry share them (Register), so the figures are per process.
type storeMetrics struct {
	appendSeconds prometheus.Histogram
	appends       *prometheus.CounterVec // by result
	appended      prometheus.Counter
	reads         *prometheus.CounterVec // by kind
	readEvents    *prometheus.CounterVec // by kind
}

// Append results, as the result label of logbook_appends_total.
const (
	resultOK        = "ok"
	resultDuplicate = "duplicate"
	resultConflict  = "conflict"
	resultError     = "error"
)

// InstrumentStore returns s measured on reg:
//
//	logbook_append_seconds          histogram of Append latency, every outcome
//	logbook_appends_total{result}   appends by result: ok, duplicate, conflict, error
//	logbook_appended_events_total   events written (duplicates excluded)
//	logbook_reads_total{kind}       read calls: all, stream, stream_backward, tag, subscription
//	logbook_read_events_total{kind} events those calls returned
//	logbook_head_position           the log's last durable position
//
// Methods it does not measure go straight to s. A nil reg returns s
// itself. The head gauge reads the first store instrumented on reg: serve
// one store per registry.
func InstrumentStore(s eventstore.Store, reg prometheus.Registerer) (eventstore.Store, error) {
	if reg == nil {
		return s, nil
	}
	var m storeMetrics
	var errs [6]error
	m.appendSeconds, errs[0] = Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "logbook_append_seconds",
		Help: "Latency of event store appends, from the call to the durable acknowledgement.",
		// 100 µs (an append sharing a group commit) to 3.3 s.
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	}))
	m.appends, errs[1] = Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "logbook_appends_total",
		Help: "Event store appends by result: ok, duplicate (a retry answered from the log), conflict (expected version), error.",
	}, []string{"result"}))
	m.appended, errs[2] = Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "logbook_appended_events_total",
		Help: "Events written to the event store; retries answered as duplicates are not counted.",
	}))
	m.reads, errs[3] = Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "logbook_reads_total",
		Help: "Event store read calls by kind: all, stream, stream_backward, tag, subscription (one per delivered batch).",
	}, []string{"kind"}))
	m.readEvents, errs[4] = Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "logbook_read_events_total",
		Help: "Events returned by event store reads, by kind.",
	}, []string{"kind"}))
	_, errs[5] = Register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "logbook_head_position",
		Help: "Position of the last durable event in the log.",
	}, func() float64 {
		h, err := s.Head(context.Background())
		if err != nil {
			return 0
		}
		return float64(h)
	}))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return &instrumented{Store: s, m: &m}, nil
}

// instrumented is the decorator. Embedding the interface passes every
// method it does not override straight through.
type instrumented struct {
	eventstore.Store
	m *storeMetrics
}

// Unwrap returns the store underneath, for what only a backend offers.
func (s *instrumented) Unwrap() eventstore.Store { return s.Store }

func (s *instrumented) Append(ctx context.Context, stream string, expect eventstore.ExpectedVersion, events []eventstore.NewEvent) (eventstore.AppendResult, error) {
	start := time.Now()
	res, err := s.Store.Append(ctx, stream, expect, events)
	s.appended(start, len(events), res, err)
	return res, err
}

// AppendAsync implements eventstore.AsyncAppender, through the store
// underneath if it is one (eventstore.AppendAsync).
func (s *instrumented) AppendAsync(stream string, expect eventstore.ExpectedVersion, events []eventstore.NewEvent, done func(eventstore.AppendResult, error)) {
	start, n := time.Now(), len(events)
	eventstore.AppendAsync(s.Store, stream, expect, events, func(res eventstore.AppendResult, err error) {
		s.appended(start, n, res, err)
		done(res, err)
	})
}

// appended counts an append of n events started at start.
func (s *instrumented) appended(start time.Time, n int, res eventstore.AppendResult, err error) {
	s.m.appendSeconds.Observe(time.Since(start).Seconds())
	switch {
	case err == nil && res.Duplicate:
		s.m.appends.WithLabelValues(resultDuplicate).Inc()
	case err == nil:
		s.m.appends.WithLabelValues(resultOK).Inc()
		s.m.appended.Add(float64(n))
	case errors.Is(err, eventstore.ErrVersionConflict):
		s.m.appends.WithLabelValues(resultConflict).Inc()
	default:
		s.m.appends.WithLabelValues(resultError).Inc()
	}
}

func (s *instrumented) read(kind string, evs []eventstore.Event, err error) ([]eventstore.Event, error) {
	s.m.reads.WithLabelValues(kind).Inc()
	if err == nil {
		s.m.readEvents.WithLabelValues(kind).Add(float64(len(evs)))
	}
	return evs, err
}

func (s *instrumented) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]eventstore.Event, error) {
	evs, err := s.Store.ReadStream(ctx, stream, from, max)
	return s.read("stream", evs, err)
}

func (s *instrumented) ReadStreamBackward(ctx context.Context, stream string, from uint64, max int) ([]eventstore.Event, error) {
	evs, err := s.Store.ReadStreamBackward(ctx, stream, from, max)
	return s.read("stream_backward", evs, err)
}

func (s *instrumented) ReadAll(ctx context.Context, from uint64, max int) ([]eventstore.Event, error) {
	evs, err := s.Store.ReadAll(ctx, from, max)
	return s.read("all", evs, err)
}

func (s *instrumented) ReadTag(ctx context.Context, tag string, from uint64, max int) ([]eventstore.Event, error) {
	evs, err := s.Store.ReadTag(ctx, tag, from, max)
	return s.read("tag", evs, err)
}

func (s *instrumented) Subscribe(ctx context.Context, f eventstore.Filter, from uint64) (eventstore.Subscription, error) {
	sub, err := s.Store.Subscribe(ctx, f, from)
	if err != nil {
		return nil, err
	}
	return &instrumentedSub{Subscription: sub, s: s}, nil
}

type instrumentedSub struct {
	eventstore.Subscription
	s *instrumented
}

func (sub *instrumentedSub) Next(ctx context.Context) ([]eventstore.Event, error) {
	evs, err := sub.Subscription.Next(ctx)
	if err != nil {
		return evs, err // a wait that ended is not a read
	}
	return sub.s.read("subscription", evs, nil)
}
