// Package cgroup gives a process a CPU budget of its own through Linux
// control groups, and measures what it used: a quota of Q CPUs lets the
// group's processes run for Q × period of every period, as if they had a
// machine of Q cores. It works with cgroup v1's cpu and cpuacct
// controllers (cpu.cfs_quota_us, cpuacct.usage) and with cgroup v2's
// unified hierarchy (cpu.max, cpu.stat). Groups live under one parent per
// owner process, named Prefix-<pid>, so a run killed with SIGKILL can be
// found and cleaned by the next (see Stale and Sweep).
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultPeriod is the kernel's default scheduling period of a quota: a
// quota of Q CPUs is Q × period of CPU time in every period.
const DefaultPeriod = 100 * time.Millisecond

// MinPeriod is the shortest period ShortPeriod gives.
const MinPeriod = 10 * time.Millisecond

// ShortPeriod is the period of a quota of cpus CPUs for a hierarchy with
// ShortPeriods: as short as the kernel allows — MinPeriod, or longer
// where cpus × MinPeriod would be under the kernel's smallest quota of
// 1 ms — and at most DefaultPeriod. A group that has spent its quota
// waits for the next period, so the period bounds that wait: on a tenth
// of a CPU, 90 ms of every 100 ms with the default, 9 ms of every 10 ms
// here — closer to a slow machine of its own, which never stops (as
// Kubernetes' --cpu-cfs-quota-period lets a node do). The price is more
// throttling and waking, which a Go process pays in scheduler work.
func ShortPeriod(cpus float64) time.Duration {
	if cpus <= 0 {
		return DefaultPeriod
	}
	// Whole milliseconds, rounded up so that the quota is at least 1 ms.
	ms := time.Duration(math.Ceil(1/cpus-1e-9)) * time.Millisecond
	return min(max(ms, MinPeriod), DefaultPeriod)
}

// Hierarchy is where the CPU controller is mounted.
type Hierarchy struct {
	// V2 is true for the unified hierarchy (cgroup v2).
	V2 bool
	// CPU is the root of the hierarchy with the cpu controller (v1:
	// usually /sys/fs/cgroup/cpu; v2: usually /sys/fs/cgroup).
	CPU string
	// Acct is the root of v1's cpuacct controller when it is mounted
	// apart from cpu (v1 only; the same as CPU when they share a mount).
	Acct string
	// ShortPeriods gives the quotas of groups created or opened from here
	// on ShortPeriod rather than DefaultPeriod.
	ShortPeriods bool
}

// Period is the scheduling period of a quota of cpus CPUs in h.
func (h Hierarchy) Period(cpus float64) time.Duration {
	if h.ShortPeriods {
		return ShortPeriod(cpus)
	}
	return DefaultPeriod
}

// ErrUnsupported: no CPU controller is mounted, or this process may not
// create groups (not root).
var ErrUnsupported = errors.New("cgroup: no writable cpu controller (cgroup v1 cpu or v2 cpu.max) mounted; run as root on Linux")

// Detect finds the CPU controller from /proc/self/mountinfo, preferring
// a v1 cpu controller where both are mounted (hybrid systems give the cpu
// controller to v1 then).
func Detect() (Hierarchy, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return Hierarchy{}, ErrUnsupported
	}
	defer f.Close()
	var h Hierarchy
	var v2 string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts ... - fstype source superopts
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, x := range fields {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(fields)+1 || len(fields) < 5 {
			continue
		}
		mnt, fstype := fields[4], fields[sep+1]
		super := ""
		if sep+3 < len(fields) {
			super = fields[sep+3]
		}
		switch fstype {
		case "cgroup":
			opts := map[string]bool{}
			for _, o := range strings.Split(super, ",") {
				opts[o] = true
			}
			if opts["cpu"] {
				h.CPU = mnt
			}
			if opts["cpuacct"] {
				h.Acct = mnt
			}
		case "cgroup2":
			if v2 == "" {
				v2 = mnt
			}
		}
	}
	if h.CPU != "" {
		if h.Acct == "" {
			h.Acct = h.CPU
		}
		return h, writable(h.CPU)
	}
	if v2 != "" {
		ctrl, _ := os.ReadFile(filepath.Join(v2, "cgroup.controllers"))
		if !hasWord(string(ctrl), "cpu") {
			return Hierarchy{}, ErrUnsupported
		}
		return Hierarchy{V2: true, CPU: v2, Acct: v2}, writable(v2)
	}
	return Hierarchy{}, ErrUnsupported
}

func writable(dir string) error {
	if err := syscall.Access(dir, 2 /* W_OK */); err != nil {
		return fmt.Errorf("%w (%s: %v)", ErrUnsupported, dir, err)
	}
	return nil
}

func hasWord(s, w string) bool {
	for _, x := range strings.Fields(s) {
		if x == w {
			return true
		}
	}
	return false
}

// roots are the hierarchy's distinct roots a group has a directory in.
func (h Hierarchy) roots() []string {
	if h.V2 || h.Acct == h.CPU {
		return []string{h.CPU}
	}
	return []string{h.CPU, h.Acct}
}

// Group is one control group, a path relative to the hierarchy's roots.
type Group struct {
	h    Hierarchy
	Path string // e.g. logbook-cluster-4242/writer-1
	cpus float64
}

// Open returns the group at path without creating it.
func (h Hierarchy) Open(path string) *Group { return &Group{h: h, Path: path} }

// Create makes the group (and its parents) in every root. On cgroup v2 it
// enables the cpu controller for the children of each parent on the way.
func (h Hierarchy) Create(path string) (*Group, error) {
	path = strings.Trim(filepath.Clean(path), "/")
	if path == "" || path == "." || strings.HasPrefix(path, "..") {
		return nil, fmt.Errorf("cgroup: bad group path %q", path)
	}
	for _, root := range h.roots() {
		if h.V2 {
			// Each level's parent must hand the cpu controller down.
			parts := strings.Split(path, "/")
			dir := root
			for _, p := range parts {
				if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+cpu"), 0); err != nil {
					return nil, fmt.Errorf("cgroup: enable cpu in %s: %w", dir, err)
				}
				dir = filepath.Join(dir, p)
				if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
					return nil, fmt.Errorf("cgroup: %w", err)
				}
			}
			continue
		}
		if err := os.MkdirAll(filepath.Join(root, path), 0o755); err != nil {
			return nil, fmt.Errorf("cgroup: %w", err)
		}
	}
	return &Group{h: h, Path: path}, nil
}

// Dirs are the group's directories, one per root.
func (g *Group) Dirs() []string {
	var d []string
	for _, r := range g.h.roots() {
		d = append(d, filepath.Join(r, g.Path))
	}
	return d
}

func (g *Group) cpuDir() string  { return filepath.Join(g.h.CPU, g.Path) }
func (g *Group) acctDir() string { return filepath.Join(g.h.Acct, g.Path) }

// SetQuota limits the group to cpus CPUs (0.15: 15 ms of every 100 ms,
// or 1.5 ms of every 10 ms with ShortPeriods, as the hierarchy the group
// was created or opened from had it then); cpus ≤ 0 removes the limit.
func (g *Group) SetQuota(cpus float64) error {
	period := g.h.Period(cpus).Microseconds()
	quota := int64(-1)
	if cpus > 0 {
		// The kernel's smallest quota is 1 ms.
		quota = max(1000, int64(cpus*float64(period)+0.5))
	}
	var err error
	if g.h.V2 {
		v := "max"
		if quota > 0 {
			v = strconv.FormatInt(quota, 10)
		}
		err = os.WriteFile(filepath.Join(g.cpuDir(), "cpu.max"), []byte(fmt.Sprintf("%s %d", v, period)), 0)
	} else {
		// Unlimited first: a shorter period under the old quota could
		// briefly ask more than an ancestor's quota allows (EINVAL).
		dir := g.cpuDir()
		err = os.WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), []byte("-1"), 0)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), []byte(strconv.FormatInt(period, 10)), 0)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), []byte(strconv.FormatInt(quota, 10)), 0)
		}
	}
	if err != nil {
		return fmt.Errorf("cgroup: set quota of %s: %w", g.Path, err)
	}
	g.cpus = max(cpus, 0)
	return nil
}

// Quota reads the group's quota in CPUs; 0 means none.
func (g *Group) Quota() (float64, error) {
	q, p, err := g.limits()
	if err != nil || q <= 0 || p <= 0 {
		return 0, err
	}
	return float64(q) / float64(p), nil
}

// Period reads the group's quota period from the kernel.
func (g *Group) Period() (time.Duration, error) {
	_, p, err := g.limits()
	return time.Duration(p) * time.Microsecond, err
}

// limits reads the group's quota and period from the kernel, in
// microseconds; a quota ≤ 0 means none (v2's "max", v1's -1).
func (g *Group) limits() (quota, period int64, err error) {
	if g.h.V2 {
		b, err := os.ReadFile(filepath.Join(g.cpuDir(), "cpu.max"))
		if err != nil {
			return 0, 0, err
		}
		f := strings.Fields(string(b))
		if len(f) != 2 {
			return 0, 0, fmt.Errorf("cgroup: cpu.max of %s: %q", g.Path, b)
		}
		if period, err = strconv.ParseInt(f[1], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("cgroup: cpu.max of %s: %w", g.Path, err)
		}
		if f[0] == "max" {
			return -1, period, nil
		}
		quota, err = strconv.ParseInt(f[0], 10, 64)
		return quota, period, err
	}
	if quota, err = readInt(filepath.Join(g.cpuDir(), "cpu.cfs_quota_us")); err != nil {
		return 0, 0, err
	}
	period, err = readInt(filepath.Join(g.cpuDir(), "cpu.cfs_period_us"))
	return quota, period, err
}

// CPUs is the quota the group was given by SetQuota (0: none).
func (g *Group) CPUs() float64 { return g.cpus }

// Add moves a process (all its threads) into the group.
func (g *Group) Add(pid int) error {
	for _, d := range g.Dirs() {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("cgroup: move %d into %s: %w", pid, g.Path, err)
		}
	}
	return nil
}

// JoinScript is a shell prologue that moves the shell into the group; a
// command run as `sh -c JoinScript+"exec \"$@\"" sh CMD ARGS…` is in the
// group from its first instruction, and so is everything it forks.
func (g *Group) JoinScript() string {
	var b strings.Builder
	for _, d := range g.Dirs() {
		fmt.Fprintf(&b, "echo $$ > \"%s/cgroup.procs\" || exit 125; ", d)
	}
	return b.String()
}

// Wrap returns the argv that runs argv inside the group (see JoinScript).
func (g *Group) Wrap(argv ...string) []string {
	return append([]string{"/bin/sh", "-c", g.JoinScript() + `exec "$@"`, "sh"}, argv...)
}

// Procs lists the processes in the group.
func (g *Group) Procs() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(g.cpuDir(), "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, l := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(l); err == nil {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// Usage is the CPU time the group's processes have used since it was made
// (cpuacct.usage on v1, cpu.stat's usage_usec on v2).
func (g *Group) Usage() (time.Duration, error) {
	if g.h.V2 {
		b, err := os.ReadFile(filepath.Join(g.cpuDir(), "cpu.stat"))
		if err != nil {
			return 0, err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == "usage_usec" {
				us, err := strconv.ParseInt(f[1], 10, 64)
				return time.Duration(us) * time.Microsecond, err
			}
		}
		return 0, errors.New("cgroup: no usage_usec in cpu.stat")
	}
	ns, err := readInt(filepath.Join(g.acctDir(), "cpuacct.usage"))
	return time.Duration(ns), err
}

// Throttled is how often the kernel stopped the group for having used
// its quota, and for how long in all (cpu.stat's nr_throttled and
// throttled_time / throttled_usec).
func (g *Group) Throttled() (periods int64, total time.Duration) {
	b, err := os.ReadFile(filepath.Join(g.cpuDir(), "cpu.stat"))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "nr_throttled":
			periods = v
		case "throttled_time": // v1, ns
			total = time.Duration(v)
		case "throttled_usec": // v2
			total = time.Duration(v) * time.Microsecond
		}
	}
	return periods, total
}

// Kill sends SIGKILL to every process in the group, until none is left
// or limit passes.
func (g *Group) Kill(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		pids, err := g.Procs()
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup: %d process(es) still in %s after SIGKILL", len(pids), g.Path)
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Remove kills what is left in the group and in its children, then
// removes their directories, children first. A group already gone is not
// an error.
func (g *Group) Remove() error {
	var errs []error
	for _, root := range g.h.roots() {
		dir := filepath.Join(root, g.Path)
		var dirs []string
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			rel, _ := filepath.Rel(root, dirs[i])
			sub := &Group{h: Hierarchy{V2: g.h.V2, CPU: root, Acct: root}, Path: rel}
			if err := sub.Kill(5 * time.Second); err != nil {
				errs = append(errs, err)
			}
			var err error
			for range 50 { // an exiting process may hold the group a moment
				if err = syscall.Rmdir(dirs[i]); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("cgroup: rmdir %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// Exists reports whether the group's directory is there.
func (g *Group) Exists() bool {
	_, err := os.Stat(g.cpuDir())
	return err == nil
}

// Self is the group this process is in, in h's cpu hierarchy.
func (h Hierarchy) Self() (*Group, error) { return h.groupOf(os.Getpid()) }

func (h Hierarchy) groupOf(pid int) (*Group, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		if h.V2 && f[0] == "0" && f[1] == "" {
			return &Group{h: h, Path: strings.Trim(f[2], "/")}, nil
		}
		if !h.V2 {
			for _, c := range strings.Split(f[1], ",") {
				if c == "cpu" {
					return &Group{h: h, Path: strings.Trim(f[2], "/")}, nil
				}
			}
		}
	}
	return nil, errors.New("cgroup: this process's cpu group not found in /proc/self/cgroup")
}

// MachineCPUs is how many CPUs this process can use: the cores it may run
// on, or less where its own group (or a parent's) has a quota.
func MachineCPUs() float64 {
	n := float64(runtime.NumCPU())
	h, err := Detect()
	if err != nil {
		return n
	}
	self, err := h.Self()
	if err != nil {
		return n
	}
	for p := self.Path; ; p = filepath.Dir(p) {
		if p == "." || p == "/" {
			p = ""
		}
		if q, err := h.Open(p).Quota(); err == nil && q > 0 && q < n {
			n = q
		}
		if p == "" {
			return n
		}
	}
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// ProcCPU is a process's CPU time so far, user and system, from
// /proc/PID/stat (children that have exited and been waited for
// included): the measure where no cpuacct controller is mounted.
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("cgroup: bad /proc stat")
	}
	f := strings.Fields(s[i+1:])
	// After the command: state(0) ... utime(11) stime(12) cutime(13) cstime(14).
	if len(f) < 15 {
		return 0, errors.New("cgroup: short /proc stat")
	}
	var ticks int64
	for _, k := range []int{11, 12, 13, 14} {
		v, _ := strconv.ParseInt(f[k], 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// clockTicks is USER_HZ, 100 on every Linux the project runs on.
const clockTicks = 100

// StartTime is a process's start time in clock ticks since boot, from
// /proc/PID/stat: with the pid, it names a process even after the pid is
// reused.
func StartTime(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	if i < 0 || len(f) < 20 {
		return 0, errors.New("cgroup: short /proc stat")
	}
	return strconv.ParseInt(f[19], 10, 64)
}
