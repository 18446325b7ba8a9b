package pebblestore_test

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

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
