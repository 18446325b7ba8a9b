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
// measured the way a log commits: a write of Bytes, then fdatasync, n
// times, each write after the last.
type FsyncProbe struct {
	Samples  int     `json:"samples"`
	Bytes    int     `json:"bytes"`
	MedianMS float64 `json:"median_ms"`
	P99MS    float64 `json:"p99_ms"`
	// Growing: each write extended the file (else it overwrote blocks
	// already written and synced).
	Growing bool `json:"growing,omitempty"`
}

// MeasureFsync times n synced 4 KiB writes in dir (MeasureSyncedWrites),
// into a prepared file.
func MeasureFsync(dir string, n int) (FsyncProbe, error) {
	return MeasureSyncedWrites(dir, n, 4096, false)
}

// MeasureSyncedWrites writes n blocks of size bytes one after another to
// a scratch file in dir, each followed by fdatasync, and returns the
// latencies' median and 99th percentile. The file is removed afterwards.
//
// Unless growing, the file is first filled with as many bytes, synced:
// the writes then overwrite written blocks, as a log in a reused or
// prepared file does (the embedded store's logs, pebblekit.SpareWALs),
// and fdatasync has no file system metadata to commit. That is the
// fastest synced write of a log, the machine's limit. Growing, each
// write extends the file, and on ext4 each fdatasync also commits the
// journal.
func MeasureSyncedWrites(dir string, n, size int, growing bool) (FsyncProbe, error) {
	if n <= 0 || size <= 0 {
		return FsyncProbe{}, fmt.Errorf("fsync probe: %d samples of %d bytes", n, size)
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
	if !growing {
		if err := prepareFile(f, int64(n)*int64(size)); err != nil {
			return FsyncProbe{}, fmt.Errorf("fsync probe: %w", err)
		}
	}
	block := make([]byte, size)
	for i := range block {
		block[i] = byte(i)
	}
	lat := make([]time.Duration, n)
	for i := range lat {
		t0 := time.Now()
		if _, err := f.WriteAt(block, int64(i)*int64(size)); err != nil {
			return FsyncProbe{}, fmt.Errorf("fsync probe: %w", err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return FsyncProbe{}, fmt.Errorf("fsync probe: fdatasync: %w", err)
		}
		lat[i] = time.Since(t0)
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return stats.Round(float64(d)/float64(time.Millisecond), 4) }
	return FsyncProbe{Samples: n, Bytes: size, MedianMS: ms(lat[n/2]), P99MS: ms(lat[min(n-1, n*99/100)]), Growing: growing}, nil
}

// WithFsyncBound adds the synced-write latency measured in the same run
// and, for one writer, the bound it puts on a synchronous appender — one
// batch per fdatasync — and the ratio of the measured rate to it. With
// several writers a store may commit many appends in one fdatasync (group
// commit), so no such bound holds and only the latency is reported.
//
// p is the 4 KiB probe. batch, if not nil, is a probe whose writes are
// one append's own bytes in the store's log: the same bound and ratio
// from it say how close the store comes to writing and syncing exactly
// what it must, where the 4 KiB bound also counts the cost of the bytes.
func (r AppendResult) WithFsyncBound(p FsyncProbe, batch *FsyncProbe) AppendResult {
	ms := p.MedianMS
	r.FsyncMS = &ms
	r.FsyncBoundEventsPerSec, r.RatioToFsyncBound = r.syncBound(ms)
	if batch != nil {
		bytes, bms := batch.Bytes, batch.MedianMS
		r.BatchBytes, r.FsyncBatchMS = &bytes, &bms
		r.BatchFsyncBoundEventsPerSec, r.RatioToBatchFsyncBound = r.syncBound(bms)
	}
	return r
}

// syncBound is one writer's bound, one batch per synced write of ms, and
// the measured rate over it; nil for several writers.
func (r AppendResult) syncBound(ms float64) (bound, ratio *float64) {
	if r.Writers != 1 || ms <= 0 {
		return nil, nil
	}
	b := stats.Round(float64(r.Batch)/(ms/1000), 0)
	q := stats.Round(r.EventsPerSec/b, 3)
	return &b, &q
}

// prepareFile writes size bytes of zeros to f and syncs them, so that
// later synced writes into them change data and no file metadata, as a
// log that reuses its files does.
func prepareFile(f *os.File, size int64) error {
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(size-off, int64(len(zeros)))], off); err != nil {
			return err
		}
	}
	return f.Sync()
}
