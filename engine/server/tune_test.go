package server

import (
	"context"
	"math"
	"os"
	"path/filepath"
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
		noQuota             bool
	}{
		{"", 2, 2, 3, true},  // a machine of its own: one more
		{"", 8, 8, 9, true},  //
		{"", 3, 2, 3, true},  // called again: the same
		{"2", 2, 2, 2, true}, // the operator's setting wins
		{"4", 4, 2, 4, true}, //
		{"", 2, 2, 2, false}, // a quota (say half a CPU: Go's default is still 2), or none known: keep Go's default
		{"", 2, 8, 2, true},  // an affinity mask below Go's setting
		{"", 1, 2, 1, true},  //
	} {
		if got := procsFor(c.env, c.current, c.cpus, c.noQuota); got != c.want {
			t.Errorf("procsFor(%q, %d, %d, %v) = %d, want %d", c.env, c.current, c.cpus, c.noQuota, got, c.want)
		}
	}
}

// TestCPUQuota reads the cgroup layouts of cgroup v1 (this project's test
// machine), v2 (container runtimes), quotas set on a cgroup above the
// process's, and machines where nothing can be read.
func TestCPUQuota(t *testing.T) {
	for _, c := range []struct {
		name           string
		files          map[string]string
		limited, known bool
	}{
		{"v1, no quota", map[string]string{
			"proc/self/cgroup":                   "2:cpuacct:/\n1:cpu:/\n0::/\n",
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n",
		}, false, true},
		{"v1, a quota above the process's cgroup", map[string]string{
			"proc/self/cgroup": "3:memory:/x\n1:cpu,cpuacct:/a/b\n",
			"sys/fs/cgroup/cpu,cpuacct/a/b/cpu.cfs_quota_us": "-1\n",
			"sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_quota_us":   "50000\n",
			"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":     "-1\n",
		}, true, true},
		{"v2, half a CPU", map[string]string{
			"proc/self/cgroup":                    "0::/kubepods/pod1\n",
			"sys/fs/cgroup/kubepods/pod1/cpu.max": "50000 100000\n",
		}, true, true},
		{"v2, no quota", map[string]string{
			"proc/self/cgroup":                    "0::/kubepods/pod1\n",
			"sys/fs/cgroup/kubepods/pod1/cpu.max": "max 100000\n",
		}, false, true},
		{"v2, a namespace's own root", map[string]string{
			"proc/self/cgroup":      "0::/\n",
			"sys/fs/cgroup/cpu.max": "200000 100000\n",
		}, true, true},
		{"no quota files", map[string]string{"proc/self/cgroup": "0::/\n"}, false, false},
		{"no /proc", map[string]string{}, false, false},
	} {
		root := t.TempDir()
		for name, data := range c.files {
			path := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if limited, known := cpuQuota(root); limited != c.limited || known != c.known {
			t.Errorf("%s: limited %v, known %v; want %v, %v", c.name, limited, known, c.limited, c.known)
		}
	}
}
