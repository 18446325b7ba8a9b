package stats

import (
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	var samples []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		samples = append(samples, time.Duration(i)*time.Millisecond)
	}
	s := Sort(samples)
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.1, time.Millisecond}} {
		if got := s.Percentile(c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if samples[0] != 100*time.Millisecond {
		t.Fatal("Sort changed its input")
	}
	sum := Summarize(samples)
	if sum.P50 != 50 || sum.P75 != 75 || sum.P95 != 95 || sum.P99 != 99 || sum.Max != 100 {
		t.Fatalf("summary %+v", sum)
	}
	if (Summary{}) != Summarize(nil) || Sort(nil).Max() != 0 {
		t.Fatal("no samples must summarise to zeros")
	}
	if MS(1234567*time.Nanosecond) != 1.235 {
		t.Fatalf("MS rounds to the microsecond: %v", MS(1234567*time.Nanosecond))
	}
}

func TestBuckets(t *testing.T) {
	samples := []Timed{
		{At: 100 * time.Millisecond, Latency: time.Millisecond},
		{At: 900 * time.Millisecond, Latency: 3 * time.Millisecond},
		{At: 2500 * time.Millisecond, Latency: 5 * time.Millisecond, Failed: true},
		{At: 2500 * time.Millisecond, Latency: 7 * time.Millisecond},
	}
	b := Buckets(samples, time.Second)
	if len(b) != 3 {
		t.Fatalf("%d buckets, want 3 (the empty second included)", len(b))
	}
	if b[0].Rate != 2 || b[0].P99 != 3 || b[1].Rate != 0 || b[1].Max != 0 {
		t.Fatalf("buckets %+v", b)
	}
	if b[2].Rate != 1 || b[2].Failures != 1 || b[2].Max != 7 || b[2].Start != 2*time.Second {
		t.Fatalf("last bucket %+v", b[2])
	}
}
