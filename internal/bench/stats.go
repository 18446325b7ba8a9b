// Package bench holds the workload generators behind `logbook bench …`:
// each runs a workload against a store and returns a result that prints
// as a table for people or as JSON for machines.
package bench

import (
	"bufio"
	"bytes"
	"os"
	"slices"
	"strconv"
	"time"
)

// Latencies collects call durations; percentiles are exact (sorted), which
// at a few million samples costs less than the runs they measure.
type Latencies []time.Duration

// Percentile returns the p-th percentile (0 < p <= 100) in milliseconds.
func (l Latencies) Percentile(p float64) float64 {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	i = max(0, min(i, len(s)-1))
	return ms(s[i])
}

// Summary returns p50, p99 and max in milliseconds with one sort.
func (l Latencies) Summary() (p50, p99, maxMS float64) {
	if len(l) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	at := func(p float64) float64 {
		i := int(float64(len(s))*p/100+0.5) - 1
		return ms(s[max(0, min(i, len(s)-1))])
	}
	return at(50), at(99), ms(s[len(s)-1])
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

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

func round(v float64, digits int) float64 {
	p := 1.0
	for range digits {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}
