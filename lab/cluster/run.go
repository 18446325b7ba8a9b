package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/logbook/logbook/lab/cgroup"
)

// GroupPrefix names every run's parent control group: GroupPrefix-<pid of
// the command that made it>.
const GroupPrefix = "logbook-cluster"

// DefaultRunDir holds one state file per running cluster command run
// as root; other users' go under the system's temporary directory
// (RunDir).
const DefaultRunDir = "/run/logbook-cluster"

// RunDir is where run files go when none is given: DefaultRunDir for
// root, $TMPDIR/logbook-cluster-UID for others.
func RunDir() string {
	if os.Geteuid() == 0 {
		return DefaultRunDir
	}
	return filepath.Join(os.TempDir(), "logbook-cluster-"+strconv.Itoa(os.Geteuid()))
}

// Run is the state of one cluster command on this machine: its control
// groups (a parent named after the command's pid, one child per process),
// the processes it started and the directories it made, recorded in a
// file so that a run killed with SIGKILL is cleaned by the next one
// (Sweep). Every process of the run is in one of its groups, so killing
// what the groups hold ends every process, forks included.
type Run struct {
	h      *cgroup.Hierarchy // nil: no control groups (not root)
	parent *cgroup.Group
	file   string

	mu     sync.Mutex
	state  runState
	groups map[string]*groupInfo
}

type groupInfo struct {
	g    *cgroup.Group
	kind string
	pid  int // without groups: the process measured from /proc
}

// runState is what the run file holds.
type runState struct {
	Owner      int         `json:"owner"`
	OwnerStart int64       `json:"owner_start"`
	Group      string      `json:"group,omitempty"` // parent group's path
	Procs      []procState `json:"procs"`
	Dirs       []string    `json:"dirs,omitempty"` // removed on clean-up
}

type procState struct {
	Name  string `json:"name"`
	Pid   int    `json:"pid"`
	Start int64  `json:"start"` // clock ticks since boot; guards against pid reuse
}

// BeginRun cleans up what dead runs left (Sweep), then makes this
// command's parent group and run file in runDir (RunDir() if empty).
// Without control groups (not root, or none mounted) a run still
// records its processes; it cannot set quotas, and says so through
// Groups.
func BeginRun(runDir string) (*Run, []string, error) {
	if runDir == "" {
		runDir = RunDir()
	}
	cleaned, err := Sweep(runDir)
	if err != nil {
		return nil, cleaned, err
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, cleaned, fmt.Errorf("cluster: run directory: %w", err)
	}
	r := &Run{groups: map[string]*groupInfo{}}
	r.state.Owner = os.Getpid()
	r.state.OwnerStart, _ = cgroup.StartTime(r.state.Owner)
	r.file = filepath.Join(runDir, strconv.Itoa(r.state.Owner)+".json")
	if h, err := cgroup.Detect(); err == nil {
		r.h = &h
		parent, err := h.Create(GroupPrefix + "-" + strconv.Itoa(r.state.Owner))
		if err != nil {
			return nil, cleaned, err
		}
		r.parent = parent
		r.state.Group = parent.Path
	}
	return r, cleaned, r.save()
}

// Groups reports whether the run has control groups (and so quotas and
// per-group CPU accounting).
func (r *Run) Groups() bool { return r.h != nil }

// UseShortPeriods gives the quotas of the groups made from here on the
// shortest periods the kernel allows (cgroup.ShortPeriod) instead of its
// default 100 ms.
func (r *Run) UseShortPeriods() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.h != nil {
		r.h.ShortPeriods = true
	}
}

// Hierarchy is the control group hierarchy, or nil.
func (r *Run) Hierarchy() *cgroup.Hierarchy { return r.h }

// Group makes the run's group for one process, with a quota of cpus
// (0: none). Without control groups it returns nil, and a quota is an
// error.
func (r *Run) Group(name, kind string, cpus float64) (*cgroup.Group, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.h == nil {
		if cpus > 0 {
			return nil, fmt.Errorf("cluster: a CPU quota for %s needs control groups: %v", name, cgroup.ErrUnsupported)
		}
		r.groups[name] = &groupInfo{kind: kind}
		return nil, nil
	}
	g, err := r.h.Create(r.parent.Path + "/" + name)
	if err != nil {
		return nil, err
	}
	if err := g.SetQuota(cpus); err != nil {
		return nil, err
	}
	r.groups[name] = &groupInfo{g: g, kind: kind}
	return g, nil
}

// Track records a process the run started, so that a later run can end
// it if this one is killed.
func (r *Run) Track(name string, pid int) {
	r.mu.Lock()
	st, _ := cgroup.StartTime(pid)
	r.state.Procs = append(r.state.Procs, procState{Name: name, Pid: pid, Start: st})
	if gi := r.groups[name]; gi != nil {
		gi.pid = pid
	}
	r.mu.Unlock()
	_ = r.save()
}

// TrackDir records a directory the run made, removed by a clean-up after
// a SIGKILL.
func (r *Run) TrackDir(dir string) {
	r.mu.Lock()
	r.state.Dirs = append(r.state.Dirs, dir)
	r.mu.Unlock()
	_ = r.save()
}

func (r *Run) save() error {
	r.mu.Lock()
	b, err := json.MarshalIndent(r.state, "", "  ")
	r.mu.Unlock()
	if err != nil {
		return err
	}
	tmp := r.file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("cluster: run file: %w", err)
	}
	return os.Rename(tmp, r.file)
}

// End removes the run's groups (ending any process still in them) and
// its run file. The caller stops its processes gracefully first.
func (r *Run) End() error {
	var errs []error
	if r.parent != nil {
		// This process may have joined one of its groups (the load
		// generator's): leave it for the root group first.
		if self, err := r.h.Self(); err == nil && strings.HasPrefix(self.Path+"/", r.parent.Path+"/") {
			if err := r.h.Open("").Add(os.Getpid()); err != nil {
				errs = append(errs, err)
			}
		}
		errs = append(errs, r.parent.Remove())
	}
	for _, p := range r.state.Procs {
		killIfSame(p)
	}
	if err := os.Remove(r.file); err != nil && !os.IsNotExist(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// killIfSame kills the recorded process if it is still the same one.
func killIfSame(p procState) bool {
	st, err := cgroup.StartTime(p.Pid)
	if err != nil || st != p.Start || zombie(p.Pid) {
		return false
	}
	_ = syscall.Kill(p.Pid, syscall.SIGKILL)
	return true
}

// alive reports whether pid is the process that started at start.
func alive(pid int, start int64) bool {
	st, err := cgroup.StartTime(pid)
	return err == nil && (start == 0 || st == start)
}

// Sweep cleans what dead cluster commands left: for each run file in
// runDir whose owner is gone, it kills the processes it recorded, removes
// its groups and directories and the file; then it removes any
// GroupPrefix-<pid> group whose pid is gone (a run killed before it wrote
// its file), killing what is in it. It returns what it cleaned.
func Sweep(runDir string) ([]string, error) {
	if runDir == "" {
		runDir = RunDir()
	}
	var cleaned []string
	var errs []error
	var h *cgroup.Hierarchy
	if x, err := cgroup.Detect(); err == nil {
		h = &x
	}
	files, _ := filepath.Glob(filepath.Join(runDir, "*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var st runState
		if err := json.Unmarshal(b, &st); err != nil {
			errs = append(errs, fmt.Errorf("cluster: %s: %w", f, err))
			continue
		}
		if alive(st.Owner, st.OwnerStart) {
			continue
		}
		if h != nil && st.Group != "" {
			if err := h.Open(st.Group).Remove(); err != nil {
				errs = append(errs, err)
			} else {
				cleaned = append(cleaned, "group "+st.Group)
			}
		}
		for _, p := range st.Procs {
			if killIfSame(p) {
				cleaned = append(cleaned, fmt.Sprintf("process %s (%d)", p.Name, p.Pid))
			}
		}
		for _, d := range st.Dirs {
			if err := os.RemoveAll(d); err == nil {
				cleaned = append(cleaned, "directory "+d)
			}
		}
		_ = os.Remove(f)
		cleaned = append(cleaned, "run file "+f)
	}
	if h != nil {
		dirs, _ := filepath.Glob(filepath.Join(h.CPU, GroupPrefix+"-*"))
		for _, d := range dirs {
			pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), GroupPrefix+"-"))
			if err != nil || alive(pid, 0) {
				continue
			}
			g := h.Open(filepath.Base(d))
			if err := g.Remove(); err != nil {
				errs = append(errs, err)
			} else {
				cleaned = append(cleaned, "group "+g.Path)
			}
		}
	}
	return cleaned, errors.Join(errs...)
}

// Usage is a snapshot of the CPU time each of the run's processes has
// used, by name, and when it was taken.
type Usage struct {
	At  time.Time
	CPU map[string]time.Duration
	// Throttled is how long the kernel held each group stopped for having
	// spent its quota (groups with a quota only).
	Throttled map[string]time.Duration
}

// Usage reads every group's CPU time (or, without groups, each tracked
// process's from /proc).
func (r *Run) Usage() Usage {
	r.mu.Lock()
	defer r.mu.Unlock()
	u := Usage{At: time.Now(), CPU: map[string]time.Duration{}, Throttled: map[string]time.Duration{}}
	for name, gi := range r.groups {
		var d time.Duration
		var err error
		if gi.g != nil {
			d, err = gi.g.Usage()
			_, u.Throttled[name] = gi.g.Throttled()
		} else if gi.pid > 0 {
			d, err = cgroup.ProcCPU(gi.pid)
		}
		if err == nil {
			u.CPU[name] = d
		}
	}
	return u
}

// KindCPU is one kind of process's CPU use over an interval: the thesis's
// CPU % column, per quota.
type KindCPU struct {
	Processes int     `json:"processes"`
	Seconds   float64 `json:"cpu_seconds"`
	// Cores is CPU-seconds ÷ wall seconds: 1 = one core busy all the time.
	Cores float64 `json:"cores"`
	// Quota is the kind's quotas added up (0: none).
	Quota float64 `json:"quota_cpus"`
	// OfQuota is CPU-seconds ÷ (wall seconds × quota), 1 = the quota used
	// in full; 0 without a quota.
	OfQuota float64 `json:"of_quota"`
	// Throttled is how long a process of this kind spent stopped by the
	// kernel for having used its quota, per second of the interval (the
	// kind's throttled time ÷ (wall seconds × processes)): time in which
	// its requests waited with nothing running, which latency sees and
	// CPU % does not. The kernel counts it per core on which the process
	// had threads waiting, so it can pass 1.
	Throttled float64 `json:"throttled"`
}

// CPUByKind sums the CPU use between two snapshots by kind (node,
// replica, store, proxy, loadgen).
func (r *Run) CPUByKind(from, to Usage) map[string]KindCPU {
	r.mu.Lock()
	defer r.mu.Unlock()
	wall := to.At.Sub(from.At).Seconds()
	out := map[string]KindCPU{}
	for name, gi := range r.groups {
		k := out[gi.kind]
		k.Processes++
		k.Seconds += (to.CPU[name] - from.CPU[name]).Seconds()
		if gi.g != nil {
			k.Quota += gi.g.CPUs()
			k.Throttled += (to.Throttled[name] - from.Throttled[name]).Seconds()
		}
		out[gi.kind] = k
	}
	for kind, k := range out {
		if wall > 0 {
			k.Cores = k.Seconds / wall
			if k.Quota > 0 {
				k.OfQuota = k.Seconds / (wall * k.Quota)
			}
			k.Throttled /= wall * float64(k.Processes)
		}
		k.Seconds, k.Cores, k.OfQuota, k.Throttled = round3(k.Seconds), round3(k.Cores), round3(k.OfQuota), round3(k.Throttled)
		out[kind] = k
	}
	return out
}

// ByProcess is each process's CPU use over an interval, sorted by name:
// name, kind, CPU-seconds, quota.
func (r *Run) ByProcess(from, to Usage) [][4]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	wall := to.At.Sub(from.At).Seconds()
	var rows [][4]string
	for name, gi := range r.groups {
		s := (to.CPU[name] - from.CPU[name]).Seconds()
		q := "none"
		if gi.g != nil && gi.g.CPUs() > 0 {
			q = fmt.Sprintf("%.2f CPUs, used %.0f%%", gi.g.CPUs(), 100*s/(wall*gi.g.CPUs()))
		}
		rows = append(rows, [4]string{name, gi.kind, fmt.Sprintf("%.2f s (%.2f cores)", s, s/max(wall, 1e-9)), q})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i][0] < rows[j][0] })
	return rows
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// Forget removes the groups whose names start with one of prefixes from
// the run (their processes stopped): a run that starts clusters one after
// the other counts only the present one's processes.
func (r *Run) Forget(prefixes ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, gi := range r.groups {
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				if gi.g != nil {
					_ = gi.g.Remove()
				}
				delete(r.groups, name)
				break
			}
		}
	}
}

// SetQuota changes the quota of the run's group name (0: none).
func (r *Run) SetQuota(name string, cpus float64) error {
	r.mu.Lock()
	gi := r.groups[name]
	r.mu.Unlock()
	if gi == nil || gi.g == nil {
		if cpus > 0 {
			return fmt.Errorf("cluster: no control group %s for a quota", name)
		}
		return nil
	}
	return gi.g.SetQuota(cpus)
}
