// Package stats summarises latency samples for the benchmarks and load
// tests: exact percentiles over every recorded sample (nearest rank), and
// the same per time bucket for charts.
//
// Exact percentiles need every sample kept and sorted once. At the sample
// counts these tools record (a few million at most) that costs far less
// than the runs that produce them, and it gives the true p99 of what was
// measured rather than a histogram's bucket bound; so no histogram
// library is used.
package stats

import (
	"slices"
	"time"
)

// Sorted is a sorted copy of latency samples.
type Sorted []time.Duration

// Sort returns the samples sorted, leaving samples as they were.
func Sort(samples []time.Duration) Sorted {
	s := slices.Clone(samples)
	slices.Sort(s)
	return s
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100):
// the smallest sample that at least p % of the samples do not exceed.
// It is 0 without samples.
func (s Sorted) Percentile(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Max returns the largest sample, 0 without samples.
func (s Sorted) Max() time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1]
}

// Summary is the latency columns of the result tables, in milliseconds.
type Summary struct {
	P50 float64 `json:"p50_ms"`
	P75 float64 `json:"p75_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// Summarize sorts samples once and reads the table's percentiles, rounded
// to the microsecond.
func Summarize(samples []time.Duration) Summary {
	s := Sort(samples)
	return Summary{
		P50: MS(s.Percentile(50)), P75: MS(s.Percentile(75)), P95: MS(s.Percentile(95)),
		P99: MS(s.Percentile(99)), Max: MS(s.Max()),
	}
}

// MS is d in milliseconds, rounded to the microsecond.
func MS(d time.Duration) float64 { return Round(float64(d.Nanoseconds())/1e6, 3) }

// Round rounds v to digits decimal places.
func Round(v float64, digits int) float64 {
	p := 1.0
	for range digits {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}

// Timed is one sample and when it ended, counted from the run's start.
type Timed struct {
	At      time.Duration
	Latency time.Duration
	Failed  bool
}

// Bucket is the samples that ended within one interval of a run.
type Bucket struct {
	Start    time.Duration // the interval's start, from the run's start
	Rate     float64       // samples that did not fail, per second
	Failures int
	Summary
}

// Buckets groups samples by the interval of width their At falls in, from
// 0 to the last sample, and summarises each; intervals without samples
// are present with a zero Rate. Every rate is over the whole width, the
// last interval's too, though the run may have ended within it.
func Buckets(samples []Timed, width time.Duration) []Bucket {
	if len(samples) == 0 || width <= 0 {
		return nil
	}
	end := time.Duration(0)
	for _, s := range samples {
		end = max(end, s.At)
	}
	n := int(end/width) + 1
	lat := make([][]time.Duration, n)
	ok := make([]int, n)
	failed := make([]int, n)
	for _, s := range samples {
		i := int(s.At / width)
		lat[i] = append(lat[i], s.Latency)
		if s.Failed {
			failed[i]++
		} else {
			ok[i]++
		}
	}
	out := make([]Bucket, n)
	for i := range out {
		out[i] = Bucket{
			Start:    time.Duration(i) * width,
			Rate:     float64(ok[i]) / width.Seconds(),
			Failures: failed[i],
			Summary:  Summarize(lat[i]),
		}
	}
	return out
}
