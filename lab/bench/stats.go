// Package bench holds the workload generators behind `logbook bench …`:
// each runs a workload against a store and returns a result that prints
// as a table for people or as JSON for machines.
package bench

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// PeakRSSMB reads the process's peak resident set (VmHWM) from /proc, in
// MiB; 0 where /proc is not available.
func PeakRSSMB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("VmHWM:")) {
			continue
		}
		fields := bytes.Fields(line[len("VmHWM:"):])
		if len(fields) == 0 {
			return 0
		}
		kb, err := strconv.ParseFloat(string(fields[0]), 64)
		if err != nil {
			return 0
		}
		return kb / 1024
	}
	return 0
}
