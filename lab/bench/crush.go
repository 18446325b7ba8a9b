package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/query"
	"github.com/logbook/logbook/internal/progress"
	"github.com/logbook/logbook/lab/stats"
)

// The crush test's two designs. The test follows the one in Aaron
// Stannard's "Scaling Akka.Persistence.Query to 100k+ Concurrent Queries
// for Large-Scale CQRS" (Akka.NET blog, 2023): 100,000 streams of 100
// events, a live query on each, against one database.
const (
	// CrushByID runs one live EventsByStream query per stream, as
	// the Akka.NET crush test does.
	CrushByID = "by-id"
	// CrushAllEvents runs one live AllEvents query and hands each event
	// to its stream's projection: the design the Akka.NET post recommends
	// for many projections.
	CrushAllEvents = "all-events"
)

// CrushConfig describes the stream-query crush test: many concurrent
// live queries against one store.
type CrushConfig struct {
	IDs                  int    // streams written, and queries run in by-id mode
	EventsPerID          int    // events per stream
	Buffer               int    // the queries' max-buffer-size (page size)
	MaxConcurrentQueries int    // permits
	Mode                 string // CrushByID (default) or CrushAllEvents
	Writers              int    // concurrent appenders in the write phase (default 8)
	Batch                int    // events per append (default EventsPerID, at most 1,000)
	Payload              int    // bytes of data per event
	// Poll makes the queries poll every RefreshInterval, as on a backend
	// without commit signals, instead of waking on commits.
	Poll            bool
	RefreshInterval time.Duration
	// BusyConns, if set, reads the backend's own count of database
	// connections in use (a pool's), sampled during the query phase: a
	// check on the permitter from the other side.
	BusyConns func() int
	// Progress, if set, counts the events written, then the streams (by
	// id) or events (all events) delivered.
	Progress *progress.Counter
}

// CrushResult is what `logbook bench crush` reports.
type CrushResult struct {
	Mode                 string  `json:"mode"`
	IDs                  int     `json:"ids"`
	EventsPerID          int     `json:"events_per_id"`
	Events               int     `json:"events"` // written in all: ids × events_per_id
	Buffer               int     `json:"buffer"`
	MaxConcurrentQueries int     `json:"max_concurrent_queries"`
	Wakeups              string  `json:"wakeups"` // "commit" or "poll <interval>"
	Queries              int     `json:"queries"`
	WriteSeconds         float64 `json:"write_seconds"`
	WriteEventsPerSec    float64 `json:"write_events_per_sec"`
	QuerySeconds         float64 `json:"query_seconds"`
	QueryEventsPerSec    float64 `json:"query_events_per_sec"`
	// Errors counts failed queries plus deliveries that were not exactly
	// seqs 1..M of the stream, in order.
	Errors                       int64   `json:"errors"`
	BackendQueries               uint64  `json:"backend_queries"`
	PeakConcurrentBackendQueries int     `json:"peak_concurrent_backend_queries"`
	PeakBusyConns                *int    `json:"peak_busy_db_connections,omitempty"` // with BusyConns
	PeakRSSMB                    float64 `json:"peak_rss_mb"`
}

// Rows renders the result as a two-column table.
func (r CrushResult) Rows() [][2]string {
	return [][2]string{
		{"mode", r.Mode},
		{"ids × events per id", fmt.Sprintf("%d × %d = %d events", r.IDs, r.EventsPerID, r.Events)},
		{"buffer / max concurrent queries", fmt.Sprintf("%d / %d", r.Buffer, r.MaxConcurrentQueries)},
		{"live queries woken by", r.Wakeups},
		{"queries", fmt.Sprint(r.Queries)},
		{"write seconds", fmt.Sprintf("%.3f (%.0f events/s)", r.WriteSeconds, r.WriteEventsPerSec)},
		{"query seconds", fmt.Sprintf("%.3f (%.0f events/s)", r.QuerySeconds, r.QueryEventsPerSec)},
		{"errors", fmt.Sprint(r.Errors)},
		{"backend queries", fmt.Sprint(r.BackendQueries)},
		{"peak concurrent backend queries", fmt.Sprint(r.PeakConcurrentBackendQueries)},
		{"peak busy database connections", countOrNA(r.PeakBusyConns)},
		{"peak RSS MiB", fmt.Sprintf("%.0f", r.PeakRSSMB)},
	}
}

// pollingStore hides the store's commit signal, so queries must poll.
type pollingStore struct{ eventstore.Store }

// RunCrush writes EventsPerID events to each of IDs new streams, then
// reads them all back through live stream queries and measures the
// time until every stream has been delivered whole. The stream names are
// new on every run, so a data directory can be reused.
func RunCrush(ctx context.Context, store eventstore.Store, cfg CrushConfig) (CrushResult, error) {
	if cfg.Mode == "" {
		cfg.Mode = CrushByID
	}
	if cfg.Writers <= 0 {
		cfg.Writers = 8
	}
	if cfg.Batch <= 0 {
		cfg.Batch = min(cfg.EventsPerID, 1000)
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = time.Second
	}
	if cfg.IDs <= 0 || cfg.EventsPerID <= 0 || cfg.Buffer <= 0 || cfg.MaxConcurrentQueries <= 0 || cfg.Payload < 0 {
		return CrushResult{}, errors.New("bench crush: ids, events per id, buffer and max concurrent queries must be positive, payload not negative")
	}
	if cfg.Mode != CrushByID && cfg.Mode != CrushAllEvents {
		return CrushResult{}, fmt.Errorf("bench crush: unknown mode %q (%s, %s)", cfg.Mode, CrushByID, CrushAllEvents)
	}
	r := CrushResult{
		Mode: cfg.Mode, IDs: cfg.IDs, EventsPerID: cfg.EventsPerID, Events: cfg.IDs * cfg.EventsPerID,
		Buffer: cfg.Buffer, MaxConcurrentQueries: cfg.MaxConcurrentQueries, Wakeups: "commit",
	}
	names := make([]string, cfg.IDs)
	runID := newRunID()
	for i := range names {
		names[i] = fmt.Sprintf("crush-%s-%d", runID, i)
	}

	first, err := store.Head(ctx)
	if err != nil {
		return r, fmt.Errorf("bench crush: %w", err)
	}
	first++
	start := time.Now()
	cfg.Progress.Start("events written", r.Events)
	if err := crushWrite(ctx, store, cfg, names); err != nil {
		return r, err
	}
	el := time.Since(start)
	r.WriteSeconds = stats.Round(el.Seconds(), 3)
	r.WriteEventsPerSec = stats.Round(float64(r.Events)/el.Seconds(), 0)
	last, err := store.Head(ctx)
	if err != nil {
		return r, fmt.Errorf("bench crush: %w", err)
	}

	qstore := store
	if cfg.Poll {
		qstore = pollingStore{store}
		r.Wakeups = "poll " + cfg.RefreshInterval.String()
	}
	j, err := query.New(qstore, query.Options{
		MaxBufferSize:        cfg.Buffer,
		MaxConcurrentQueries: cfg.MaxConcurrentQueries,
		RefreshInterval:      cfg.RefreshInterval,
	})
	if err != nil {
		return r, fmt.Errorf("bench crush: %w", err)
	}
	defer j.Close()

	var errs atomic.Int64
	var qel time.Duration
	stopSampling := func() {}
	if cfg.BusyConns != nil {
		stop := samplePeak(cfg.BusyConns)
		stopSampling = func() { n := stop(); r.PeakBusyConns = &n }
	}
	if cfg.Mode == CrushByID {
		r.Queries = cfg.IDs
		cfg.Progress.Start("streams delivered", cfg.IDs)
		qel, err = crushByID(ctx, j, names, cfg.EventsPerID, &errs, cfg.Progress)
	} else {
		r.Queries = 1
		cfg.Progress.Start("events delivered", r.Events)
		qel, err = crushAllEvents(ctx, j, names, cfg.EventsPerID, first, last, &errs, cfg.Progress)
	}
	stopSampling()
	if err != nil {
		return r, err
	}
	st := j.Permitter().Stats()
	r.QuerySeconds = stats.Round(qel.Seconds(), 3)
	r.QueryEventsPerSec = stats.Round(float64(r.Events)/qel.Seconds(), 0)
	r.Errors = errs.Load()
	r.BackendQueries = st.Granted
	r.PeakConcurrentBackendQueries = st.Peak
	r.PeakRSSMB = stats.Round(PeakRSSMB(), 1)
	return r, nil
}

// crushWrite appends the events: each writer owns every Writers-th stream
// and appends Batch events at a time to each of its streams in turn, with
// exact expected versions. With Batch below EventsPerID a stream's events
// are spread over the log, as when many entities write over time.
func crushWrite(ctx context.Context, store eventstore.Store, cfg CrushConfig, names []string) error {
	payload := make([]byte, cfg.Payload)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	errc := make(chan error, cfg.Writers)
	var wg sync.WaitGroup
	for w := range cfg.Writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			events := make([]eventstore.NewEvent, cfg.Batch)
			for done := 0; done < cfg.EventsPerID; done += cfg.Batch {
				n := min(cfg.Batch, cfg.EventsPerID-done)
				for si := w; si < len(names); si += cfg.Writers {
					for i := range events[:n] {
						// Fresh each time: Append writes the generated
						// ids back into the slice.
						events[i] = eventstore.NewEvent{Type: "crush.Event", Data: payload}
					}
					if _, err := store.Append(ctx, names[si], eventstore.Exactly(uint64(done)), events[:n]); err != nil {
						errc <- fmt.Errorf("bench crush: writing %s: %w", names[si], err)
						return
					}
					cfg.Progress.Add(n)
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// crushByID runs one live EventsByStream query per stream, all at
// once, each from seq 0, and returns the time until the last has received
// its m events. Each query's consumer is a goroutine; the queries
// themselves cost none, and the store runs at most the permitted number
// of reads at a time.
func crushByID(ctx context.Context, j *query.Reader, names []string, m int, errs *atomic.Int64, prog *progress.Counter) (time.Duration, error) {
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var remaining atomic.Int64
	remaining.Store(int64(len(names)))
	allDone := make(chan struct{})
	var end atomic.Int64 // nanoseconds after start of the last completion
	start := time.Now()
	finish := func() {
		end.Store(int64(time.Since(start)))
		prog.Add(1)
		if remaining.Add(-1) == 0 {
			close(allDone)
		}
	}
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := j.EventsByStream(name, 0, 0)
			want := uint64(1)
			finished := false
			for {
				evs, err := q.Next(qctx)
				if err != nil {
					if qctx.Err() == nil {
						errs.Add(1)
					}
					if !finished {
						finish()
					}
					return
				}
				for i := range evs {
					if evs[i].Seq != want || evs[i].Stream != name || want > uint64(m) {
						errs.Add(1)
					}
					want = evs[i].Seq + 1
				}
				if !finished && want > uint64(m) {
					// Done, but still live: like the Akka.NET test's queries it
					// goes on waiting for more, until the end of the run.
					finished = true
					finish()
				}
			}
		}()
	}
	select {
	case <-allDone:
	case <-ctx.Done():
	}
	el := time.Duration(end.Load())
	cancel()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return el, fmt.Errorf("bench crush: %w", err)
	}
	return el, nil
}

// crushAllEvents runs one live AllEvents query from position first and
// deals its events out to one projection per stream, sharded over a
// goroutine per core by stream; it returns the time until every
// projection has its m events (the query has passed position last).
func crushAllEvents(ctx context.Context, j *query.Reader, names []string, m int, first, last uint64, errs *atomic.Int64, prog *progress.Counter) (time.Duration, error) {
	index := make(map[string]int32, len(names))
	for i, n := range names {
		index[n] = int32(i)
	}
	type delivery struct {
		proj int32
		ev   *eventstore.Event
	}
	shards := runtime.GOMAXPROCS(0)
	in := make([]chan []delivery, shards)
	seen := make([]uint32, len(names)) // projection i's state: the last seq applied; owned by shard i%shards
	var wg sync.WaitGroup
	for s := range shards {
		in[s] = make(chan []delivery, 64)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range in[s] {
				for _, d := range batch {
					if d.ev.Seq != uint64(seen[d.proj])+1 {
						errs.Add(1)
					}
					seen[d.proj] = uint32(d.ev.Seq)
				}
			}
		}()
	}

	start := time.Now()
	q := j.AllEvents(first)
	batches := make([][]delivery, shards)
	var qerr error
	for q.Cursor() <= last {
		evs, err := q.Next(ctx)
		if err != nil {
			qerr = fmt.Errorf("bench crush: all events: %w", err)
			break
		}
		prog.Add(len(evs))
		for i := range evs {
			p, ok := index[evs[i].Stream]
			if !ok {
				errs.Add(1) // not this run's: another writer shares the store
				continue
			}
			s := int(p) % shards
			batches[s] = append(batches[s], delivery{p, &evs[i]})
		}
		for s, b := range batches {
			if len(b) > 0 {
				in[s] <- b
				batches[s] = nil
			}
		}
	}
	for _, c := range in {
		close(c)
	}
	wg.Wait()
	el := time.Since(start)
	for i := range seen {
		if int(seen[i]) != m {
			errs.Add(1)
		}
	}
	return el, qerr
}

// samplePeak polls busy every millisecond until stop, which returns the
// largest value seen.
func samplePeak(busy func() int) (stop func() int) {
	peak := new(atomic.Int64)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if n := int64(busy()); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int { close(done); <-finished; return int(peak.Load()) }
}

// newRunID returns 8 random hex digits that keep a run's stream names
// apart from earlier runs' on the same store. (Event ids will not do:
// they begin with the time, so two runs in a minute shared a prefix.)
func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}
