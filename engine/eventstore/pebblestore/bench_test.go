package pebblestore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
)

// The hot paths of the embedded store, for comparing two commits with
// benchstat (docs/benchmarking.md). Most run without fsync (NoSync): with
// it the disk's flush time dominates, and the numbers would compare disks
// rather than code. BenchmarkAppendParallel keeps the fsync, since what it
// measures is how appends share one.

func openBench(b *testing.B, opts pebblestore.Options) *pebblestore.Store {
	b.Helper()
	st, err := pebblestore.Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// benchEvents returns n events of 200 bytes with a tag, about the size of
// the services' events.
func benchEvents(n int) []eventstore.NewEvent {
	data := make([]byte, 200)
	for i := range data {
		data[i] = 'a' + byte(i%26)
	}
	evs := make([]eventstore.NewEvent, n)
	for i := range evs {
		evs[i] = eventstore.NewEvent{Type: "BenchEvent", Data: data, Tags: []string{"bench"}}
	}
	return evs
}

// fresh clears the ids Append wrote into evs (it tells the caller the id
// it generated, so that a retry of the same slice is idempotent), to reuse
// the slice for new events.
func fresh(evs []eventstore.NewEvent) []eventstore.NewEvent {
	for i := range evs {
		evs[i].ID = eventstore.ID{}
	}
	return evs
}

// BenchmarkAppend appends to 1,000 streams in turn, one event or a batch
// of 100 per append, one append at a time.
func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			ctx := context.Background()
			st := openBench(b, pebblestore.Options{NoSync: true})
			evs := benchEvents(n)
			for i := 0; b.Loop(); i++ {
				if _, err := st.Append(ctx, fmt.Sprintf("s-%d", i%1000), eventstore.Any, fresh(evs)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkAppendParallel appends one event at a time from 64 goroutines
// per core, with fsync: the appends waiting together share one (group
// commit).
func BenchmarkAppendParallel(b *testing.B) {
	ctx := context.Background()
	st := openBench(b, pebblestore.Options{})
	b.SetParallelism(64)
	b.RunParallel(func(pb *testing.PB) {
		evs := benchEvents(1)
		stream := fmt.Sprintf("s-%d", rand.Uint64())
		for pb.Next() {
			if _, err := st.Append(ctx, stream, eventstore.Any, fresh(evs)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkRead reads 100 events at a time from random places: of one
// stream of 10,000 events (ReadStream), and of the global log of 10,000
// events in 100 streams (ReadAll).
func BenchmarkRead(b *testing.B) {
	const total, page = 10_000, 100
	ctx := context.Background()
	st := openBench(b, pebblestore.Options{NoSync: true})
	evs := benchEvents(100)
	for i := range total / 100 {
		if _, err := st.Append(ctx, "one", eventstore.Any, fresh(evs)); err != nil {
			b.Fatal(err)
		}
		for j := range evs {
			if _, err := st.Append(ctx, fmt.Sprintf("s-%d", (i*100+j)%100), eventstore.Any, fresh(evs[j:j+1])); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The stream "one" is positions 1–100, 201–300, …; the others the rest.
	rng := rand.New(rand.NewPCG(1, 2))
	b.Run("stream", func(b *testing.B) {
		for b.Loop() {
			from := 1 + rng.Uint64N(total-page)
			got, err := st.ReadStream(ctx, "one", from, page)
			if err != nil || len(got) != page {
				b.Fatalf("%d events, %v", len(got), err)
			}
		}
		b.ReportMetric(float64(b.N*page)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("all", func(b *testing.B) {
		for b.Loop() {
			from := 1 + rng.Uint64N(2*total-page)
			got, err := st.ReadAll(ctx, from, page)
			if err != nil || len(got) != page {
				b.Fatalf("%d events, %v", len(got), err)
			}
		}
		b.ReportMetric(float64(b.N*page)/b.Elapsed().Seconds(), "events/s")
	})
}
