package query

import (
	"container/list"
	"context"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Permitter grants permits to run backend queries: at most Max at a time,
// to waiters in the order they asked. It is the token bucket of Akka.NET's
// QueryThrottler (described in "Scaling Akka.Persistence.Query to 100k+
// Concurrent Queries for Large-Scale CQRS", Akka.NET blog, 2023): a query
// holds a permit only for the duration of one backend call, so a hundred
// thousand live queries share a handful of database connections fairly,
// and a query that waited longest goes first.
//
// Its own queue, rather than golang.org/x/sync/semaphore (also FIFO), is
// what lets the waiter count be exact: a waiter is counted in the same
// critical section that queues it, so the gauge and the tests see the true
// queue, not one that is about to be.
//
// Do runs the call on one of at most Max worker goroutines rather than the
// caller's. A backend call is deep (Pebble's iterators, a SQL driver), and
// a goroutine's stack keeps the size of its deepest call until the garbage
// collector shrinks it, so with a hundred thousand consumers each making
// its own calls, the stacks alone dominated the crush test's memory
// (docs/benchmarks.md, "Figures behind choices in the code"); on Max
// workers the deep stacks are Max, and the consumers' stay small.
type Permitter struct {
	mu      sync.Mutex
	max     int
	inUse   int
	queue   list.List // of chan struct{}; closed when the permit is handed over
	peak    int
	granted uint64
	metrics *permitMetrics // nil: none

	workers int       // started, at most max; guarded by mu
	jobs    chan *job // to an idle worker
	quit    chan struct{}
	closed  sync.Once
}

// job is one call handed to a worker.
type job struct {
	f        func() error
	err      error
	panicked any // what f panicked with, with its stack
	done     chan struct{}
}

// permitMetrics mirror the counts. They are plain gauges, moved in the
// same critical sections as the counts, so that readers sharing a
// registry share (and sum into) one set of metrics.
type permitMetrics struct {
	waiters, inUse, permits prometheus.Gauge
	queries                 prometheus.Counter
}

// PermitterStats is a snapshot of a Permitter.
type PermitterStats struct {
	Max     int    // permits in all
	InUse   int    // permits held now
	Waiting int    // callers queued for a permit now
	Peak    int    // the most permits ever held at once
	Granted uint64 // permits granted since creation: the backend queries run
}

// NewPermitter returns a Permitter with n permits (at least 1).
func NewPermitter(n int) *Permitter {
	return &Permitter{max: max(1, n), jobs: make(chan *job), quit: make(chan struct{})}
}

// Acquire waits for a permit, in FIFO order, until ctx ends. On success the
// caller must Release the permit exactly once; on error it holds none.
func (p *Permitter) Acquire(ctx context.Context) error {
	p.mu.Lock()
	if p.inUse < p.max && p.queue.Len() == 0 {
		p.grantLocked()
		p.inUse++
		p.peak = max(p.peak, p.inUse)
		if p.metrics != nil {
			p.metrics.inUse.Inc()
		}
		p.mu.Unlock()
		return nil
	}
	if err := ctx.Err(); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("query: waiting for a permit: %w", err)
	}
	ready := make(chan struct{})
	elem := p.queue.PushBack(ready)
	if p.metrics != nil {
		p.metrics.waiters.Inc()
	}
	p.mu.Unlock()

	select {
	case <-ready:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	select {
	case <-ready:
		// Release handed the permit over just as ctx ended. The caller is
		// giving up, so pass it on rather than leak it.
		p.mu.Unlock()
		p.Release()
	default:
		p.queue.Remove(elem)
		if p.metrics != nil {
			p.metrics.waiters.Dec()
		}
		p.mu.Unlock()
	}
	return fmt.Errorf("query: waiting for a permit: %w", ctx.Err())
}

// Release returns a permit. The first waiter, if any, gets it directly, so
// a newcomer calling Acquire at the same moment cannot jump the queue.
func (p *Permitter) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inUse <= 0 {
		panic("query: Permitter.Release without a permit held")
	}
	if front := p.queue.Front(); front != nil {
		p.queue.Remove(front)
		if p.metrics != nil {
			p.metrics.waiters.Dec()
		}
		p.grantLocked()
		close(front.Value.(chan struct{}))
		return // the permit changes hands: inUse stays
	}
	p.inUse--
	if p.metrics != nil {
		p.metrics.inUse.Dec()
	}
}

func (p *Permitter) grantLocked() {
	p.granted++
	if p.metrics != nil {
		p.metrics.queries.Inc()
	}
}

// observe starts mirroring the counts into m.
func (p *Permitter) observe(m *permitMetrics) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m.permits.Add(float64(p.max))
	m.waiters.Add(float64(p.queue.Len()))
	m.inUse.Add(float64(p.inUse))
	p.metrics = m
}

// Do runs f holding a permit, on one of the permitter's worker goroutines,
// and returns what f returns. The permit comes back however f ends: with a
// result, an error, or a panic, which Do raises again in the caller.
func (p *Permitter) Do(ctx context.Context, f func() error) error {
	if err := p.Acquire(ctx); err != nil {
		return err
	}
	defer p.Release()
	return p.run(f)
}

func (p *Permitter) run(f func() error) error {
	j := &job{f: f, done: make(chan struct{})}
	select {
	case p.jobs <- j:
	default:
		p.mu.Lock()
		start := p.workers < p.max
		if start {
			p.workers++
		}
		p.mu.Unlock()
		if start {
			go p.work(j)
			break
		}
		// All Max workers exist and this caller holds one of the Max
		// permits, so at most Max-1 workers are busy: one is idle, or
		// about to be.
		select {
		case p.jobs <- j:
		case <-p.quit:
			j.run() // closed: run it here
		}
	}
	<-j.done
	if j.panicked != nil {
		panic(j.panicked)
	}
	return j.err
}

func (p *Permitter) work(j *job) {
	for {
		j.run()
		select {
		case j = <-p.jobs:
		case <-p.quit:
			return
		}
	}
}

func (j *job) run() {
	defer close(j.done)
	defer func() {
		if v := recover(); v != nil {
			j.panicked = fmt.Sprintf("%v\n\nbackend call panicked on a query worker:\n%s", v, debug.Stack())
		}
	}()
	j.err = j.f()
}

// Close stops the idle worker goroutines. Calls still made after it run
// on their callers' goroutines.
func (p *Permitter) Close() {
	p.closed.Do(func() { close(p.quit) })
}

// Stats returns the current counts.
func (p *Permitter) Stats() PermitterStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PermitterStats{
		Max:     p.max,
		InUse:   p.inUse,
		Waiting: p.queue.Len(),
		Peak:    p.peak,
		Granted: p.granted,
	}
}
