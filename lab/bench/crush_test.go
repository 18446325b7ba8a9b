package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/eventstore/pgstore"
	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/lab/bench"
)

func TestCrush(t *testing.T) {
	s, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cases := []bench.CrushConfig{
		{IDs: 2000, EventsPerID: 20, Buffer: 10, MaxConcurrentQueries: 100},
		// Spread each stream's events over the log, with fewer permits.
		{IDs: 1000, EventsPerID: 20, Buffer: 7, MaxConcurrentQueries: 3, Batch: 6, Writers: 3},
		{IDs: 1000, EventsPerID: 20, Buffer: 10, MaxConcurrentQueries: 100, Mode: bench.CrushAllEvents},
		// Polling, as on a backend without commit signals.
		{IDs: 300, EventsPerID: 5, Buffer: 2, MaxConcurrentQueries: 10, Poll: true, RefreshInterval: 5 * time.Millisecond},
	}
	var head uint64
	for _, cfg := range cases {
		// The same store each time: every run writes its own streams.
		r, err := bench.RunCrush(ctx, s, cfg)
		if err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		if r.Errors != 0 || r.PeakConcurrentBackendQueries > cfg.MaxConcurrentQueries || r.PeakConcurrentBackendQueries < 1 ||
			r.Events != cfg.IDs*cfg.EventsPerID || r.QuerySeconds <= 0 || r.WriteSeconds <= 0 || r.PeakRSSMB <= 0 {
			t.Fatalf("%+v: %+v", cfg, r)
		}
		// Each query reads its whole stream in pages of Buffer, once.
		if cfg.Mode != bench.CrushAllEvents && r.BackendQueries < uint64(cfg.IDs*((cfg.EventsPerID+cfg.Buffer-1)/cfg.Buffer)) {
			t.Fatalf("%+v: only %d backend queries", cfg, r.BackendQueries)
		}
		h, _ := s.Head(ctx)
		if h-head != uint64(r.Events) {
			t.Fatalf("wrote %d events, want %d", h-head, r.Events)
		}
		head = h
	}
	if _, err := bench.RunCrush(ctx, s, bench.CrushConfig{IDs: 1, EventsPerID: 1, Buffer: 1, MaxConcurrentQueries: 1, Mode: "sideways"}); err == nil {
		t.Fatal("unknown mode accepted")
	}
}

// TestCrushDetectsErrors checks that the bench counts what it must: a
// store that loses an event shows up as errors, not as a hang or a pass.
func TestCrushDetectsErrors(t *testing.T) {
	s, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, mode := range []string{bench.CrushByID, bench.CrushAllEvents} {
		r, err := bench.RunCrush(ctx, lossy{s}, bench.CrushConfig{IDs: 50, EventsPerID: 10, Buffer: 4, MaxConcurrentQueries: 5, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		if r.Errors == 0 {
			t.Fatalf("%s: a lost event went unnoticed: %+v", mode, r)
		}
	}
}

// lossy drops every event with seq 3 from reads.
type lossy struct{ *pebblestore.Store }

func drop3(evs []eventstore.Event, err error) ([]eventstore.Event, error) {
	out := evs[:0:0]
	for _, ev := range evs {
		if ev.Seq != 3 {
			out = append(out, ev)
		}
	}
	return out, err
}

func (l lossy) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]eventstore.Event, error) {
	return drop3(l.Store.ReadStream(ctx, stream, from, max))
}

func (l lossy) ReadAll(ctx context.Context, from uint64, max int) ([]eventstore.Event, error) {
	evs, err := l.Store.ReadAll(ctx, from, max)
	if len(evs) == 0 {
		return evs, err
	}
	kept, err := drop3(evs, err)
	if len(kept) == 0 {
		// A page of only dropped events must still move the cursor on.
		return evs[len(evs)-1:], err
	}
	return kept, err
}

// TestCrushControl runs the Akka.NET post's before and after on
// PostgreSQL with one small connection pool and one read timeout: without
// the throttle, thousands of live queries queue for the pool at once and
// the ones at the back time out, leaving their streams undelivered; with
// the throttle every stream arrives whole.
func TestCrushControl(t *testing.T) {
	url, _ := testenv.SchemaURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := pgstore.Open(ctx, url, pgstore.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A backend read takes about 0.1 ms here, so 12,000 of them queued on
	// two connections take over a second to drain: well past the timeout
	// for the queue's back half (with 3,000 streams and 500 ms, a faster
	// machine drained all but 3 reads in time, and retried those).
	base := bench.CrushConfig{IDs: 6000, EventsPerID: 1, Buffer: 10, Writers: 2,
		ReadTimeout: 200 * time.Millisecond, Deadline: time.Minute}

	control := base
	control.Unthrottled = true
	r, err := bench.RunCrush(ctx, s, control)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Unthrottled || r.MaxConcurrentQueries != 0 || r.Undelivered == 0 || r.ReadErrors["timeout"] == 0 || r.Errors == 0 {
		t.Fatalf("unthrottled: want streams lost to read timeouts, got %+v", r)
	}
	t.Logf("unthrottled: %d of %d streams undelivered, failed reads %v", r.Undelivered, r.IDs, r.ReadErrors)

	throttled := base
	throttled.MaxConcurrentQueries = 2
	r, err = bench.RunCrush(ctx, s, throttled)
	if err != nil {
		t.Fatal(err)
	}
	if r.Undelivered != 0 || r.Errors != 0 || len(r.ReadErrors) != 0 || r.HitDeadline || r.PeakConcurrentBackendQueries > 2 {
		t.Fatalf("throttled: want every stream whole, got %+v", r)
	}
}

// TestCrushProcessesSum: the totals of several processes' results.
func TestCrushProcessesSum(t *testing.T) {
	db1, db2 := 12.5, 20.0
	r := bench.CrushProcessesResult{Processes: 2, PerProcess: []bench.CrushResult{
		{IDs: 3000, Undelivered: 5, Errors: 6, ReadErrors: map[string]int64{"timeout": 6}, QuerySeconds: 2, QueryCPUPercent: 10, DatabaseCPUPercent: &db1},
		{IDs: 3000, Undelivered: 1, Errors: 2, ReadErrors: map[string]int64{"timeout": 1, "connection": 1}, QuerySeconds: 3, QueryCPUPercent: 11, DatabaseCPUPercent: &db2},
	}}
	r.Sum()
	if r.IDs != 6000 || r.Undelivered != 6 || r.Errors != 8 || r.ReadErrors["timeout"] != 7 || r.ReadErrors["connection"] != 1 ||
		r.QuerySeconds != 3 || r.QueryCPUPercent != 21 || r.DatabaseCPUPercent == nil || *r.DatabaseCPUPercent != 20 {
		t.Fatalf("%+v", r)
	}
}
