package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// clockTicks is the kernel's unit of the CPU times in /proc/PID/stat
// (USER_HZ), 100 on every Linux platform Go supports.
const clockTicks = 100

// postgresCPU is the CPU time, user and system, used so far by the
// PostgreSQL server processes on this machine (every process named
// "postgres"): the database's side of a benchmark whose database runs
// here. A backend that exits between two readings takes its time with
// it, so the difference of two readings is a lower bound. ok is false
// when no such process is visible.
func postgresCPU() (cpu time.Duration, ok bool) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks uint64
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone since the glob
		}
		// pid (comm) state ppid … utime is field 14, stime 15; comm may
		// hold spaces and parentheses, so split after its last ')'.
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || end < open || string(b[open+1:end]) != "postgres" {
			continue
		}
		f := bytes.Fields(b[end+1:])
		if len(f) < 13 {
			continue
		}
		u, err1 := strconv.ParseUint(string(f[11]), 10, 64)
		s, err2 := strconv.ParseUint(string(f[12]), 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		ticks += u + s
		ok = true
	}
	return time.Duration(ticks) * time.Second / clockTicks, ok
}

// cpuPercent is cpu over wall as a percentage of the whole machine (all
// its cores), as the post's CPU column reads.
func cpuPercent(cpu, wall time.Duration, cores int) float64 {
	if wall <= 0 || cores <= 0 {
		return 0
	}
	return 100 * cpu.Seconds() / wall.Seconds() / float64(cores)
}
