package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/internal/progress"
	"github.com/logbook/logbook/lab/stats"
)

// AppendConfig describes an append workload.
type AppendConfig struct {
	Events    int  // total events to append
	Batch     int  // events per append call
	Writers   int  // concurrent appenders
	Payload   int  // bytes of data per event
	Streams   int  // distinct streams written
	StoreIDs  bool // let the store generate event ids (default: the writer sends them, as an idempotent client would)
	RandomIDs bool // writers send random ids (a client's own version 4 UUIDs), not eventstore.NewID's time-ordered ones
	ExpectAny bool // append with ExpectedVersion Any instead of the exact version
	// Progress, if set, counts the events appended.
	Progress *progress.Counter
}

// AppendResult is what `logbook bench append` reports.
type AppendResult struct {
	Events       int     `json:"events"`
	Appends      int     `json:"appends"`
	Batch        int     `json:"batch"`
	Writers      int     `json:"writers"`
	Streams      int     `json:"streams"`
	PayloadBytes int     `json:"payload_bytes"`
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
	P50MS        float64 `json:"p50_ms"`
	P99MS        float64 `json:"p99_ms"`
	MaxMS        float64 `json:"max_ms"`
	Fsyncs       *uint64 `json:"fsyncs,omitempty"` // nil: the backend does not count them
	PeakRSSMB    float64 `json:"peak_rss_mb"`
	// With --baseline: the same rows written by RunBaseline, and the
	// store's events/s over it.
	BaselineEventsPerSec *float64 `json:"baseline_events_per_sec,omitempty"`
	Ratio                *float64 `json:"ratio,omitempty"`
	// With --baseline too: the same rows copied into a copy of the
	// store's events table, with its indexes (StoreEventsTable), and the
	// store's events/s over that.
	EventsTableEventsPerSec *float64 `json:"events_table_baseline_events_per_sec,omitempty"`
	RatioToEventsTable      *float64 `json:"ratio_to_events_table,omitempty"`
	// On the embedded store: this machine's synced-write latency in the
	// data directory, measured in the same run (MeasureFsync), and for
	// one writer the rate one batch per fdatasync allows and the ratio
	// of the measured rate to it (WithFsyncBound).
	FsyncMS                *float64 `json:"fsync_ms,omitempty"`
	FsyncBoundEventsPerSec *float64 `json:"fsync_bound_events_per_sec,omitempty"`
	RatioToFsyncBound      *float64 `json:"ratio_to_fsync_bound,omitempty"`
	// The 4 KiB probe at the end of a growing file instead, for
	// comparison: what a log pays without a prepared file.
	FsyncGrowingMS *float64 `json:"fsync_growing_ms,omitempty"`
	// The same from synced writes of one append's own bytes in the
	// store's log (BatchBytes).
	BatchBytes                  *int     `json:"batch_bytes,omitempty"`
	FsyncBatchMS                *float64 `json:"fsync_batch_ms,omitempty"`
	BatchFsyncBoundEventsPerSec *float64 `json:"batch_fsync_bound_events_per_sec,omitempty"`
	RatioToBatchFsyncBound      *float64 `json:"ratio_to_batch_fsync_bound,omitempty"`
	// With --ceiling: the same workload on a LogCeiling in the data
	// directory, run just before the store's, and the store's events/s
	// over it. PeakRSSMB is then the peak of both runs.
	CeilingEventsPerSec *float64 `json:"ceiling_events_per_sec,omitempty"`
	CeilingP99MS        *float64 `json:"ceiling_p99_ms,omitempty"`
	RatioToCeiling      *float64 `json:"ratio_to_ceiling,omitempty"`
}

// WithBaseline adds the baseline's figure and the ratio to r.
func (r AppendResult) WithBaseline(eventsPerSec float64) AppendResult {
	ratio := stats.Round(r.EventsPerSec/eventsPerSec, 3)
	r.BaselineEventsPerSec, r.Ratio = &eventsPerSec, &ratio
	return r
}

// WithEventsTableBaseline adds the figure of the copy into the store's
// events table and the ratio to it.
func (r AppendResult) WithEventsTableBaseline(eventsPerSec float64) AppendResult {
	ratio := stats.Round(r.EventsPerSec/eventsPerSec, 3)
	r.EventsTableEventsPerSec, r.RatioToEventsTable = &eventsPerSec, &ratio
	return r
}

// Rows renders the result as a two-column table.
func (r AppendResult) Rows() [][2]string {
	rows := [][2]string{
		{"events", fmt.Sprint(r.Events)},
		{"appends", fmt.Sprint(r.Appends)},
		{"batch / writers / streams", fmt.Sprintf("%d / %d / %d", r.Batch, r.Writers, r.Streams)},
		{"payload bytes", fmt.Sprint(r.PayloadBytes)},
		{"seconds", fmt.Sprintf("%.3f", r.Seconds)},
		{"events/s", fmt.Sprintf("%.0f", r.EventsPerSec)},
		{"append p50 / p99 / max ms", fmt.Sprintf("%.3f / %.3f / %.3f", r.P50MS, r.P99MS, r.MaxMS)},
		{"fsyncs", countOrNA(r.Fsyncs)},
		{"peak RSS MiB", fmt.Sprintf("%.0f", r.PeakRSSMB)},
	}
	if r.BaselineEventsPerSec != nil {
		rows = append(rows,
			[2]string{"baseline events/s (plain table, binary COPY)", fmt.Sprintf("%.0f", *r.BaselineEventsPerSec)},
			[2]string{"store / baseline", fmt.Sprintf("%.3f", *r.Ratio)})
	}
	if r.EventsTableEventsPerSec != nil {
		rows = append(rows,
			[2]string{"baseline events/s (the store's events table and indexes, binary COPY)", fmt.Sprintf("%.0f", *r.EventsTableEventsPerSec)},
			[2]string{"store / events-table baseline", fmt.Sprintf("%.3f", *r.RatioToEventsTable)})
	}
	if r.FsyncGrowingMS != nil {
		rows = append(rows, [2]string{"fdatasync of 4 KiB growing a file, median ms", fmt.Sprintf("%.3f", *r.FsyncGrowingMS)})
	}
	if r.FsyncMS != nil {
		rows = append(rows, [2]string{"fdatasync of 4 KiB, median ms", fmt.Sprintf("%.3f", *r.FsyncMS)})
	}
	if r.RatioToFsyncBound != nil {
		rows = append(rows,
			[2]string{"fsync bound events/s (batch / fdatasync)", fmt.Sprintf("%.0f", *r.FsyncBoundEventsPerSec)},
			[2]string{"events/s / fsync bound", fmt.Sprintf("%.3f", *r.RatioToFsyncBound)})
	}
	if r.FsyncBatchMS != nil {
		rows = append(rows, [2]string{fmt.Sprintf("fdatasync of one append's %d log bytes, median ms", *r.BatchBytes), fmt.Sprintf("%.3f", *r.FsyncBatchMS)})
	}
	if r.RatioToBatchFsyncBound != nil {
		rows = append(rows,
			[2]string{"its bound events/s", fmt.Sprintf("%.0f", *r.BatchFsyncBoundEventsPerSec)},
			[2]string{"events/s / its bound", fmt.Sprintf("%.3f", *r.RatioToBatchFsyncBound)})
	}
	if r.CeilingEventsPerSec != nil {
		rows = append(rows,
			[2]string{"ceiling events/s (a bare log: write + fdatasync per group, nothing else)", fmt.Sprintf("%.0f", *r.CeilingEventsPerSec)},
			[2]string{"ceiling append p99 ms", fmt.Sprintf("%.3f", *r.CeilingP99MS)})
	}
	if r.RatioToCeiling != nil {
		rows = append(rows, [2]string{"events/s / ceiling", fmt.Sprintf("%.3f", *r.RatioToCeiling)})
	}
	return rows
}

// RunAppend runs the workload. fsyncs, if not nil, reads the store's fsync
// counter before and after.
func RunAppend(ctx context.Context, store Appender, cfg AppendConfig, fsyncs func() uint64) (AppendResult, error) {
	if cfg.Events <= 0 || cfg.Batch <= 0 || cfg.Writers <= 0 || cfg.Streams <= 0 || cfg.Payload < 0 {
		return AppendResult{}, errors.New("bench append: events, batch, writers and streams must be positive, payload not negative")
	}
	appends := (cfg.Events + cfg.Batch - 1) / cfg.Batch
	// Streams are dealt out to writers so that each stream has one writer
	// and exact expected versions never conflict; with fewer streams than
	// writers, writers share streams and append with Any.
	expectAny := cfg.ExpectAny || cfg.Streams < cfg.Writers
	versions := make([]uint64, cfg.Streams)
	names := make([]string, cfg.Streams)
	runID := newRunID()
	for i := range names {
		names[i] = streamName(runID, i)
	}

	cfg.Progress.Start("events", cfg.Events)
	var next atomic.Int64 // next append number to claim
	lat := make([][]time.Duration, cfg.Writers)
	errs := make(chan error, cfg.Writers)
	var before uint64
	if fsyncs != nil {
		before = fsyncs()
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := range cfg.Writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			payload := make([]byte, cfg.Payload)
			for i := range payload {
				payload[i] = byte(rng.Uint32())
			}
			events := make([]eventstore.NewEvent, cfg.Batch)
			myStreams := streamsOf(w, cfg.Writers, cfg.Streams)
			lat[w] = make([]time.Duration, 0, appends/cfg.Writers+1)
			for k := 0; ; k++ {
				n := next.Add(1) - 1
				if n >= int64(appends) {
					return
				}
				size := cfg.Batch
				if rest := cfg.Events - int(n)*cfg.Batch; rest < size {
					size = rest
				}
				var si int
				if expectAny {
					si = rng.IntN(cfg.Streams)
				} else {
					si = myStreams[k%len(myStreams)]
				}
				for i := range events[:size] {
					events[i] = eventstore.NewEvent{Type: eventType, Data: payload}
					if !cfg.StoreIDs {
						events[i].ID = cfg.newID(rng)
					}
				}
				expect := eventstore.Any
				if !expectAny {
					expect = eventstore.Exactly(versions[si])
				}
				t0 := time.Now()
				res, err := store.Append(ctx, names[si], expect, events[:size])
				lat[w] = append(lat[w], time.Since(t0))
				if err != nil {
					errs <- err
					return
				}
				if !expectAny {
					versions[si] = res.LastSeq // only this writer touches si
				}
				cfg.Progress.Add(size)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return AppendResult{}, fmt.Errorf("bench append: %w", err)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sum := stats.Summarize(all)
	r := AppendResult{
		Events: cfg.Events, Appends: appends, Batch: cfg.Batch, Writers: cfg.Writers,
		Streams: cfg.Streams, PayloadBytes: cfg.Payload,
		Seconds:      stats.Round(elapsed.Seconds(), 3),
		EventsPerSec: stats.Round(float64(cfg.Events)/elapsed.Seconds(), 0),
		P50MS:        sum.P50, P99MS: sum.P99, MaxMS: sum.Max,
		PeakRSSMB: stats.Round(PeakRSSMB(), 1),
	}
	if fsyncs != nil {
		n := fsyncs() - before
		r.Fsyncs = &n
	}
	return r, nil
}

// The stream names and event type the writers use.
const eventType = "bench.Event"

func streamName(runID string, i int) string { return fmt.Sprintf("bench-%s-%d", runID, i) }

// SampleAppend is one append as the workload makes them: a stream with
// the longest of the run's names, and cfg.Batch events of cfg.Payload
// bytes with their ids (a store keeps an id whoever makes it).
func SampleAppend(cfg AppendConfig) (string, []eventstore.NewEvent) {
	events := make([]eventstore.NewEvent, cfg.Batch)
	for i := range events {
		events[i] = eventstore.NewEvent{ID: eventstore.NewID(), Type: eventType, Data: make([]byte, cfg.Payload)}
	}
	return streamName(newRunID(), max(cfg.Streams-1, 0)), events
}

// streamsOf returns the stream indexes writer w owns.
func streamsOf(w, writers, streams int) []int {
	var out []int
	for s := w; s < streams; s += writers {
		out = append(out, s)
	}
	if len(out) == 0 {
		out = []int{w % streams}
	}
	return out
}

// newID is a writer's event id: eventstore.NewID's, time-ordered, as a
// logbook client makes them, or with RandomIDs a random one.
func (cfg AppendConfig) newID(rng *rand.Rand) eventstore.ID {
	if cfg.RandomIDs {
		return randomID(rng)
	}
	return eventstore.NewID()
}

func randomID(rng *rand.Rand) eventstore.ID {
	var id eventstore.ID
	a, b := rng.Uint64(), rng.Uint64()
	for i := range 8 {
		id[i] = byte(a >> (8 * i))
		id[8+i] = byte(b >> (8 * i))
	}
	return id
}

// countOrNA prints a count a backend may not keep.
func countOrNA[T int | uint64](n *T) string {
	if n == nil {
		return "n/a (not counted by this backend)"
	}
	return fmt.Sprint(*n)
}
