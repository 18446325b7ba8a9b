package query

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/backend"
	"github.com/logbook/logbook/engine/metrics"
)

// ErrClosed ends the queries of a Reader that was closed.
var ErrClosed = errors.New("query: reader closed")

// Defaults of Options, those of Akka.Persistence.Query's SQL plugins.
const (
	DefaultMaxBufferSize        = 100
	DefaultRefreshInterval      = 3 * time.Second
	DefaultMaxConcurrentQueries = 100
)

// Options configure a Reader. The zero value of a field means its
// default.
type Options struct {
	// MaxBufferSize is the page size: the most events (or ids) one backend
	// query fetches, and so the most a query holds at a time.
	MaxBufferSize int
	// RefreshInterval is how often a live query that has caught up asks
	// the backend again, for backends that cannot signal commits (no
	// Changed method). Backends that can wake queries never poll.
	RefreshInterval time.Duration
	// MaxConcurrentQueries is the number of permits: how many backend
	// queries may run at once across all the reader's queries.
	MaxConcurrentQueries int
	// Registerer, if not nil, receives the throttler's metrics. Readers
	// sharing a registry share the metrics, which then sum over them.
	Registerer prometheus.Registerer
}

// changer is what a backend implements to wake live queries on commit
// (backend.Tail's Changed). A decorator that hides it should offer
// Unwrap() eventstore.Store, through which New finds it.
type changer interface {
	Changed(eventstore.Filter) <-chan struct{}
}

// Reader runs stream queries against one store, all of them
// sharing one Permitter. It is safe for concurrent use; the iterators it
// returns are not (each belongs to one consumer).
type Reader struct {
	store   eventstore.Store
	changes changer // nil: poll every RefreshInterval
	opts    Options
	permits *Permitter
	limits  backend.Limits

	closeOnce sync.Once
	done      chan struct{}
}

// New returns a Reader on store. It fails only if the metrics cannot
// be registered.
func New(store eventstore.Store, opts Options) (*Reader, error) {
	if opts.MaxBufferSize <= 0 {
		opts.MaxBufferSize = DefaultMaxBufferSize
	}
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = DefaultRefreshInterval
	}
	if opts.MaxConcurrentQueries <= 0 {
		opts.MaxConcurrentQueries = DefaultMaxConcurrentQueries
	}
	j := &Reader{
		store:   store,
		opts:    opts,
		permits: NewPermitter(opts.MaxConcurrentQueries),
		limits:  backend.NewLimits(eventstore.Limits{}),
		done:    make(chan struct{}),
	}
	if c, ok := find[changer](store); ok {
		j.changes = c
	}
	// The store's own limits, where it tells them, decide which stream ids
	// and tags the HTTP handler accepts.
	if l, ok := find[interface{ Limits() eventstore.Limits }](store); ok {
		j.limits = backend.NewLimits(l.Limits())
	}
	if opts.Registerer != nil {
		if err := registerMetrics(opts.Registerer, j.permits); err != nil {
			return nil, fmt.Errorf("query: registering metrics: %w", err)
		}
	}
	return j, nil
}

func registerMetrics(r prometheus.Registerer, p *Permitter) error {
	var m permitMetrics
	var err error
	gauge := func(name, help string) prometheus.Gauge {
		var g prometheus.Gauge
		if err == nil {
			g, err = metrics.Register(r, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
		}
		return g
	}
	m.waiters = gauge("logbook_query_throttler_waiters", "Queries waiting for a permit to run a backend query.")
	m.inUse = gauge("logbook_query_throttler_permits_in_use", "Backend queries of stream queries running now.")
	m.permits = gauge("logbook_query_throttler_permits", "The limit on concurrent backend queries (max-concurrent-queries), summed over readers.")
	if err == nil {
		m.queries, err = metrics.Register(r, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "logbook_query_backend_queries_total",
			Help: "Backend queries run by stream queries.",
		}))
	}
	if err != nil {
		return err
	}
	p.observe(&m)
	return nil
}

// find looks for an optional capability of the store, through decorators
// that embed a store and offer Unwrap (such as the metrics package's): the
// decorator measures the reads, but only the backend can signal commits.
func find[T any](s eventstore.Store) (T, bool) {
	for s != nil {
		if c, ok := s.(T); ok {
			return c, true
		}
		u, ok := s.(interface{ Unwrap() eventstore.Store })
		if !ok {
			break
		}
		s = u.Unwrap()
	}
	var zero T
	return zero, false
}

// Permitter returns the reader's throttler, for its statistics.
func (j *Reader) Permitter() *Permitter { return j.permits }

// Options returns the options in force, defaults filled in.
func (j *Reader) Options() Options { return j.opts }

// Close ends every live query of the reader — a Next waiting for new
// events returns ErrClosed, and so does every later Next — and stops the
// permitter's worker goroutines. It does not close the store.
func (j *Reader) Close() {
	j.closeOnce.Do(func() {
		close(j.done)
		j.permits.Close()
	})
}

func (j *Reader) closed() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// backend runs one backend call under a permit.
func (j *Reader) backend(ctx context.Context, f func() error) error {
	return j.permits.Do(ctx, f)
}

// changed returns the channel that will signal a commit selected by f, or
// nil when the store cannot signal and queries must poll. Callers take it
// before they read, so a commit between the read and the wait still wakes
// them.
func (j *Reader) changed(f eventstore.Filter) <-chan struct{} {
	if j.changes == nil {
		return nil
	}
	return j.changes.Changed(f)
}

// wait blocks a live query that has caught up until changed is signalled
// or, without a signal, for one refresh interval.
func (j *Reader) wait(ctx context.Context, changed <-chan struct{}) error {
	var tick <-chan time.Time
	if changed == nil {
		t := time.NewTimer(j.opts.RefreshInterval)
		defer t.Stop()
		tick = t.C
	}
	select {
	case <-changed:
		return nil
	case <-tick:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-j.done:
		return ErrClosed
	}
}
