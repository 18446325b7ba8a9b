package bench

import (
	"fmt"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/logbook/logbook/lab/stats"
)

// FsyncProbe is this machine's synced-write latency in a directory,
// measured the way a log commits: a 4 KiB write at the end of a file,
// then fdatasync, n times.
type FsyncProbe struct {
	Samples  int     `json:"samples"`
	MedianMS float64 `json:"median_ms"`
	P99MS    float64 `json:"p99_ms"`
}

// MeasureFsync writes n 4 KiB blocks to a scratch file in dir, each
// followed by fdatasync, and returns the latencies' median and 99th
// percentile. The file is removed afterwards.
func MeasureFsync(dir string, n int) (FsyncProbe, error) {
	if n <= 0 {
		return FsyncProbe{}, fmt.Errorf("fsync probe: %d samples", n)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return FsyncProbe{}, fmt.Errorf("fsync probe: %w", err)
	}
	f, err := os.CreateTemp(dir, "fsync-probe-*")
	if err != nil {
		return FsyncProbe{}, fmt.Errorf("fsync probe: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	block := make([]byte, 4096)
	for i := range block {
		block[i] = byte(i)
	}
	lat := make([]time.Duration, n)
	for i := range lat {
		t0 := time.Now()
		if _, err := f.Write(block); err != nil {
			return FsyncProbe{}, fmt.Errorf("fsync probe: %w", err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return FsyncProbe{}, fmt.Errorf("fsync probe: fdatasync: %w", err)
		}
		lat[i] = time.Since(t0)
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return stats.Round(float64(d)/float64(time.Millisecond), 4) }
	return FsyncProbe{Samples: n, MedianMS: ms(lat[n/2]), P99MS: ms(lat[min(n-1, n*99/100)])}, nil
}

// WithFsyncBound adds the synced-write latency measured in the same run
// and, for one writer, the bound it puts on a synchronous appender — one
// batch per fdatasync — and the ratio of the measured rate to it. With
// several writers a store may commit many appends in one fdatasync (group
// commit), so no such bound holds and only the latency is reported.
func (r AppendResult) WithFsyncBound(p FsyncProbe) AppendResult {
	ms := p.MedianMS
	r.FsyncMS = &ms
	if r.Writers == 1 && ms > 0 {
		bound := stats.Round(float64(r.Batch)/(ms/1000), 0)
		ratio := stats.Round(r.EventsPerSec/bound, 3)
		r.FsyncBoundEventsPerSec, r.RatioToFsyncBound = &bound, &ratio
	}
	return r
}
