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
// PostgreSQL server processes on this machine, with the time of the
// children they have reaped: the database's side of a benchmark whose
// database runs here. With postmaster > 0 only that server counts (the
// postmaster and its children), not another server on the same machine;
// with 0, every process named "postgres". A backend that exits moves its
// time to the postmaster's children's time when the postmaster reaps it,
// so the sum only grows (a backend that ended but is not yet reaped is
// missing for that moment). ok is false when no such process is visible.
func postgresCPU(postmaster int) (cpu time.Duration, ok bool) {
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
		// Fields 14 to 17: utime, stime, and the reaped children's
		// cutime and cstime.
		f := bytes.Fields(b[end+1:])
		if len(f) < 15 {
			continue
		}
		if postmaster > 0 {
			pid, _ := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
			ppid, _ := strconv.Atoi(string(f[1]))
			if pid != postmaster && ppid != postmaster {
				continue
			}
		}
		var sum uint64
		var bad bool
		for _, x := range f[11:15] {
			v, err := strconv.ParseUint(string(x), 10, 64)
			bad = bad || err != nil
			sum += v
		}
		if bad {
			continue
		}
		ticks += sum
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

// parentPID is the parent of a process on this machine (0 if it is not
// visible): a PostgreSQL backend's is its server's postmaster.
func parentPID(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return 0
	}
	f := bytes.Fields(b[end+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(string(f[1]))
	return ppid
}
