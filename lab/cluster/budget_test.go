package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/lab/cgroup"
	"github.com/logbook/logbook/lab/loadtest"
)

// needGroups skips without root and control groups, unless the test
// environment requires them (LOGBOOK_REQUIRE_EXTERNAL=1).
func needGroups(t *testing.T) cgroup.Hierarchy {
	t.Helper()
	h, err := cgroup.Detect()
	if err != nil {
		if testenv.Required() {
			t.Fatalf("%v (%s=1)", err, testenv.RequireEnv)
		}
		t.Skip(err)
	}
	return h
}

// beginRun begins a run whose end the test checks when it finishes.
func beginRun(t *testing.T) *Run {
	t.Helper()
	run, _, err := BeginRun(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := run.End(); err != nil {
			t.Error(err)
		}
	})
	return run
}

// TestNodeQuotaHolds runs 2 write nodes with a quota of 0.05 CPUs each
// and drives them hard through nginx for a few seconds: each node's CPU
// use, measured by its group, stays within its quota + 10 %, and the
// kernel throttled it (it wanted more).
func TestNodeQuotaHolds(t *testing.T) {
	needGroups(t)
	url, _ := testenv.SchemaURL(t)
	nginx := testenv.Nginx(t)
	bin := buildBinary(t)
	run := beginRun(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const quota = 0.05
	c, err := Start(ctx, Config{Binary: bin, Store: url, Writers: 2, Dir: t.TempDir(), Tokens: tokens, Nginx: nginx,
		Run: run, NodeCPUs: quota, ProxyCPUs: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	client := loadtest.NewClient(c.URL, "viewer-token", 4, 200*time.Microsecond)
	u0 := run.Usage()
	res, err := loadtest.RunRead(ctx, client, loadtest.ReadConfig{Rate: 3000, Ramp: time.Second, Hold: 4 * time.Second, MaxInFlight: 2000})
	if err != nil {
		t.Fatal(err)
	}
	u1 := run.Usage()
	wall := u1.At.Sub(u0.At).Seconds()
	t.Logf("offered 3000/s, served %.0f/s, p99 %.0f ms", res.AchievedRate, res.P99)
	for _, n := range c.Writers {
		used := (u1.CPU[n.Name] - u0.CPU[n.Name]).Seconds() / wall
		periods, throttled := run.groups[n.Name].g.Throttled()
		t.Logf("%s used %.3f CPUs of a %.2f quota; throttled %d times, %v", n.Name, used, quota, periods, throttled)
		if used > quota*1.1 {
			t.Errorf("%s used %.3f CPUs, more than its quota %.2f + 10%%", n.Name, used, quota)
		}
		if periods == 0 {
			t.Errorf("%s was never throttled: it was not driven hard", n.Name)
		}
	}
	// The run's summary by kind reports the time the nodes spent
	// stopped, per second and per node.
	var stopped float64
	for _, n := range c.Writers {
		stopped += (u1.Throttled[n.Name] - u0.Throttled[n.Name]).Seconds()
	}
	want := stopped / (wall * float64(len(c.Writers)))
	if th := run.CPUByKind(u0, u1)["node"].Throttled; want <= 0 || math.Abs(th-want) > 0.001 {
		t.Errorf("CPUByKind reports the nodes stopped %.3f s a second, want %.3f", th, want)
	}
	// A Go process on a twentieth of a CPU runs one processor, not Go's
	// default of two (cgroup.GoProcs).
	if os.Getenv("GOMAXPROCS") == "" {
		for _, n := range c.Writers {
			n.mu.Lock()
			pid := n.cmd.Process.Pid
			n.mu.Unlock()
			env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if err != nil || !bytes.Contains(env, []byte("\x00GOMAXPROCS=1\x00")) {
				t.Errorf("%s runs without GOMAXPROCS=1 (%v)", n.Name, err)
			}
			// Nor does its system monitor sleep deeply (cgroup.GoEnv).
			if os.Getenv("GODEBUG") == "" && !bytes.Contains(env, []byte("\x00GODEBUG=schedtrace=2147483647\x00")) {
				t.Errorf("%s runs without GODEBUG=schedtrace", n.Name)
			}
		}
	}
	kinds := run.CPUByKind(u0, u1)
	if k := kinds["node"]; k.Processes != 2 || k.Quota < 2*quota-1e-9 || k.OfQuota <= 0 || k.OfQuota > 1.1 {
		t.Errorf("CPU by kind: %+v", kinds)
	}
}

// TestSigkillLeavesNothingAfterClean starts `logbook cluster` (its own
// PostgreSQL, 2 write nodes, nginx, each in a group with a quota), kills
// it with SIGKILL, checks that its processes outlived it, then runs
// `logbook cluster clean`: no group, process, port or data directory of
// the killed run is left.
func TestSigkillLeavesNothingAfterClean(t *testing.T) {
	h := needGroups(t)
	testenv.Nginx(t)
	if _, err := postgresBin(); err != nil {
		if testenv.Required() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	bin := buildBinary(t)
	work := t.TempDir()
	runDir, dataDir := filepath.Join(work, "run"), filepath.Join(work, "data")
	if err := os.WriteFile(filepath.Join(work, "tokens"), []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "cluster", "--writers", "2", "--replicas", "0", "--node-cpus", "0.2", "--store-cpus", "0.4",
		"--proxy-cpus", "0.2", "--addr", "127.0.0.1:0", "--tokens", filepath.Join(work, "tokens"), "--dir", dataDir, "--run-dir", runDir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	nginxAddr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "nginx at http://"); ok {
				nginxAddr <- a
			}
		}
		close(nginxAddr)
	}()
	var addr string
	select {
	case addr = <-nginxAddr:
	case <-time.After(3 * time.Minute):
	}
	if addr == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("the cluster did not come up")
	}
	b, err := os.ReadFile(filepath.Join(runDir, strconv.Itoa(cmd.Process.Pid)+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var st runState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Procs) != 4 || st.Group == "" || len(st.Dirs) != 1 {
		t.Fatalf("run file: %s", b)
	}
	group := h.Open(st.Group)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()

	// The kill left everything running: there is something to clean.
	if !group.Exists() {
		t.Fatal("the group vanished with the command: nothing to test")
	}
	for _, p := range st.Procs {
		if !running(p.Pid) {
			t.Errorf("%s (%d) died with the command", p.Name, p.Pid)
		}
	}

	clean := exec.Command(bin, "cluster", "clean", "--run-dir", runDir)
	if o, err := clean.CombinedOutput(); err != nil {
		t.Fatalf("cluster clean: %v\n%s", err, o)
	} else {
		t.Logf("cluster clean:\n%s", o)
	}
	for _, d := range group.Dirs() {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("group %s left behind", d)
		}
	}
	for _, p := range st.Procs {
		if running(p.Pid) {
			t.Errorf("%s (%d) left running", p.Name, p.Pid)
		}
	}
	for _, d := range st.Dirs {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("data directory %s left behind", d)
		}
	}
	if files, _ := filepath.Glob(filepath.Join(runDir, "*.json")); len(files) > 0 {
		t.Errorf("run files left: %v", files)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Errorf("nginx's port %s still taken: %v", addr, err)
	} else {
		l.Close()
	}
}

// running reports whether pid is a live process (not a zombie waiting to
// be reaped by an init that does not reap).
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestUseShortPeriods: a run's groups get the kernel's default 100 ms
// period, and after UseShortPeriods the shortest period their quota
// allows (10 ms at 0.1 CPUs).
func TestUseShortPeriods(t *testing.T) {
	needGroups(t)
	run := beginRun(t)
	for _, c := range []struct {
		name  string
		short bool
		want  time.Duration
	}{{"default", false, 100 * time.Millisecond}, {"short", true, 10 * time.Millisecond}} {
		if c.short {
			run.UseShortPeriods()
		}
		g, err := run.Group(c.name, "node", 0.1)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := g.Period(); err != nil || p != c.want {
			t.Errorf("%s: period %v, %v; want %v", c.name, p, err, c.want)
		}
	}
}
