package server

import (
	"context"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	runtimemetrics "runtime/metrics"
	"testing"
	"time"
)

func TestMemLimitFollowsTheLiveHeap(t *testing.T) {
	for _, c := range []struct {
		live        uint64
		floor, want int64
	}{
		{0, LeanFloor, LeanFloor},
		{200 << 20, LeanFloor, LeanFloor}, // the default season after five write runs: 500 MiB would make collections frequent
		{300 << 20, LeanFloor, 750 << 20},
		{300 << 20, AllocFloor, AllocFloor},
		{600 << 20, LeanFloor, 1500 << 20},  // 2.5 times
		{600 << 20, AllocFloor, 1500 << 20}, // whatever the floor
		{1 << 30, LeanFloor, 2560 << 20},    // a million legs
		{3 << 30, AllocFloor, memLimitMax},  // no more than the cap
	} {
		if got := memLimit(c.live, c.floor); got != c.want {
			t.Errorf("memLimit(%d MiB, floor %d MiB) = %d MiB, want %d MiB", c.live>>20, c.floor>>20, got>>20, c.want>>20)
		}
	}
}

// TuneGC sets the limit from the live heap, not once for all.
func TestTuneGCSetsTheLimitFromTheLiveHeap(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT set: TuneGC leaves the collector alone")
	}
	oldPercent, oldLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		time.Sleep(10 * time.Millisecond)
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	}()
	TuneGC(ctx, LeanFloor)
	if got := debug.SetMemoryLimit(-1); got != memLimitMax {
		t.Fatalf("limit before the live heap is read: %d MiB, want %d MiB", got>>20, memLimitMax>>20)
	}
	runtime.GC()
	sample := []runtimemetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtimemetrics.Read(sample)
		want := memLimit(sample[0].Value.Uint64(), LeanFloor)
		got := debug.SetMemoryLimit(-1)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("limit %d MiB, want %d MiB from the live heap", got>>20, want>>20)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// An operator's GOGC keeps its collection percentage, but the process
// still gets a memory limit: only GOMEMLIMIT replaces it.
func TestTuneGCSetsALimitBesideAnOperatorsGOGC(t *testing.T) {
	if os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOMEMLIMIT set")
	}
	t.Setenv("GOGC", "150")
	oldPercent, oldLimit := debug.SetGCPercent(150), debug.SetMemoryLimit(math.MaxInt64)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		time.Sleep(10 * time.Millisecond)
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	}()
	TuneGC(ctx, LeanFloor)
	if got := debug.SetMemoryLimit(-1); got == math.MaxInt64 {
		t.Error("GOGC set: no memory limit")
	}
	if got := debug.SetGCPercent(150); got != 150 {
		t.Errorf("GOGC=150 became %d", got)
	}
}

func TestProcsFor(t *testing.T) {
	for _, c := range []struct {
		env                 string
		current, cpus, want int
	}{
		{"", 2, 2, 3},  // a machine of its own: one more
		{"", 8, 8, 9},  //
		{"2", 2, 2, 2}, // the operator's setting wins
		{"4", 4, 2, 4}, //
		{"", 2, 8, 2},  // a quota of two CPUs on eight: keep Go's default
		{"", 1, 2, 1},  //
	} {
		if got := procsFor(c.env, c.current, c.cpus); got != c.want {
			t.Errorf("procsFor(%q, %d, %d) = %d, want %d", c.env, c.current, c.cpus, got, c.want)
		}
	}
}
