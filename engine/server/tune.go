package server

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	runtimemetrics "runtime/metrics"
	"time"
)

// TuneGC sets the garbage collector for a server that keeps a large live
// heap (views, caches) while its requests allocate briefly, until ctx
// ends.
//
// Collecting only when the heap has grown tenfold (GOGC=1000) spends far
// less CPU rescanning the live heap than the default — under read load,
// the collector was the source of the latency tail. Tenfold of a large
// live heap is too much memory, so a memory limit makes the collector
// work harder first: 2.5 times the live heap, re-read every 2 seconds,
// at least floor (so that a small heap is rarely collected; LeanFloor or
// AllocFloor) and at most memLimitMax. docs/benchmarks.md has the
// measurements behind these figures.
//
// An operator's setting wins: with GOMEMLIMIT set, TuneGC does nothing;
// with GOGC set, it keeps that percentage but still sets the memory
// limit, so that no server runs without one.
func TuneGC(ctx context.Context, floor int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(1000)
	}
	debug.SetMemoryLimit(memLimitMax) // until the live heap is known
	go func() {
		sample := []runtimemetrics.Sample{{Name: "/gc/heap/live:bytes"}}
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			runtimemetrics.Read(sample)
			if sample[0].Value.Kind() == runtimemetrics.KindUint64 {
				debug.SetMemoryLimit(memLimit(sample[0].Value.Uint64(), floor))
			}
		}
	}()
}

// The floors of the memory limit TuneGC sets.
const (
	// LeanFloor is for a server whose live heap is its state (a
	// schedule) and whose requests allocate little beside it: 640 MiB
	// keeps flights serve under 1 GiB of RSS through five write load
	// tests on the default season (80–200 MB live), with no measurable
	// cost in commands/s. Measured on a full node (store, aggregates and
	// view in one process); a write node or a replica holds less.
	LeanFloor = 640 << 20
	// AllocFloor is for a process that allocates fast: a live ingest
	// (windowed aggregations), bulk writes. At LeanFloor the collector
	// ran often enough to cost windowed aggregation 4–6 % of its ingest
	// at GOMAXPROCS=2.
	AllocFloor = 1200 << 20
)

// memLimitMax caps the memory limit TuneGC sets.
const memLimitMax = 4 << 30

// memLimit is the memory limit for a live heap of live bytes.
func memLimit(live uint64, floor int64) int64 {
	return min(max(int64(live)*5/2, floor), memLimitMax)
}

// TuneProcs gives a server whose own store syncs to disk one processor
// more than Go's default, and returns how many it runs on. An operator's
// GOMAXPROCS wins, and a process that a CPU quota holds below the
// machine's CPUs (Go's default follows the quota) keeps the default: an
// extra processor there would only spend the quota faster.
//
// The store's write-ahead log waits in fdatasync, its flushes and
// compactions in writes and syncs of their own, and each such call holds
// a processor in the kernel until Go's system monitor notices and hands
// it on. With as many processors as cores a core then stands idle while
// requests wait to run. One more processor let flights serve answer 7–10 %
// more write commands a second on two cores, with a lower p99, and its
// reads at 50,000 a second no slower (docs/benchmarks.md, "One processor
// more than the cores").
func TuneProcs() int {
	n := procsFor(os.Getenv("GOMAXPROCS"), runtime.GOMAXPROCS(0), runtime.NumCPU())
	if n != runtime.GOMAXPROCS(0) {
		runtime.GOMAXPROCS(n)
	}
	return n
}

// procsFor is TuneProcs' choice given the GOMAXPROCS variable, Go's
// current setting and the machine's CPUs.
func procsFor(env string, current, cpus int) int {
	if env != "" || current < cpus {
		return current
	}
	return current + 1
}
