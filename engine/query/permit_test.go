package query

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor polls cond until it holds or the test's patience runs out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPermitterFIFO(t *testing.T) {
	p := NewPermitter(1)
	ctx := context.Background()
	if err := p.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 20
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Acquire(ctx); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			p.Release()
		}()
		// The next waiter starts only once this one is in the queue.
		waitFor(t, "waiter to queue", func() bool { return p.Stats().Waiting == i+1 })
	}
	p.Release()
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("grant order %v, want 0..%d", order, n-1)
		}
	}
	if st := p.Stats(); st.InUse != 0 || st.Waiting != 0 || st.Peak != 1 || st.Granted != n+1 {
		t.Fatalf("stats after all released: %+v", st)
	}
}

func TestPermitterNewcomerDoesNotJumpQueue(t *testing.T) {
	p := NewPermitter(1)
	ctx := context.Background()
	if err := p.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	granted := make(chan struct{})
	go func() {
		if err := p.Acquire(ctx); err == nil {
			close(granted)
		}
	}()
	waitFor(t, "waiter to queue", func() bool { return p.Stats().Waiting == 1 })
	p.Release() // handed to the waiter, not left for grabs
	<-granted
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := p.Acquire(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("newcomer got a permit held by the waiter: %v", err)
	}
	p.Release()
}

// TestPermitterReturnsPermit checks that a permit comes back after
// success, failure, a panic, and cancellation while waiting.
func TestPermitterReturnsPermit(t *testing.T) {
	ctx := context.Background()
	p := NewPermitter(2)
	check := func(what string) {
		t.Helper()
		if st := p.Stats(); st.InUse != 0 || st.Waiting != 0 {
			t.Fatalf("after %s: %+v", what, st)
		}
	}

	if err := p.Do(ctx, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	check("success")

	boom := errors.New("backend down")
	if err := p.Do(ctx, func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Do returned %v, want %v", err, boom)
	}
	check("failure")

	func() {
		defer func() { _ = recover() }()
		_ = p.Do(ctx, func() error { panic("backend panicked") })
	}()
	check("panic")

	// Cancellation while queued: fill both permits, queue a third.
	if err := p.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error)
	go func() { errc <- p.Do(cctx, func() error { t.Error("ran without a permit"); return nil }) }()
	waitFor(t, "waiter to queue", func() bool { return p.Stats().Waiting == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Do returned %v", err)
	}
	if st := p.Stats(); st.Waiting != 0 || st.InUse != 2 {
		t.Fatalf("after cancelled wait: %+v", st)
	}
	p.Release()
	p.Release()
	check("cancellation")

	// Already cancelled: no permit taken, even when one is free.
	p2 := NewPermitter(1)
	_ = p2.Acquire(ctx)
	if err := p2.Acquire(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled ctx: %v", err)
	}
	p2.Release()
	if st := p2.Stats(); st.InUse != 0 || st.Waiting != 0 {
		t.Fatalf("p2: %+v", st)
	}
}

// TestPermitterCancelRacesGrant cancels waiters just as permits are handed
// to them: whichever wins, no permit may be lost or duplicated.
func TestPermitterCancelRacesGrant(t *testing.T) {
	p := NewPermitter(3)
	var held atomic.Int64
	var wg sync.WaitGroup
	for i := range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%7)*50*time.Microsecond)
			defer cancel()
			err := p.Do(ctx, func() error {
				if n := held.Add(1); n > 3 {
					t.Errorf("%d permits held, limit 3", n)
				}
				time.Sleep(20 * time.Microsecond)
				held.Add(-1)
				return nil
			})
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if st := p.Stats(); st.InUse != 0 || st.Waiting != 0 || st.Peak > 3 {
		t.Fatalf("after the race: %+v", st)
	}
	// All three permits are still there.
	for range 3 {
		if err := p.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if st := p.Stats(); st.InUse != 3 {
		t.Fatalf("%+v", st)
	}
}

func TestPermitterPeakUnderLoad(t *testing.T) {
	const limit = 7
	p := NewPermitter(limit)
	var held, seen atomic.Int64
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				_ = p.Do(context.Background(), func() error {
					n := held.Add(1)
					for {
						m := seen.Load()
						if n <= m || seen.CompareAndSwap(m, n) {
							break
						}
					}
					time.Sleep(10 * time.Microsecond)
					held.Add(-1)
					return nil
				})
			}
		}()
	}
	wg.Wait()
	st := p.Stats()
	if seen.Load() > limit || st.Peak > limit || st.Peak < 1 {
		t.Fatalf("observed %d concurrent, stats %+v, limit %d", seen.Load(), st, limit)
	}
	if st.Granted != 200*20 || st.InUse != 0 || st.Waiting != 0 {
		t.Fatalf("%+v", st)
	}
}

func TestPermitterReleaseWithoutPermitPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Release without a permit did not panic")
		}
	}()
	NewPermitter(1).Release()
}

// TestPermitterWorkers checks that calls run on at most Max worker
// goroutines, that a panic reaches the caller, and that after Close calls
// still run, on the caller's goroutine.
func TestPermitterWorkers(t *testing.T) {
	p := NewPermitter(3)
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if err := p.Do(context.Background(), func() error { time.Sleep(10 * time.Microsecond); return nil }); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	p.mu.Lock()
	workers := p.workers
	p.mu.Unlock()
	if workers < 1 || workers > 3 {
		t.Fatalf("%d workers, limit 3", workers)
	}
	func() {
		defer func() {
			if v := recover(); v == nil {
				t.Fatal("panic not raised in the caller")
			}
		}()
		_ = p.Do(context.Background(), func() error { panic("boom") })
	}()
	p.Close()
	boom := errors.New("after close")
	if err := p.Do(context.Background(), func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Do after Close: %v", err)
	}
	if st := p.Stats(); st.InUse != 0 || st.Waiting != 0 {
		t.Fatalf("%+v", st)
	}
}
