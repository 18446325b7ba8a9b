package cliutil

import (
	"os"
	"runtime"
)

// TuneProcs gives a process that answers window queries beside a live
// ingest (bench windows, notify serve) spareProcs Go processors more than
// it has cores, unless GOMAXPROCS is set.
//
// The ingest keeps several goroutines busy at once — the projection
// runner's reader and writer, the store's appends and its WAL, Pebble's
// flushes and compactions — more than 2 cores. A query that Go's
// scheduler preempted (its 10 ms time slice) went to the global run
// queue and waited there while both processors ran that work: on 2
// cores, p99 21–39 ms for a query of half a millisecond. With processors
// to spare, an idle one takes the query at once and the operating system
// shares the cores among the threads in slices of a millisecond or two:
// p99 7.5–9 ms, the ingest no slower (docs/benchmarks.md, "Windowed
// aggregation"). The price: more threads for the kernel to switch
// between, the collector's dedicated workers are a quarter of the
// processors (so a larger share of a small machine while it marks), and
// an explicit setting stops Go from following a container's CPU limit
// as it changes.
func TuneProcs() {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	runtime.GOMAXPROCS(ProcsFor(runtime.GOMAXPROCS(0)))
}

// spareProcs is how many processors TuneProcs adds: about the ingest's
// busy goroutines beyond 2 cores.
const spareProcs = 2

// ProcsFor is the processors TuneProcs sets for n by default.
func ProcsFor(n int) int { return n + spareProcs }
