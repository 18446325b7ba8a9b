package server

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	runtimemetrics "runtime/metrics"
	"slices"
	"strings"
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
// more than the machine's CPUs, and returns how many it runs on. It does
// so only when it can tell that no CPU quota applies to the process (the
// cgroup files, cpuQuota): on a quota an extra processor would only spend
// the quota faster, and Go's own default there (never below two) is
// already the most it should run on. An operator's GOMAXPROCS wins
// always, and so does an affinity mask that leaves the process fewer
// CPUs than Go's setting. Setting GOMAXPROCS stops Go from following
// later changes of the quota; a process that had none when it started
// keeps its setting.
//
// The store's write-ahead log waits in fdatasync, its flushes and
// compactions in writes and syncs of their own, and each such call holds
// a processor in the kernel until Go's system monitor notices and hands
// it on. With as many processors as cores a core then stands idle while
// requests wait to run. On this project's two-core test machine one more
// processor let flights serve answer 7–8 % more write commands a second,
// with a lower p99, and its reads at 50,000 a second no slower
// (docs/benchmarks.md, "One processor more than the cores").
func TuneProcs() int {
	limited, known := cpuQuota("/")
	n := procsFor(os.Getenv("GOMAXPROCS"), runtime.GOMAXPROCS(0), runtime.NumCPU(), known && !limited)
	if n != runtime.GOMAXPROCS(0) {
		runtime.GOMAXPROCS(n)
	}
	return n
}

// procsFor is TuneProcs' choice given the GOMAXPROCS variable, Go's
// current setting, the CPUs the process may run on and whether no quota
// applies. Called again, it chooses the same.
func procsFor(env string, current, cpus int, noQuota bool) int {
	if env != "" || !noQuota || current < cpus {
		return current
	}
	return cpus + 1
}

// cpuQuota reports whether a CFS CPU quota applies to this process: a
// cgroup v1 cpu.cfs_quota_us other than -1, or a cgroup v2 cpu.max other
// than "max", in its own cgroup or any above it, with the cgroup
// file systems mounted where Linux distributions and container runtimes
// mount them (under root, normally "/"). known is false when no quota
// file could be read at all, so that the caller assumes nothing.
func cpuQuota(root string) (limited, known bool) {
	b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return false, false
	}
	check := func(dir, path, file string, quota func(string) bool) {
		for p := path; ; p = filepath.Dir(p) {
			if v, err := os.ReadFile(filepath.Join(root, "sys/fs/cgroup", dir, p, file)); err == nil {
				known = true
				if quota(strings.TrimSpace(string(v))) {
					limited = true
				}
			}
			if p == "/" || p == "." {
				return
			}
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// hierarchy-ID:controller-list:cgroup-path
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		path := f[2]
		if f[0] == "0" && f[1] == "" {
			check("", path, "cpu.max", func(v string) bool { return !strings.HasPrefix(v, "max") })
			continue
		}
		if slices.Contains(strings.Split(f[1], ","), "cpu") {
			v1 := func(v string) bool { return v != "-1" }
			check("cpu", path, "cpu.cfs_quota_us", v1)
			check("cpu,cpuacct", path, "cpu.cfs_quota_us", v1)
		}
	}
	return limited, known
}
