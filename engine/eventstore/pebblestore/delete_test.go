package pebblestore_test

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
)

// A removed position is never handed out again, even when the removed
// events were the last of the log and the store restarts after the sweep
// reclaimed them; the tombstone and the soft delete survive the restart.
func TestRemovedPositionsSurviveRestart(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	opts := pebblestore.Options{SweepInterval: -1}
	s, err := pebblestore.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	mustAppendN(t, s, "a", 3)
	mustAppendN(t, s, "b", 2) // positions 4, 5: the tail
	if err := s.DeleteStream(ctx, "a", eventstore.DeleteHard); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteStream(ctx, "b", eventstore.DeleteSoft); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Sweep(ctx); err != nil || st.Removed != 5 || st.Pending != 0 {
		t.Fatalf("Sweep = %+v, %v; want 5 removed, none pending", st, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = pebblestore.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if h, _ := s.Head(ctx); h != 5 {
		t.Fatalf("head after restart = %d, want 5", h)
	}
	res, err := s.Append(ctx, "c", eventstore.NoStream, []eventstore.NewEvent{{Type: "C"}})
	if err != nil || res.FirstPosition != 6 {
		t.Fatalf("append after restart at %d (%v), want 6: a removed position was reused", res.FirstPosition, err)
	}
	if _, err := s.Append(ctx, "a", eventstore.Any, []eventstore.NewEvent{{Type: "A"}}); !errors.Is(err, eventstore.ErrStreamTombstoned) {
		t.Fatalf("append to the hard-deleted stream after restart: %v", err)
	}
	if _, err := s.ReadStream(ctx, "b", 1, 10); !errors.Is(err, eventstore.ErrStreamDeleted) {
		t.Fatalf("read of the soft-deleted stream after restart: %v", err)
	}
	if v, _ := s.StreamVersion(ctx, "b"); v != 2 {
		t.Fatalf("version of the soft-deleted stream after restart = %d, want 2", v)
	}
	res, err = s.Append(ctx, "b", eventstore.Exactly(2), []eventstore.NewEvent{{Type: "B"}})
	if err != nil || res.FirstSeq != 3 {
		t.Fatalf("recreating b after restart: %+v, %v", res, err)
	}
}

// The sweep gives the disk space back.
func TestSweepShrinksDisk(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, err := pebblestore.Open(dir, pebblestore.Options{NoSync: true, SweepInterval: -1, MemTableBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := make([]byte, 8<<10)
	for i := range 40 {
		var batch []eventstore.NewEvent
		for range 100 {
			b := make([]byte, len(data))
			_, _ = rand.Read(b) // incompressible
			batch = append(batch, eventstore.NewEvent{Type: "Blob", Data: b, Tags: []string{"blob"}})
		}
		if _, err := s.Append(ctx, fmt.Sprintf("s-%02d", i), eventstore.NoStream, batch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Sweep(ctx); err != nil { // nothing to remove yet
		t.Fatal(err)
	}
	before := dirSize(t, dir)
	for i := range 40 {
		if i%10 == 0 {
			continue // keep a tenth
		}
		mode := eventstore.DeleteSoft
		if i%2 == 0 {
			mode = eventstore.DeleteHard
		}
		if err := s.DeleteStream(ctx, fmt.Sprintf("s-%02d", i), mode); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.Sweep(ctx)
	if err != nil || st.Removed != 3600 {
		t.Fatalf("Sweep = %+v, %v; want 3600 removed", st, err)
	}
	// Pebble deletes obsolete files in the background, at a pace.
	after := dirSize(t, dir)
	for deadline := time.Now().Add(20 * time.Second); after > before/2 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		after = dirSize(t, dir)
	}
	t.Logf("data directory: %d MiB before, %d MiB after removing 90%% of the events", before>>20, after>>20)
	if after > before/2 {
		t.Fatalf("data directory of %d bytes after the sweep, %d before: the space was not given back", after, before)
	}
	if evs, err := s.ReadTag(ctx, "blob", 1, 10_000); err != nil || len(evs) != 400 {
		t.Fatalf("ReadTag after the sweep: %d events, %v; want 400", len(evs), err)
	}
}

// The sweep keeps to its rate, and Close stops it mid-pass.
func TestSweepRateAndClose(t *testing.T) {
	ctx := t.Context()
	s, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true, SweepInterval: -1, SweepBatch: 50, SweepRate: 1000})
	if err != nil {
		t.Fatal(err)
	}
	mustAppendN(t, s, "a", 400)
	if err := s.DeleteStream(ctx, "a", eventstore.DeleteSoft); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("400 events removed at 1000/s in %v: the rate is not kept", d)
	}

	mustAppendN(t, s, "b", 5000)
	if err := s.DeleteStream(ctx, "b", eventstore.DeleteSoft); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.Sweep(ctx); done <- err }()
	time.Sleep(100 * time.Millisecond)
	start = time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close waited %v for a sweep", d)
	}
	if err := <-done; !errors.Is(err, eventstore.ErrClosed) {
		t.Fatalf("a sweep cut short by Close returned %v, want ErrClosed", err)
	}
}

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustAppendN(t *testing.T, s *pebblestore.Store, stream string, n int) {
	t.Helper()
	for n > 0 {
		k := min(n, 1000)
		batch := make([]eventstore.NewEvent, k)
		for i := range batch {
			batch[i] = eventstore.NewEvent{Type: "E", Data: []byte("x")}
		}
		if _, err := s.Append(t.Context(), stream, eventstore.Any, batch); err != nil {
			t.Fatal(err)
		}
		n -= k
	}
}

// ioCounter counts the bytes read from and written to the store's table
// files (.sst): the I/O of flushes and compactions.
type ioCounter struct {
	vfs.FS
	n atomic.Int64
}

func (c *ioCounter) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := c.FS.Create(name, cat)
	return c.wrap(name, f, err)
}

func (c *ioCounter) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := c.FS.Open(name, opts...)
	return c.wrap(name, f, err)
}

func (c *ioCounter) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	return &countedFile{File: f, n: &c.n}, nil
}

type countedFile struct {
	vfs.File
	n *atomic.Int64
}

func (f *countedFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.n.Add(int64(n))
	return n, err
}

func (f *countedFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.n.Add(int64(n))
	return n, err
}

func (f *countedFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.n.Add(int64(n))
	return n, err
}

// A sweep whose removals are spread over the whole log keeps the table
// I/O of its compactions (as the file system counts it) within
// SweepCompactRate bytes a second on average, and still gives the space
// back.
func TestSweepCompactionKeepsByteBudget(t *testing.T) {
	const rate = 4 << 20 // bytes a second
	ctx := t.Context()
	dir := t.TempDir()
	io := &ioCounter{FS: vfs.Default}
	s, err := pebblestore.Open(dir, pebblestore.Options{NoSync: true, SweepInterval: -1, MemTableBytes: 1 << 20,
		SweepBatch: 10_000, SweepRate: 1_000_000, SweepCompactRate: rate, FS: io})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// 24 MiB of incompressible events, the streams interleaved so that
	// every file of the log holds events of every stream.
	const streams, rounds, each = 8, 60, 6
	for r := range rounds {
		for i := range streams {
			var batch []eventstore.NewEvent
			for range each {
				b := make([]byte, 8<<10)
				_, _ = rand.Read(b)
				batch = append(batch, eventstore.NewEvent{Type: "Blob", Data: b})
			}
			if _, err := s.Append(ctx, fmt.Sprintf("s-%d", i), eventstore.Exactly(uint64(r*each)), batch); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.Sweep(ctx); err != nil { // nothing to remove yet
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // let background compactions settle
	before := dirSize(t, dir)
	for i := range streams {
		if i%4 != 0 { // remove three quarters, spread over the log
			if err := s.DeleteStream(ctx, fmt.Sprintf("s-%d", i), eventstore.DeleteSoft); err != nil {
				t.Fatal(err)
			}
		}
	}
	type sample struct {
		at time.Duration
		n  int64
	}
	var samples []sample
	done := make(chan error, 1)
	n0, start := io.n.Load(), time.Now()
	go func() { _, err := s.Sweep(ctx); done <- err }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			break wait
		case <-tick.C:
			samples = append(samples, sample{time.Since(start), io.n.Load() - n0})
		}
	}
	total, took := io.n.Load()-n0, time.Since(start)
	samples = append(samples, sample{took, total})
	t.Logf("sweep compactions: %.1f MiB of table I/O in %v (budget %d MiB/s; data %d MiB)",
		float64(total)/(1<<20), took.Round(time.Millisecond), rate>>20, before>>20)
	if total < before/2 {
		t.Fatalf("the sweep moved only %d bytes of a %d-byte log: it compacted little, the test proves nothing", total, before)
	}
	// On average the pass keeps to the rate: it lasts at least half as
	// long as moving its I/O at rate bytes a second takes. The pacing
	// counts Pebble's bytes of the sweep's own compactions; the file
	// system also sees Pebble's background flushes and compactions
	// meanwhile (a CI run measured 8.0 s for 8.7 s at the full rate).
	// Unpaced, the same pass takes a twentieth of the time.
	if min := time.Duration(float64(total) / rate * 0.5 * float64(time.Second)); took < min {
		t.Fatalf("%.1f MiB of table I/O in %v: faster than %d MiB/s allows (%v)", float64(total)/(1<<20), took, rate>>20, min)
	}
	// At no moment is it further ahead than one step: removals spread
	// over the log may have their first step rewrite all of it.
	for _, sm := range samples {
		if allowed := int64(sm.at.Seconds()*rate) + 2*before; sm.n > allowed {
			t.Fatalf("%.1f MiB of table I/O %v into the sweep, over the budget of %.1f MiB", float64(sm.n)/(1<<20), sm.at.Round(time.Millisecond), float64(allowed)/(1<<20))
		}
	}
	after := dirSize(t, dir)
	for deadline := time.Now().Add(20 * time.Second); after > before/2 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		after = dirSize(t, dir)
	}
	t.Logf("data directory: %d MiB before, %d MiB after removing 75%% of the events", before>>20, after>>20)
	if after > before/2 {
		t.Fatalf("data directory of %d bytes after the sweep, %d before: the space was not given back", after, before)
	}
}
