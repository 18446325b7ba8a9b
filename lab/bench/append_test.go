package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/lab/bench"
)

// TestAppendIDs: by default the writers' ids are eventstore.NewID's
// (version 7, time-ordered); with RandomIDs they are not.
func TestAppendIDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, random := range []bool{false, true} {
		s, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		cfg := bench.AppendConfig{Events: 200, Batch: 10, Writers: 2, Payload: 10, Streams: 4, RandomIDs: random}
		r, err := bench.RunAppend(ctx, s, cfg, nil)
		if err != nil || r.Events != 200 {
			t.Fatalf("random %v: %+v, %v", random, r, err)
		}
		evs, err := s.ReadAll(ctx, 0, 1000)
		if err != nil || len(evs) != 200 {
			t.Fatalf("random %v: read %d events, %v", random, len(evs), err)
		}
		v7 := 0
		for _, ev := range evs {
			if ev.ID[6]>>4 == 7 && ev.ID[8]>>6 == 2 {
				v7++
			}
		}
		// A random id has the version 7 layout by chance once in 64.
		if want := !random; (v7 == len(evs)) != want {
			t.Fatalf("random %v: %d of %d ids in the version 7 layout", random, v7, len(evs))
		}
		_ = s.Close()
	}
}

// TestFsyncBound: the probe measures real synced writes, and the bound is
// one batch per fdatasync for one writer, none for several.
func TestFsyncBound(t *testing.T) {
	p, err := bench.MeasureFsync(t.TempDir(), 20)
	if err != nil || p.Samples != 20 || p.MedianMS <= 0 || p.P99MS < p.MedianMS {
		t.Fatalf("probe %+v, %v", p, err)
	}
	if p.Bytes != 4096 {
		t.Fatalf("probe of %d bytes, want 4 KiB", p.Bytes)
	}
	big, err := bench.MeasureSyncedWrites(t.TempDir(), 20, 20000, false)
	if err != nil || big.Bytes != 20000 || big.MedianMS <= 0 || big.Growing {
		t.Fatalf("probe %+v, %v", big, err)
	}
	grow, err := bench.MeasureSyncedWrites(t.TempDir(), 20, 4096, true)
	if err != nil || !grow.Growing || grow.MedianMS <= 0 {
		t.Fatalf("growing probe %+v, %v", grow, err)
	}
	batch := &bench.FsyncProbe{Bytes: 15000, MedianMS: 0.25}
	r := bench.AppendResult{Writers: 1, Batch: 100, EventsPerSec: 250_000}.WithFsyncBound(bench.FsyncProbe{MedianMS: 0.2}, batch)
	if r.FsyncBoundEventsPerSec == nil || *r.FsyncBoundEventsPerSec != 500_000 || *r.RatioToFsyncBound != 0.5 {
		t.Fatalf("one writer: %+v", r)
	}
	if r.BatchFsyncBoundEventsPerSec == nil || *r.BatchFsyncBoundEventsPerSec != 400_000 || *r.RatioToBatchFsyncBound != 0.625 || *r.BatchBytes != 15000 {
		t.Fatalf("one writer, the batch's own bytes: %+v", r)
	}
	r = bench.AppendResult{Writers: 8, Batch: 100, EventsPerSec: 250_000}.WithFsyncBound(bench.FsyncProbe{MedianMS: 0.2}, batch)
	if r.FsyncMS == nil || r.RatioToFsyncBound != nil || r.FsyncBatchMS == nil || r.RatioToBatchFsyncBound != nil {
		t.Fatalf("eight writers: %+v", r)
	}
	if _, err := bench.MeasureFsync(t.TempDir(), 0); err == nil {
		t.Fatal("zero samples accepted")
	}
	if _, err := bench.MeasureSyncedWrites(t.TempDir(), 5, 0, false); err == nil {
		t.Fatal("empty writes accepted")
	}
}
