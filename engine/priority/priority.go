// Package priority lets latency-sensitive work go ahead of throughput
// work in a process whose processors are all busy.
//
// Go's scheduler has no priorities. A goroutine that is preempted, or
// woken while every processor is running, waits in the global run queue,
// and a processor looks there only when its own queue is empty or once
// in 61 turns. Throughput work made of goroutines that hand batches to
// each other (an ingest: the appender, the store's sequencer, a
// projection's writer) keeps the local queues full, so on two cores a
// pull query of under a millisecond beside a live ingest waited 15–40 ms
// to run again (docs/ARCHITECTURE.md, "Queries first").
//
// So latency-sensitive work says when it runs (Begin, End), and
// throughput work calls its Yielder's Yield between slices of its work:
// while foreground work runs, Yield parks the caller, which leaves the
// processors to the foreground work. A Yielder waits at most MaxWait at
// a time and then works at least half as long as it waited, so
// foreground work that never pauses slows throughput work down, to a
// third of its time at least, but never stops it.
//
// Work that is not in a goroutine of its own (an append) is marked as
// throughput work by its context (Throughput); the code that does it
// calls YieldFor.
package priority

import (
	"context"
	"sync/atomic"
	"time"
)

// running counts the foreground work running in the process.
var running atomic.Int32

// Begin marks the start of foreground work. Every Begin needs its End.
func Begin() { running.Add(1) }

// End marks the end of foreground work begun with Begin.
func End() { running.Add(-1) }

const (
	// MaxWait bounds one wait of a Yielder.
	MaxWait = 2 * time.Millisecond
	// poll is how often a waiting Yielder looks whether the foreground
	// work ended. It polls rather than being woken: the goroutine that
	// woke it would often be the one preempted for it, inside the
	// foreground work's time.
	poll = 50 * time.Microsecond
)

// A Yielder is the yielding state of one strand of throughput work. It
// is meant for one goroutine at a time, but is safe for concurrent use:
// a context from Throughput may reach several goroutines, and then they
// share its bound. The zero value is ready to use.
type Yielder struct {
	workUntil atomic.Int64 // on the process's clock (since): no wait before it
	waited    atomic.Int64 // nanoseconds spent waiting in all
}

// epoch starts the process's clock for Yielders: time.Since is
// monotonic, a wall-clock reading is not.
var epoch = time.Now()

func since() time.Duration { return time.Since(epoch) }

// Yield waits while foreground work runs, for at most MaxWait. After a
// wait it returns at once until the caller has worked half as long as
// it waited.
//
// A waiting goroutine sleeps poll at a time; on an idle processor Go's
// scheduler may wake it up to about a millisecond late, which only
// lengthens the wait of throughput work, never foreground work's.
func (y *Yielder) Yield() {
	if running.Load() == 0 {
		return
	}
	now := since()
	if now < time.Duration(y.workUntil.Load()) {
		return
	}
	deadline := now + MaxWait
	for running.Load() > 0 && since() < deadline {
		time.Sleep(poll)
	}
	end := since()
	waited := end - now
	y.workUntil.Store(int64(end + waited/2))
	y.waited.Add(int64(waited))
}

// Waited is the time y has spent waiting in all.
func (y *Yielder) Waited() time.Duration { return time.Duration(y.waited.Load()) }

type yielderKey struct{}

// Throughput returns a context that marks the work done with it as
// throughput work, with a Yielder of its own: the code that takes it
// (the embedded store's Append) yields to foreground work.
func Throughput(ctx context.Context) context.Context {
	return WithYielder(ctx, new(Yielder))
}

// WithYielder is Throughput with the caller's Yielder, whose Waited
// then tells how long the work yielded.
func WithYielder(ctx context.Context, y *Yielder) context.Context {
	return context.WithValue(ctx, yielderKey{}, y)
}

// YieldFor yields with the Yielder ctx carries (Throughput) and does
// nothing for any other context.
func YieldFor(ctx context.Context) {
	if ctx == nil || running.Load() == 0 {
		return
	}
	if y, ok := ctx.Value(yielderKey{}).(*Yielder); ok {
		y.Yield()
	}
}
