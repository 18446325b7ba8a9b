package cgroup

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// Part is one process (or group of processes) of a plan and its CPU
// quota.
type Part struct {
	Name string  // e.g. writer-1
	Kind string  // node, replica, store, proxy, loadgen
	CPUs float64 // its quota; 0: none
	// Given: the process was not started here (a store given by URL), so
	// its quota cannot be set; it counts in the plan for what it was said
	// to have.
	Given bool
}

// Plan is the CPU budget of every part of a run on one machine.
type Plan struct {
	Parts   []Part
	Machine float64 // CPUs the machine has (MachineCPUs)
}

// Total is the sum of the quotas.
func (p Plan) Total() float64 {
	var t float64
	for _, x := range p.Parts {
		t += x.CPUs
	}
	return t
}

// Check refuses a plan whose quotas add up to more than the machine has,
// unless oversubscribe: then the parts would not each have what their
// quota promises, and a measured bottleneck could be the machine's.
func (p Plan) Check(oversubscribe bool) error {
	for _, x := range p.Parts {
		if x.CPUs < 0 {
			return fmt.Errorf("%s: a CPU quota cannot be negative (%g)", x.Name, x.CPUs)
		}
		if x.CPUs > 0 && x.CPUs < 0.01 {
			return fmt.Errorf("%s: a CPU quota below 0.01 CPUs (%g) is below the kernel's 1 ms per period", x.Name, x.CPUs)
		}
	}
	if t := p.Total(); t > p.Machine+1e-9 && !oversubscribe {
		return fmt.Errorf("the CPU quotas add up to %.2f CPUs but this machine has %.2f: %s; lower them, or pass --oversubscribe to run anyway (the parts then compete for the cores and do not each get their quota)",
			t, p.Machine, p.summary())
	}
	return nil
}

// summary lists the quotas by kind: "3 node × 0.50 + store 1.00".
func (p Plan) summary() string {
	type k struct {
		kind string
		cpus float64
	}
	var order []k
	count := map[k]int{}
	for _, x := range p.Parts {
		if x.CPUs == 0 {
			continue
		}
		key := k{x.Kind, x.CPUs}
		if count[key] == 0 {
			order = append(order, key)
		}
		count[key]++
	}
	var s []string
	for _, key := range order {
		if n := count[key]; n > 1 {
			s = append(s, fmt.Sprintf("%d %s × %.2f", n, key.kind, key.cpus))
		} else {
			s = append(s, fmt.Sprintf("%s %.2f", key.kind, key.cpus))
		}
	}
	return strings.Join(s, " + ")
}

// Lines describe each part's share of the machine, for the output.
func (p Plan) Lines() []string {
	var out []string
	for _, x := range p.Parts {
		switch {
		case x.CPUs == 0:
			out = append(out, fmt.Sprintf("%-12s %-8s no quota (shares the %.2f CPUs with everything else)", x.Name, x.Kind, p.Machine))
		case x.Given:
			out = append(out, fmt.Sprintf("%-12s %-8s %.2f CPUs planned (%.1f%% of the machine), not enforced: not started here", x.Name, x.Kind, x.CPUs, 100*x.CPUs/p.Machine))
		default:
			out = append(out, fmt.Sprintf("%-12s %-8s %.2f CPUs (%.1f%% of the machine's %.2f)", x.Name, x.Kind, x.CPUs, 100*x.CPUs/p.Machine, p.Machine))
		}
	}
	out = append(out, fmt.Sprintf("%-12s %-8s %.2f of %.2f CPUs (%.1f%%)", "total", "", p.Total(), p.Machine, 100*p.Total()/p.Machine))
	return out
}

// GoProcs is the GOMAXPROCS for a Go process on a quota of cpus: the
// whole CPUs of its quota, at least one. Go's own default on a quota
// (since Go 1.25) is never below two, and two processors on a tenth of
// a CPU spend the quota on each other (their threads spin looking for
// work, the system monitor wakes more often): docs/benchmarks.md,
// "PostgreSQL given room", has the write-scaling runs with and without.
func GoProcs(cpus float64) int { return max(1, int(cpus)) }

// GoEnv adds to env, the extra environment of a Go process started on a
// quota of cpus, what runs Go well on a fraction of a CPU:
//   - GOMAXPROCS=GoProcs(cpus), unless env or this process's environment
//     sets GOMAXPROCS;
//   - schedtrace=MaxSchedtrace in GODEBUG, unless GODEBUG sets
//     schedtrace. Go's system monitor sleeps deeply while every
//     processor is idle, and each time one wakes it polls every 20 µs for
//     a millisecond before backing off again: a process that idles and
//     wakes hundreds of times a second, as a server on a tenth of a CPU
//     does, spent 12 % of its quota there (docs/benchmarks.md, "The
//     system monitor on a tenth of a CPU"). With a schedtrace interval
//     set, the monitor never sleeps deeply and backs off to one wake-up
//     every 10 ms; the interval is the longest GODEBUG takes (24.8
//     days), so the trace it enables is a line on standard error at
//     most that often.
func GoEnv(env []string, cpus float64) []string {
	if cpus <= 0 {
		return env
	}
	if os.Getenv("GOMAXPROCS") == "" && lookup(env, "GOMAXPROCS") == "" {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(GoProcs(cpus)))
	}
	debug := lookup(env, "GODEBUG")
	if debug == "" {
		debug = os.Getenv("GODEBUG")
	}
	if !strings.Contains(debug, "schedtrace=") {
		if debug != "" {
			debug += ","
		}
		env = append(env, "GODEBUG="+debug+"schedtrace="+strconv.Itoa(MaxSchedtrace))
	}
	return env
}

// MaxSchedtrace is the longest schedtrace interval GODEBUG takes, in
// milliseconds (an int32).
const MaxSchedtrace = math.MaxInt32

// lookup returns the last value of key in env, "" if none.
func lookup(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}
