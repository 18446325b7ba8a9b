package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/internal/testenv"
)

func TestPlanRefusesOversubscription(t *testing.T) {
	p := Plan{Machine: 2, Parts: []Part{
		{Name: "writer-1", Kind: "node", CPUs: 0.6},
		{Name: "writer-2", Kind: "node", CPUs: 0.6},
		{Name: "postgres", Kind: "store", CPUs: 0.5},
		{Name: "nginx", Kind: "proxy", CPUs: 0.4},
	}}
	err := p.Check(false)
	if err == nil {
		t.Fatal("2.1 CPUs of quotas on a 2-CPU machine were accepted")
	}
	for _, want := range []string{"2.10 CPUs", "has 2.00", "--oversubscribe", "2 node × 0.60"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if err := p.Check(true); err != nil {
		t.Errorf("--oversubscribe: %v", err)
	}
	p.Parts[3].CPUs = 0.3
	if err := p.Check(false); err != nil {
		t.Errorf("exactly 2.0 CPUs refused: %v", err)
	}
	p.Parts[3].CPUs = 0.001
	if err := p.Check(false); err == nil {
		t.Error("a quota below the kernel's 1 ms per period accepted")
	}
	lines := strings.Join(p.Lines(), "\n")
	if !strings.Contains(lines, "30.0% of the machine") {
		t.Errorf("the plan does not say each part's share of the machine:\n%s", lines)
	}
}

// hierarchy returns the CPU controller, skipping without root or
// control groups unless the test environment requires them.
func hierarchy(t *testing.T) Hierarchy {
	t.Helper()
	h, err := Detect()
	if err != nil {
		if testenv.Required() {
			t.Fatalf("%v (%s=1: control groups are required)", err, testenv.RequireEnv)
		}
		t.Skip(err)
	}
	return h
}

// TestQuotaHoldsABusyProcess runs two busy loops (two cores' worth of
// demand) in a group with a quota of 0.05 CPUs (small, so that even on a loaded machine the loops would take more without it) for a few seconds: the
// group's measured CPU use stays within the quota + 10 %, and near it
// (the loops were not starved). Without the quota the loops take far more.
func TestQuotaHoldsABusyProcess(t *testing.T) {
	for _, short := range []bool{false, true} {
		t.Run(fmt.Sprintf("short=%v", short), func(t *testing.T) { quotaHoldsABusyProcess(t, short) })
	}
}

func quotaHoldsABusyProcess(t *testing.T, short bool) {
	h := hierarchy(t)
	h.ShortPeriods = short
	g, err := h.Create(fmt.Sprintf("logbook-cgroup-test-%d/busy", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	parent := h.Open(strings.Split(g.Path, "/")[0])
	defer func() {
		if err := parent.Remove(); err != nil {
			t.Error(err)
		}
		if parent.Exists() {
			t.Error("group left behind")
		}
	}()
	const quota = 0.05
	if err := g.SetQuota(quota); err != nil {
		t.Fatal(err)
	}
	if q, err := g.Quota(); err != nil || q < quota-0.001 || q > quota+0.001 {
		t.Fatalf("quota read back as %v, %v", q, err)
	}
	want := 100 * time.Millisecond
	if short {
		want = 20 * time.Millisecond // the kernel's smallest quota, 1 ms
	}
	if p := periodOf(t, g); p != want {
		t.Errorf("period of a 0.05-CPU quota = %v, want %v", p, want)
	}
	argv := g.Wrap("/bin/sh", "-c", "while :; do :; done & while :; do :; done")
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.Kill(5 * time.Second); _ = cmd.Wait() }()
	time.Sleep(500 * time.Millisecond) // into the group and busy
	u0, t0 := mustUsage(t, g), time.Now()
	time.Sleep(3 * time.Second)
	used, wall := (mustUsage(t, g) - u0).Seconds(), time.Since(t0).Seconds()
	share := used / wall
	t.Logf("busy loops used %.3f CPU-s in %.2f s: %.3f CPUs on a quota of %.2f", used, wall, share, quota)
	if share > quota*1.1 {
		t.Errorf("used %.3f CPUs, more than the quota %.2f + 10%%", share, quota)
	}
	if share < quota*0.5 {
		t.Errorf("used %.3f CPUs: the loops did not run (quota %.2f)", share, quota)
	}
	if pids, _ := g.Procs(); len(pids) < 2 {
		t.Errorf("the wrapped command and its fork are not both in the group: %v", pids)
	}
	if n, d := g.Throttled(); n == 0 || d == 0 {
		t.Errorf("the kernel never throttled the group (%d periods, %v)", n, d)
	}
}

// periodOf reads the group's quota period from the kernel.
func periodOf(t *testing.T, g *Group) time.Duration {
	t.Helper()
	p, err := g.Period()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestShortPeriod(t *testing.T) {
	for _, c := range []struct {
		cpus float64
		want time.Duration
	}{
		{0, 100 * time.Millisecond}, {0.005, 100 * time.Millisecond}, {0.01, 100 * time.Millisecond},
		{0.03, 34 * time.Millisecond}, {0.05, 20 * time.Millisecond}, {0.1, 10 * time.Millisecond},
		{0.9, 10 * time.Millisecond}, {4, 10 * time.Millisecond},
	} {
		if got := ShortPeriod(c.cpus); got != c.want {
			t.Errorf("ShortPeriod(%g) = %v, want %v", c.cpus, got, c.want)
		}
		if q := c.cpus * float64(ShortPeriod(c.cpus)); c.cpus >= 0.01 && q < float64(time.Millisecond)-1 {
			t.Errorf("ShortPeriod(%g) gives a quota of %v, under the kernel's 1 ms", c.cpus, time.Duration(q))
		}
	}
}

func mustUsage(t *testing.T, g *Group) time.Duration {
	t.Helper()
	u, err := g.Usage()
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestProcCPU(t *testing.T) {
	d, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 300_000_000 {
		x += i
	}
	d2, _ := ProcCPU(os.Getpid())
	if d2 <= d || x == 0 {
		t.Errorf("CPU time did not grow over a busy loop: %v then %v", d, d2)
	}
}

func TestGoProcsOnAQuota(t *testing.T) {
	for _, c := range []struct {
		cpus float64
		want int
	}{{0.05, 1}, {0.9, 1}, {1, 1}, {1.5, 1}, {2, 2}, {3.9, 3}} {
		if got := GoProcs(c.cpus); got != c.want {
			t.Errorf("GoProcs(%g) = %d, want %d", c.cpus, got, c.want)
		}
	}
	t.Setenv("GOMAXPROCS", "")
	t.Setenv("GODEBUG", "")
	trace := "GODEBUG=schedtrace=2147483647"
	if got := GoEnv([]string{"A=1"}, 0.1); !slices.Equal(got, []string{"A=1", "GOMAXPROCS=1", trace}) {
		t.Errorf("a node on 0.1 CPUs: %q", got)
	}
	if got := GoEnv(nil, 0); got != nil {
		t.Errorf("no quota: %q", got)
	}
	if got := GoEnv([]string{"GOMAXPROCS=4"}, 0.1); !slices.Equal(got, []string{"GOMAXPROCS=4", trace}) {
		t.Errorf("a caller's own GOMAXPROCS: %q", got)
	}
	if got := GoEnv([]string{"GODEBUG=gctrace=1"}, 0.1); !slices.Equal(got, []string{"GODEBUG=gctrace=1", "GOMAXPROCS=1", "GODEBUG=gctrace=1,schedtrace=2147483647"}) {
		t.Errorf("a caller's own GODEBUG: %q", got)
	}
	t.Setenv("GOMAXPROCS", "3")
	t.Setenv("GODEBUG", "schedtrace=1000")
	if got := GoEnv(nil, 0.1); got != nil {
		t.Errorf("GOMAXPROCS and schedtrace in this process's environment: %q", got)
	}
}
