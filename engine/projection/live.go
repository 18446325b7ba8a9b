package projection

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/eventstore"
)

// Live serves one instance of a view while a runner keeps it current, and
// rebuilds the view from scratch on demand: a new instance catches up in
// the background while queries keep going to the old one, and takes over
// only once it has everything the old one had.
//
// Readers never go back in the log: after WaitFor(p) returns, every
// instance Read or Current hands out reflects at least p.
type Live[V View] struct {
	store eventstore.Store
	build func(context.Context) (V, error)
	opts  Options
	reg   prometheus.Registerer // the caller's; the runners get none

	ctx    context.Context // ends at Close; the runners run under it
	cancel context.CancelFunc
	closed atomic.Bool

	cur       atomic.Pointer[instance[V]]
	rebuildMu sync.Mutex // one Rebuild at a time; Close waits for it
	unreport  func()
}

// instance is one view with the runner that feeds it.
type instance[V View] struct {
	view   V
	runner *Runner
	cancel context.CancelFunc
	done   chan struct{} // closed when the runner has returned

	// frozen is set when Rebuild stops the runner on purpose: waiters then
	// wait for the swap instead of failing.
	frozen atomic.Bool
	// swapped is closed once the instance is no longer current.
	swapped chan struct{}

	mu      sync.Mutex // guards the readers' count
	readers int
	retired bool
	drained chan struct{} // closed when retired with no readers left
}

// StartLive builds the first instance of a view with build and starts
// following the log into it, in the background, until Close; ctx bounds
// the build only. WaitCaughtUp tells when the view has caught up.
//
// Rebuild calls build again, and rebuilding from scratch takes an empty
// instance: a new Memory, or a PebbleView in a new directory (the first
// call may reopen the directory the last run left, to resume there).
// Instances that are io.Closers are closed when retired. Close the Live
// before the store.
func StartLive[V View](ctx context.Context, store eventstore.Store, build func(context.Context) (V, error), opts Options) (*Live[V], error) {
	opts = opts.withDefaults()
	v, err := build(ctx)
	if err != nil {
		return nil, fmt.Errorf("projection %s: build: %w", opts.Name, err)
	}
	l := &Live[V]{store: store, build: build, opts: opts, reg: opts.Registerer}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	// The runners themselves do not report: the name stays with whichever
	// instance is current, across swaps.
	l.opts.Registerer = nil
	l.unreport = func() {}
	l.cur.Store(l.start(v))
	if opts.Registerer != nil {
		l.unreport, err = report(opts.Registerer, opts.Name, func(ctx context.Context) (Lag, uint64, error) {
			r := l.cur.Load().runner
			lag, err := r.Lag(ctx)
			return lag, r.Position(), err
		})
		if err != nil {
			l.cancel()
			l.cur.Load().stop()
			_ = closeView(v)
			return nil, fmt.Errorf("projection %s: %w", opts.Name, err)
		}
	}
	return l, nil
}

// start runs a runner into v in the background.
func (l *Live[V]) start(v V) *instance[V] {
	ctx, cancel := context.WithCancel(l.ctx)
	inst := &instance[V]{
		view:    v,
		runner:  NewRunner(l.store, v, l.opts),
		cancel:  cancel,
		done:    make(chan struct{}),
		swapped: make(chan struct{}),
		drained: make(chan struct{}),
	}
	go func() {
		defer close(inst.done)
		if err := inst.runner.Run(ctx); err != nil {
			l.opts.Logger.Error("projection stopped", "view", l.opts.Name, "err", err)
		}
	}()
	return inst
}

// stop stops the instance's runner and waits for it.
func (inst *instance[V]) stop() {
	inst.cancel()
	<-inst.done
}

// acquire registers a reader, unless the instance is retired.
func (inst *instance[V]) acquire() bool {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if inst.retired {
		return false
	}
	inst.readers++
	return true
}

func (inst *instance[V]) release() {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	inst.readers--
	if inst.retired && inst.readers == 0 {
		close(inst.drained)
	}
}

// retire turns new readers away and waits for the ones inside to leave.
func (inst *instance[V]) retire() {
	inst.mu.Lock()
	inst.retired = true
	if inst.readers == 0 {
		close(inst.drained)
	}
	inst.mu.Unlock()
	<-inst.drained
}

func closeView(v any) error {
	if c, ok := v.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Current returns the instance serving queries now. It suits views with
// nothing to close (in memory); an instance that is an io.Closer may be
// closed by a rebuild while the caller still holds it, so use Read.
func (l *Live[V]) Current() V { return l.cur.Load().view }

// Read waits until the serving instance reflects the log up to atLeast
// (0: no wait), then calls fn with it. The instance is not retired while
// fn runs.
func (l *Live[V]) Read(ctx context.Context, atLeast uint64, fn func(v V) error) error {
	if err := l.WaitFor(ctx, atLeast); err != nil {
		return err
	}
	for {
		if l.closed.Load() {
			return fmt.Errorf("%w: %s is closed", ErrStopped, l.opts.Name)
		}
		inst := l.cur.Load()
		if !inst.acquire() {
			continue // retired after the swap: the next load sees its successor
		}
		defer inst.release()
		return fn(inst.view)
	}
}

// WaitFor blocks until the serving instance reflects the log up to pos
// (see Runner.WaitFor); across a rebuild, until the instance then serving
// does.
func (l *Live[V]) WaitFor(ctx context.Context, pos uint64) error {
	for {
		inst := l.cur.Load()
		err := inst.runner.wait(ctx, pos, inst.swapped)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errAborted):
			continue
		case errors.Is(err, ErrStopped) && inst.frozen.Load() && !l.closed.Load():
			select { // a rebuild is about to swap: ask its successor
			case <-inst.swapped:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		default:
			return err
		}
	}
}

// WaitCaughtUp blocks until the serving instance reflects the log up to
// its head as of the call.
func (l *Live[V]) WaitCaughtUp(ctx context.Context) error {
	head, err := l.store.Head(ctx)
	if err != nil {
		return fmt.Errorf("projection %s: %w", l.opts.Name, err)
	}
	return l.WaitFor(ctx, head)
}

// Err returns why the serving instance's runner stopped, nil while it
// runs. A view that failed stays as it was, answering queries, until it is
// rebuilt.
func (l *Live[V]) Err() error { return l.cur.Load().runner.Err() }

// Rebuild builds a fresh instance from the start of the log while the
// current one keeps serving, and swaps it in once it has caught up. It
// returns when the new instance serves, or with an error, leaving the old
// one in place. The old instance is closed (if it is an io.Closer) when
// its last reader has left.
func (l *Live[V]) Rebuild(ctx context.Context) error {
	l.rebuildMu.Lock()
	defer l.rebuildMu.Unlock()
	if l.closed.Load() {
		return fmt.Errorf("%w: %s is closed", ErrStopped, l.opts.Name)
	}
	v, err := l.build(ctx)
	if err != nil {
		return fmt.Errorf("projection %s: rebuild: build: %w", l.opts.Name, err)
	}
	next := l.start(v)
	abandon := func(err error) error {
		next.stop()
		return errors.Join(fmt.Errorf("projection %s: rebuild: %w", l.opts.Name, err), closeView(v))
	}
	if l.reg != nil {
		// The new instance's progress shows as "<name>.rebuild".
		unreport, err := report(l.reg, l.opts.Name+".rebuild", runnerLag(next.runner))
		if err != nil {
			return abandon(err)
		}
		defer unreport()
	}

	// Catch up while the old instance serves.
	if err := next.runner.WaitCaughtUp(ctx); err != nil {
		return abandon(err)
	}
	// Freeze the old instance where readers have seen it: it keeps
	// answering, and the new one only has to reach the head as of now,
	// which holds everything the old one applied. Swapping while both
	// moved could hand a reader an instance behind one it had waited on.
	old := l.cur.Load()
	old.frozen.Store(true)
	old.stop()
	err = l.waitHead(ctx, next)
	if err != nil {
		// Keep the old view, under a fresh runner.
		l.swap(old, l.start(old.view), false)
		return abandon(err)
	}
	return l.swap(old, next, true)
}

func (l *Live[V]) waitHead(ctx context.Context, inst *instance[V]) error {
	head, err := l.store.Head(ctx)
	if err != nil {
		return err
	}
	return inst.runner.WaitFor(ctx, head)
}

// swap makes next current and retires old, closing its view if asked.
func (l *Live[V]) swap(old, next *instance[V], closeOld bool) error {
	l.cur.Store(next)
	close(old.swapped)
	old.stop()
	old.retire()
	if closeOld {
		if err := closeView(old.view); err != nil {
			return fmt.Errorf("projection %s: closing the replaced view: %w", l.opts.Name, err)
		}
	}
	return nil
}

// Close stops the runner (and a rebuild in progress), waits for readers
// and closes the serving instance if it is an io.Closer.
func (l *Live[V]) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	l.cancel()
	l.rebuildMu.Lock()
	defer l.rebuildMu.Unlock()
	l.unreport()
	inst := l.cur.Load()
	inst.stop()
	inst.retire()
	return closeView(inst.view)
}
