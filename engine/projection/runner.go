package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/eventstore"
)

// ErrStopped is returned by WaitFor once the runner that was to apply the
// position has stopped; when Run failed, its error is wrapped as well.
var ErrStopped = errors.New("projection: runner stopped")

// ErrPanic is a view's Apply that panicked: the runner stops with an
// error naming the positions, and the process goes on.
var ErrPanic = errors.New("projection: apply panicked")

// Options configure a Runner or a Live view.
type Options struct {
	// Name identifies the view in errors, logs and metrics. Views reporting
	// to one Registerer need distinct names: replicas of one view are
	// "orders-1", "orders-2".
	Name string
	// Filter selects what the view sees: eventstore.All() (the zero value)
	// or eventstore.Tagged(tag). Stream filters are refused: a checkpoint
	// is a global position.
	Filter eventstore.Filter
	// MaxBatch caps the events per Apply (default 1024). While catching
	// up on FilterAll, the runner gathers pages up to it, so that a view
	// that commits per batch commits less often.
	MaxBatch int
	// Registerer receives the lag metrics; nil records none.
	Registerer prometheus.Registerer
	// Logger receives background failures: a Live view's, and the read
	// failures a Runner retries (default
	// slog.Default()).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = "view"
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 1024
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Runner keeps one view up to date from a store: it resumes after the
// view's checkpoint, catches up, then follows the log live. A Runner runs
// once; to restart a view, make a new Runner for it.
type Runner struct {
	store eventstore.Store
	view  View
	opts  Options

	// applied is the position of the last event the view holds: its
	// checkpoint at start, then the end of each batch applied.
	applied atomic.Uint64
	loaded  atomic.Bool // applied holds the checkpoint

	mu      sync.Mutex
	wake    chan struct{} // closed on progress; made on demand by waiters
	started bool
	stopped bool
	err     error // what Run returned
}

// NewRunner returns a runner of view over store; Run starts it.
func NewRunner(store eventstore.Store, view View, opts Options) *Runner {
	return &Runner{store: store, view: view, opts: opts.withDefaults()}
}

// Run applies events to the view until ctx ends (it then returns nil) or
// something fails: reading the checkpoint, the subscription, or Apply.
// Stop it before closing the store.
func (r *Runner) Run(ctx context.Context) (err error) {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return fmt.Errorf("projection %s: runner already started", r.opts.Name)
	}
	r.started = true
	r.mu.Unlock()
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = nil // asked to stop; what was interrupted does not matter
		}
		r.mu.Lock()
		r.stopped, r.err = true, err
		r.signalLocked()
		r.mu.Unlock()
	}()

	if k := r.opts.Filter.Kind; k != eventstore.FilterAll && k != eventstore.FilterTag {
		return fmt.Errorf("projection %s: filter %s: a view follows all events or a tag", r.opts.Name, r.opts.Filter)
	}
	if r.opts.Registerer != nil {
		unreport, err := report(r.opts.Registerer, r.opts.Name, runnerLag(r))
		if err != nil {
			return fmt.Errorf("projection %s: %w", r.opts.Name, err)
		}
		defer unreport()
	}
	cp, err := r.view.Checkpoint(ctx)
	if err != nil {
		return fmt.Errorf("projection %s: reading the checkpoint: %w", r.opts.Name, err)
	}
	r.applied.Store(cp)
	r.loaded.Store(true) // before the wake-up: a tag waiter needs it
	r.advance(cp)
	// Reading can fail for a while — a shared store's database restarts,
	// a network breaks — and a view that stopped for good would serve a
	// stale schedule until someone rebuilt it. So a failed read is tried
	// again, from the last applied position, with a growing pause; only a
	// closed store or a failed Apply (the view's own fault) ends the run.
	backoff := 50 * time.Millisecond
	for {
		applied, err := r.follow(ctx)
		if err == nil || ctx.Err() != nil || errors.Is(err, eventstore.ErrClosed) || errors.Is(err, errApply) {
			return err
		}
		if applied {
			backoff = 50 * time.Millisecond
		}
		r.opts.Logger.Warn("projection: reading the store failed; retrying", "view", r.opts.Name, "after", r.applied.Load(), "in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// errApply marks a failure of the view's own Apply, which a retry would
// only repeat.
var errApply = errors.New("projection: apply failed")

// follow subscribes after the last applied position and applies what it
// reads until an error; applied tells whether it got anywhere.
func (r *Runner) follow(ctx context.Context) (applied bool, err error) {
	from := r.applied.Load() + 1
	sub, err := r.store.Subscribe(ctx, r.opts.Filter, from)
	if err != nil {
		return false, fmt.Errorf("projection %s: subscribe from %d: %w", r.opts.Name, from, err)
	}
	defer sub.Close()
	// The next batch is read while the view applies this one: on a
	// catch-up both take a core, and reading is a third of the work.
	// One batch waits at most, so the memory held stays bounded.
	type read struct {
		batch []eventstore.Event
		err   error
	}
	reads := make(chan read, 1)
	// The batches' slices go back to the reader once applied (Apply may
	// keep the events, not the slice): a catch-up gathering 65,536 events
	// per batch otherwise grew a new slice by doubling for each, which
	// was the largest share of what the windows benchmark allocated, and
	// the collections it caused stalled queries beside the runner. Three
	// slices: one applied, one waiting, one being read.
	free := make(chan []eventstore.Event, 3)
	readCtx, stopReading := context.WithCancel(ctx)
	var reader sync.WaitGroup
	defer func() {
		stopReading()
		reader.Wait()
	}()
	reader.Go(func() {
		for {
			var buf []eventstore.Event
			select {
			case buf = <-free:
			default:
			}
			batch, err := r.next(readCtx, sub, buf)
			select {
			case reads <- read{batch, err}:
			case <-readCtx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	})
	for {
		var rd read
		select {
		case rd = <-reads:
		case <-ctx.Done():
			return applied, fmt.Errorf("projection %s: reading after %d: %w", r.opts.Name, r.applied.Load(), ctx.Err())
		}
		if rd.err != nil {
			return applied, fmt.Errorf("projection %s: reading after %d: %w", r.opts.Name, r.applied.Load(), rd.err)
		}
		batch := rd.batch
		for len(batch) > 0 {
			n := min(len(batch), r.opts.MaxBatch)
			if err := r.apply(ctx, batch[:n]); err != nil {
				return applied, fmt.Errorf("%w: %w", errApply, err)
			}
			applied = true
			batch = batch[n:]
		}
		// Cleared, so that the slice does not keep applied events alive.
		clear(rd.batch)
		select {
		case free <- rd.batch[:0]:
		default:
		}
	}
}

// next waits for events, then gathers what is already readable up to
// MaxBatch, into buf (a slice of an applied batch, or nil). Only
// FilterAll knows without a read that more is there: an end below the
// head means more to come, unless the events in between were removed.
func (r *Runner) next(ctx context.Context, sub eventstore.Subscription, buf []eventstore.Event) ([]eventstore.Event, error) {
	page, err := sub.Next(ctx)
	if err != nil || r.opts.Filter.Kind != eventstore.FilterAll {
		return page, err
	}
	if buf == nil {
		// Room for a whole batch at once, not grown by doubling.
		buf = make([]eventstore.Event, 0, max(r.opts.MaxBatch, len(page)))
	}
	batch := append(buf[:0], page...)
	for len(batch) < r.opts.MaxBatch {
		head, err := r.store.Head(ctx)
		if err != nil {
			return nil, err
		}
		if batch[len(batch)-1].Position >= head {
			break
		}
		// The head says more is there — unless the events up to it were
		// removed (eventstore.Deleter): the wait is cut short then.
		nctx, cancel := context.WithTimeout(ctx, holeCheck)
		more, err := sub.Next(nctx)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			return nil, err
		}
		batch = append(batch, more...)
	}
	return batch, nil
}

func (r *Runner) apply(ctx context.Context, batch []eventstore.Event) error {
	first, last := batch[0].Position, batch[len(batch)-1].Position
	// Cheap insurance for exactly-once: a backend that re-delivered
	// would otherwise double-apply silently.
	if prev := r.applied.Load(); first <= prev {
		return fmt.Errorf("projection %s: store delivered position %d after %d", r.opts.Name, first, prev)
	}
	if err := applySafely(ctx, r.view, batch); err != nil {
		if errors.Is(err, ErrPanic) {
			r.opts.Logger.Error("projection: apply panicked; the view stops", "view", r.opts.Name, "first", first, "last", last, "err", err)
		}
		return fmt.Errorf("projection %s: applying positions %d..%d: %w", r.opts.Name, first, last, err)
	}
	r.advance(last)
	return nil
}

// applySafely applies a batch, turning a panic into ErrPanic: a stored
// event a view cannot take stops that view, not every process that
// replays the log.
func applySafely(ctx context.Context, v View, batch []eventstore.Event) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrPanic, p)
		}
	}()
	return v.Apply(ctx, batch)
}

func (r *Runner) advance(pos uint64) {
	r.applied.Store(pos)
	r.mu.Lock()
	r.signalLocked()
	r.mu.Unlock()
}

func (r *Runner) signalLocked() {
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
}

// Position returns the position of the last event the view has applied
// (its checkpoint until the first batch).
func (r *Runner) Position() uint64 { return r.applied.Load() }

// Err returns the error Run returned, nil while it runs or if it was
// stopped through its context.
func (r *Runner) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// WaitFor blocks until the view reflects the log up to position pos: it
// has applied pos, or (with a tag filter) everything up to pos it sees.
// This is read-your-writes: wait for an append's LastPosition, then query.
func (r *Runner) WaitFor(ctx context.Context, pos uint64) error {
	return r.wait(ctx, pos, nil)
}

// WaitCaughtUp blocks until the view reflects the log up to its head as of
// the call.
func (r *Runner) WaitCaughtUp(ctx context.Context) error {
	head, err := r.store.Head(ctx)
	if err != nil {
		return fmt.Errorf("projection %s: %w", r.opts.Name, err)
	}
	return r.WaitFor(ctx, head)
}

// errAborted ends a wait whose abort channel closed.
var errAborted = errors.New("projection: wait aborted")

func (r *Runner) wait(ctx context.Context, pos uint64, abort <-chan struct{}) error {
	if pos == 0 || r.applied.Load() >= pos {
		return nil
	}
	if r.opts.Filter.Kind != eventstore.FilterAll {
		// The event at pos may be one the view never sees, so nothing
		// the runner does would wake us when it commits: wait for the log
		// to reach pos first. From then on, every event the view still
		// lacks up to pos is in the log, and applying it wakes us.
		if err := waitHead(ctx, r.store, pos, abort); err != nil {
			return err
		}
	}
	for {
		r.mu.Lock()
		if r.wake == nil {
			r.wake = make(chan struct{})
		}
		wake, stopped, runErr := r.wake, r.stopped, r.err
		r.mu.Unlock()
		ok, err := r.reached(ctx, pos)
		if err != nil {
			return fmt.Errorf("projection %s: %w", r.opts.Name, err)
		}
		if ok {
			return nil
		}
		if stopped {
			if runErr != nil {
				return fmt.Errorf("%w: %w", ErrStopped, runErr)
			}
			return fmt.Errorf("%w: %s at %d, waiting for %d", ErrStopped, r.opts.Name, r.applied.Load(), pos)
		}
		// A waiter on the whole log also looks, now and then, whether the
		// events it waits for were removed (eventstore.Deleter): nothing
		// would then be applied to wake it.
		hole := time.NewTimer(holeCheck)
		select {
		case <-wake:
		case <-abort:
			hole.Stop()
			return errAborted
		case <-ctx.Done():
			hole.Stop()
			return ctx.Err()
		case <-hole.C:
			if r.opts.Filter.Kind == eventstore.FilterAll && r.loaded.Load() {
				ok, err := r.removedUpTo(ctx, pos)
				if err != nil {
					return fmt.Errorf("projection %s: %w", r.opts.Name, err)
				}
				if ok {
					return nil
				}
			}
		}
		hole.Stop()
	}
}

// holeCheck is how long a waiter waits before it looks for a hole.
const holeCheck = 100 * time.Millisecond

// removedUpTo reports whether the log has reached pos and holds no event
// between what the view applied and pos: they were removed, and the view
// reflects the log up to pos.
func (r *Runner) removedUpTo(ctx context.Context, pos uint64) (bool, error) {
	applied := r.applied.Load()
	if applied >= pos {
		return true, nil
	}
	head, err := r.store.Head(ctx)
	if err != nil || head < pos {
		return false, err
	}
	next, err := r.store.ReadAll(ctx, applied+1, 1)
	if err != nil {
		return false, err
	}
	return len(next) == 0 || next[0].Position > pos, nil
}

// reached reports whether the view reflects the log up to pos. Beyond
// applied >= pos, a tag view has also reached pos when the log holds no
// event with the tag between what it applied and pos.
func (r *Runner) reached(ctx context.Context, pos uint64) (bool, error) {
	applied := r.applied.Load()
	if applied >= pos {
		return true, nil
	}
	if r.opts.Filter.Kind == eventstore.FilterAll || !r.loaded.Load() {
		return false, nil
	}
	next, err := r.store.ReadTag(ctx, r.opts.Filter.Tag, applied+1, 1)
	if err != nil {
		return false, err
	}
	// The caller made sure the log has reached pos, so an empty read means
	// nothing with the tag lies between applied and pos.
	return len(next) == 0 || next[0].Position > pos, nil
}

// waitHead blocks until the log's head is at least pos.
func waitHead(ctx context.Context, store eventstore.Store, pos uint64, abort <-chan struct{}) error {
	head, err := store.Head(ctx)
	if err != nil || head >= pos {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if abort != nil {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			select {
			case <-abort:
				cancel()
			case <-stop:
			}
		}()
	}
	sub, err := store.Subscribe(ctx, eventstore.All(), pos)
	if err != nil {
		return err
	}
	defer sub.Close()
	if _, err := sub.Next(ctx); err != nil {
		select {
		case <-abort:
			return errAborted
		default:
			return err
		}
	}
	return nil
}

// Lag is how far a view is behind the log.
type Lag struct {
	// Events is the number of positions between the view and the log's
	// head; 0 when the view reflects the head (a tag view may be at an
	// earlier position with nothing it sees after it).
	Events uint64
	// Age is how long ago the oldest event the view lacks was committed;
	// 0 when it lacks none.
	Age time.Duration
}

// Lag measures the view against the log's head now.
func (r *Runner) Lag(ctx context.Context) (Lag, error) {
	applied := r.applied.Load()
	head, err := r.store.Head(ctx)
	if err != nil || applied >= head {
		return Lag{}, err
	}
	var next []eventstore.Event
	if r.opts.Filter.Kind == eventstore.FilterTag {
		next, err = r.store.ReadTag(ctx, r.opts.Filter.Tag, applied+1, 1)
	} else {
		next, err = r.store.ReadAll(ctx, applied+1, 1)
	}
	if err != nil {
		return Lag{}, err
	}
	if len(next) == 0 || next[0].Position > head {
		return Lag{}, nil // nothing the view sees up to the head
	}
	return Lag{Events: head - applied, Age: max(0, time.Since(next[0].Time))}, nil
}
