package server

import (
	"context"
	"os"
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
