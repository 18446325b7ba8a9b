package priority

import (
	"context"
	"slices"
	"testing"
	"time"
)

// Tests here change the process's foreground count, so none runs in
// parallel with another.

func TestYieldWithoutForegroundReturnsAtOnce(t *testing.T) {
	var y Yielder
	for range 1000 {
		y.Yield()
	}
	if y.Waited() != 0 {
		t.Fatalf("waited %v with no foreground work", y.Waited())
	}
}

// While foreground work runs, a Yield waits MaxWait, and the next one
// returns at once until the caller has worked half as long.
func TestYieldWaitsThenWorks(t *testing.T) {
	Begin()
	defer End()
	var y Yielder
	start := time.Now()
	y.Yield()
	if el := time.Since(start); el < MaxWait || y.Waited() < MaxWait {
		t.Fatalf("first Yield took %v (waited %v), want at least %v", el, y.Waited(), MaxWait)
	}
	waited := y.Waited()
	y.Yield()
	if y.Waited() != waited {
		t.Fatalf("a Yield right after a wait waited again (%v, then %v)", waited, y.Waited())
	}
	time.Sleep(waited/2 + time.Millisecond) // the caller's work
	y.Yield()
	if y.Waited() == waited {
		t.Fatal("a Yield after the caller worked half its wait did not wait")
	}
}

// The wait ends when the foreground work does. A loaded machine may
// run the ending goroutine late (CI, with other packages' tests on both
// cores, once did so in five tries in a row), so up to fifty tries are
// allowed: a Yield that ignored the end would wait MaxWait in every one.
func TestYieldEndsWithForeground(t *testing.T) {
	var waits []time.Duration
	for range 50 {
		Begin()
		ended := make(chan struct{})
		go func() {
			time.Sleep(200 * time.Microsecond)
			End()
			close(ended)
		}()
		var y Yielder
		y.Yield()
		<-ended
		if running.Load() != 0 {
			t.Fatal("Running after End")
		}
		if y.Waited() > 0 && y.Waited() < MaxWait {
			return
		}
		waits = append(waits, y.Waited())
	}
	t.Fatalf("%d waits, from %v to %v: none ended with the foreground work", len(waits), slices.Min(waits), slices.Max(waits))
}

// Foreground work that never ends takes at most two thirds of a
// Yielder's time: throughput work slows down, never stops.
func TestYieldBound(t *testing.T) {
	Begin()
	defer End()
	var y Yielder
	worked := time.Duration(0)
	start := time.Now()
	for time.Since(start) < 60*time.Millisecond {
		y.Yield()
		t0 := time.Now()
		for time.Since(t0) < 100*time.Microsecond { // a slice of work
		}
		worked += time.Since(t0)
	}
	el := time.Since(start)
	if y.Waited() == 0 || y.Waited() > el*2/3+MaxWait {
		t.Fatalf("waited %v of %v", y.Waited(), el)
	}
	if worked < el/4 {
		t.Fatalf("worked %v of %v", worked, el)
	}
}

// Only a context from Throughput or WithYielder yields.
func TestYieldFor(t *testing.T) {
	Begin()
	defer End()
	start := time.Now()
	YieldFor(context.Background())
	if el := time.Since(start); el >= MaxWait {
		t.Fatalf("a plain context yielded for %v", el)
	}
	var y Yielder
	YieldFor(WithYielder(context.Background(), &y))
	if y.Waited() < MaxWait {
		t.Fatalf("a throughput context waited %v, want %v", y.Waited(), MaxWait)
	}
	start = time.Now()
	YieldFor(Throughput(context.Background()))
	if el := time.Since(start); el < MaxWait {
		t.Fatalf("Throughput's own Yielder waited %v, want %v", el, MaxWait)
	}
}
