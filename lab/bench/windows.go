package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime/trace"
	"sync"
	"syscall"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/priority"
	"github.com/logbook/logbook/engine/projection"
	"github.com/logbook/logbook/engine/window"
	"github.com/logbook/logbook/lab/stats"
)

// WindowsConfig configures `logbook bench windows`.
type WindowsConfig struct {
	Events  int // appended first, untimed, then aggregated (timed)
	Senders int
	Types   int
	// LiveEvents are appended while pull queries run, to measure query
	// latency under a live ingest (default Events/10, at most 1,000,000).
	LiveEvents int
	// LiveRate paces that live ingest, in events per second (0: as fast
	// as the store takes them).
	LiveRate int
	MaxBatch int    // events per aggregation commit
	AggDir   string // the aggregation's database (empty: a temporary directory)
	Verify   bool
	Seed     uint64
	// Settle, if set, is called after the untimed append and waits for
	// the store's background work that append left (an LSM's
	// compactions), so the timed ingest pays for the aggregation, not
	// for the setup. Its time is reported as settle_seconds.
	Settle func(context.Context) error
}

// WindowsResult is what `logbook bench windows` reports.
type WindowsResult struct {
	Events             int     `json:"events"`
	Senders            int     `json:"senders"`
	Types              int     `json:"types"`
	AppendSeconds      float64 `json:"append_seconds"`
	SettleSeconds      float64 `json:"settle_seconds"`
	IngestSeconds      float64 `json:"ingest_seconds"`
	IngestEventsPerSec float64 `json:"ingest_events_per_sec"`
	// IngestCPUSeconds is the process's CPU time (user + system, every
	// goroutine, Pebble's compactions included) during the ingest: on a
	// shared machine, events per CPU second is the steadier figure.
	IngestCPUSeconds      float64 `json:"ingest_cpu_seconds"`
	IngestEventsPerCPUSec float64 `json:"ingest_events_per_cpu_sec"`
	LiveEvents            int     `json:"live_events"`
	// LiveEventsPerSec is the live ingest's pace while the queries ran:
	// what the queries' precedence (engine/priority) cost it.
	LiveEventsPerSec float64 `json:"live_events_per_sec"`
	Queries          int     `json:"queries"`
	QueryP50MS       float64 `json:"query_p50_ms"`
	QueryP99MS       float64 `json:"query_p99_ms"`
	QueryMaxMS       float64 `json:"query_max_ms"`
	QueryRows        int     `json:"query_rows"`
	// QueryIdleP50MS and QueryIdleP99MS time 100 of the same queries
	// after the catch-up and before the live ingest: the query's own
	// cost, without an ingest beside it.
	QueryIdleP50MS float64 `json:"query_idle_p50_ms"`
	QueryIdleP99MS float64 `json:"query_idle_p99_ms"`
	Verified       bool    `json:"verified"`
	Mismatches     int     `json:"mismatches"`
	LateCounted    uint64  `json:"late_counted"`
	LateInjected   uint64  `json:"late_injected"`
	PeakRSSMB      float64 `json:"peak_rss_mb"`
}

// Rows renders the result as a two-column table.
func (r WindowsResult) Rows() [][2]string {
	rows := [][2]string{
		{"events", fmt.Sprint(r.Events)},
		{"senders × types", fmt.Sprintf("%d × %d", r.Senders, r.Types)},
		{"append seconds (untimed setup)", fmt.Sprintf("%.1f", r.AppendSeconds)},
		{"store settling seconds (untimed setup)", fmt.Sprintf("%.1f", r.SettleSeconds)},
		{"ingest seconds", fmt.Sprintf("%.2f", r.IngestSeconds)},
		{"ingest events/s", fmt.Sprintf("%.0f", r.IngestEventsPerSec)},
		{"ingest CPU seconds", fmt.Sprintf("%.2f", r.IngestCPUSeconds)},
		{"ingest events per CPU second", fmt.Sprintf("%.0f", r.IngestEventsPerCPUSec)},
		{"live events during queries", fmt.Sprint(r.LiveEvents)},
		{"live events/s during queries", fmt.Sprintf("%.0f", r.LiveEventsPerSec)},
		{"queries", fmt.Sprint(r.Queries)},
		{"query p50 / p99 / max ms", fmt.Sprintf("%.2f / %.2f / %.2f", r.QueryP50MS, r.QueryP99MS, r.QueryMaxMS)},
		{"rows per query", fmt.Sprint(r.QueryRows)},
		{"query p50 / p99 ms without ingest", fmt.Sprintf("%.2f / %.2f", r.QueryIdleP50MS, r.QueryIdleP99MS)},
		{"late injected / counted", fmt.Sprintf("%d / %d", r.LateInjected, r.LateCounted)},
	}
	if r.Verified {
		rows = append(rows, [2]string{"mismatches", fmt.Sprint(r.Mismatches)})
	}
	return append(rows, [2]string{"peak RSS MiB", fmt.Sprintf("%.0f", r.PeakRSSMB)})
}

// The bench's events carry a fixed binary payload: event time (Unix ns,
// 8 bytes), sender (2), type (1), size (4). Extracting it costs no
// parsing, so the figure is the aggregation's own cost.
const (
	windowsEventType = "notification-sent"
	windowsPayload   = 15
	windowsGrace     = 2 * time.Minute
)

var windowsDay = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

// WindowsDefinition is the aggregation the bench runs: notifications
// per sender and type in minute windows, rolled up to hours and days.
func WindowsDefinition(senders, types int) window.Definition {
	sn := make([]string, senders)
	for i := range sn {
		sn[i] = fmt.Sprintf("sender-%04d", i)
	}
	tn := make([]string, types)
	for i := range tn {
		tn[i] = fmt.Sprintf("type-%02d", i)
	}
	return window.Definition{
		Name:    "notifications",
		Window:  window.Tumbling(time.Minute),
		RollUps: []time.Duration{time.Hour, 24 * time.Hour},
		Grace:   windowsGrace,
		Dims:    []string{"sender", "type"},
		Values:  []string{"size"},
		Extract: func(ev *eventstore.Event, r *window.Record) bool {
			if ev.Type != windowsEventType || len(ev.Data) != windowsPayload {
				return false
			}
			s, t := int(binary.BigEndian.Uint16(ev.Data[8:])), int(ev.Data[10])
			if s >= len(sn) || t >= len(tn) {
				return false
			}
			r.Time = time.Unix(0, int64(binary.BigEndian.Uint64(ev.Data)))
			r.Dims[0], r.Dims[1] = sn[s], tn[t]
			r.Values[0] = float64(binary.BigEndian.Uint32(ev.Data[11:]))
			return true
		},
	}
}

// windowsGen makes the bench's events: times spread over one day in
// order, 1 % moved back within the grace period (out of order, still
// counted) and 0.1 % moved back beyond it (late).
type windowsGen struct {
	cfg  WindowsConfig
	rng  *rand.Rand
	n, i int
	st   int64 // the largest time so far: the aggregation's stream time
	late uint64
}

func (g *windowsGen) next(dst []byte) []byte {
	day := int64(24 * time.Hour)
	t := windowsDay.UnixNano() + int64(float64(day)*float64(g.i)/float64(g.n)) + g.rng.Int64N(int64(time.Second))
	g.i++
	switch x := g.rng.IntN(1000); {
	case x < 10 && g.st > 0:
		t = g.st - g.rng.Int64N(int64(windowsGrace)) // behind, within grace
	case x == 10 && g.st-int64(windowsGrace+time.Minute+10*time.Minute) > windowsDay.UnixNano():
		// Ends at or before st - grace whatever the minute: late.
		t = g.st - int64(windowsGrace+time.Minute) - g.rng.Int64N(int64(10*time.Minute))
		g.late++
	}
	g.st = max(g.st, t)
	dst = binary.BigEndian.AppendUint64(dst, uint64(t))
	dst = binary.BigEndian.AppendUint16(dst, uint16(g.rng.IntN(g.cfg.Senders)))
	dst = append(dst, byte(g.rng.IntN(g.cfg.Types)))
	return binary.BigEndian.AppendUint32(dst, uint32(100+g.rng.IntN(10_000)))
}

// appendWindows appends n generated events in appends of 1,000.
func appendWindows(ctx context.Context, store eventstore.Store, g *windowsGen, n, rate int) error {
	const per = 1000
	batch := make([]eventstore.NewEvent, 0, per)
	t0 := time.Now()
	for done := 0; done < n; {
		if rate > 0 {
			if d := time.Until(t0.Add(time.Duration(float64(done) / float64(rate) * float64(time.Second)))); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		batch = batch[:0]
		k := min(per, n-done)
		buf := make([]byte, 0, k*windowsPayload)
		for range k {
			start := len(buf)
			buf = g.next(buf)
			batch = append(batch, eventstore.NewEvent{Type: windowsEventType, Data: buf[start:len(buf):len(buf)]})
		}
		stream := fmt.Sprintf("sender-batch-%d", (done/per)%64)
		if _, err := store.Append(ctx, stream, eventstore.Any, batch); err != nil {
			return fmt.Errorf("bench windows: append: %w", err)
		}
		done += k
	}
	return nil
}

// RunWindows appends the events (untimed), aggregates them from the log
// (timed: ingest_events_per_sec), then runs pull queries — one type as
// filter, grouped by sender, over the day — while more events are
// appended and aggregated live, and with Verify recomputes every minute
// window from the raw events. The store must be empty.
func RunWindows(ctx context.Context, store eventstore.Store, cfg WindowsConfig) (WindowsResult, error) {
	if cfg.LiveEvents == 0 {
		cfg.LiveEvents = min(cfg.Events/10, 1_000_000)
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 65536
	}
	res := WindowsResult{Events: cfg.Events, Senders: cfg.Senders, Types: cfg.Types, LiveEvents: cfg.LiveEvents}
	head, err := store.Head(ctx)
	if err != nil {
		return res, err
	}
	if head != 0 {
		return res, fmt.Errorf("bench windows: the store holds %d events; it needs an empty one (another --data)", head)
	}
	dir := cfg.AggDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "logbook-bench-windows-"); err != nil {
			return res, err
		}
		defer os.RemoveAll(dir)
	}
	g := &windowsGen{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 17)), n: cfg.Events + cfg.LiveEvents}
	start := time.Now()
	if err := appendWindows(ctx, store, g, cfg.Events, 0); err != nil {
		return res, err
	}
	res.AppendSeconds = stats.Round(time.Since(start).Seconds(), 1)
	if cfg.Settle != nil {
		start = time.Now()
		if err := cfg.Settle(ctx); err != nil {
			return res, fmt.Errorf("bench windows: settling the store: %w", err)
		}
		res.SettleSeconds = stats.Round(time.Since(start).Seconds(), 1)
	}

	def := WindowsDefinition(cfg.Senders, cfg.Types)
	agg, err := window.Open(dir, def, window.Options{MaxRows: 100_000})
	if err != nil {
		return res, err
	}
	defer agg.Close()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runner := projection.NewRunner(store, agg, projection.Options{Name: def.Name, MaxBatch: cfg.MaxBatch})
	runErr := make(chan error, 1)
	go func() { runErr <- runner.Run(runCtx) }()
	start = time.Now()
	cpu0 := cpuTime()
	if err := runner.WaitFor(ctx, uint64(cfg.Events)); err != nil {
		return res, fmt.Errorf("bench windows: ingest: %w", err)
	}
	el, cpu := time.Since(start), cpuTime()-cpu0
	res.IngestSeconds = stats.Round(el.Seconds(), 2)
	res.IngestEventsPerSec = stats.Round(float64(cfg.Events)/el.Seconds(), 0)
	if cpu > 0 {
		res.IngestCPUSeconds = stats.Round(cpu.Seconds(), 2)
		res.IngestEventsPerCPUSec = stats.Round(float64(cfg.Events)/cpu.Seconds(), 0)
	}

	rng := rand.New(rand.NewPCG(cfg.Seed, 18))
	dayQuery := func() window.Query {
		return window.Query{
			From: windowsDay, To: windowsDay.Add(24 * time.Hour), Unit: 24 * time.Hour,
			Filter:  map[string]string{"type": fmt.Sprintf("type-%02d", rng.IntN(cfg.Types))},
			GroupBy: []string{"sender"},
		}
	}
	// The same queries without an ingest beside them first.
	var idle []time.Duration
	for range 100 {
		q := dayQuery()
		t0 := time.Now()
		if _, err := agg.Query(ctx, q); err != nil {
			return res, fmt.Errorf("bench windows: query: %w", err)
		}
		idle = append(idle, time.Since(t0))
	}
	isum := stats.Summarize(idle)
	res.QueryIdleP50MS, res.QueryIdleP99MS = isum.P50, isum.P99

	// Queries while the rest is appended and aggregated live.
	var wg sync.WaitGroup
	var appendErr error
	writing := make(chan struct{})
	wg.Add(1)
	liveStart := time.Now()
	var liveTook time.Duration
	go func() {
		defer wg.Done()
		defer close(writing)
		// The live ingest is throughput work: its appends let the
		// queries go first (engine/priority).
		appendErr = appendWindows(priority.Throughput(ctx), store, g, cfg.LiveEvents, cfg.LiveRate)
		liveTook = time.Since(liveStart)
	}()
	var lat []time.Duration
	for done := false; !done || len(lat) < 100; {
		select {
		case <-writing:
			done = true
		default:
		}
		q := dayQuery()
		t0 := time.Now()
		// A region per query: in an execution trace (--trace), what
		// each query waited for.
		reg := trace.StartRegion(ctx, "live query")
		ans, err := agg.Query(ctx, q)
		reg.End()
		if err != nil {
			return res, fmt.Errorf("bench windows: query: %w", err)
		}
		lat = append(lat, time.Since(t0))
		res.QueryRows = len(ans.Rows)
	}
	wg.Wait()
	if appendErr != nil {
		return res, appendErr
	}
	res.Queries = len(lat)
	if liveTook > 0 {
		res.LiveEventsPerSec = stats.Round(float64(cfg.LiveEvents)/liveTook.Seconds(), 0)
	}
	sum := stats.Summarize(lat)
	res.QueryP50MS, res.QueryP99MS, res.QueryMaxMS = sum.P50, sum.P99, sum.Max
	if err := runner.WaitCaughtUp(ctx); err != nil {
		return res, err
	}
	stop()
	if err := <-runErr; err != nil {
		return res, err
	}
	res.LateInjected = g.late
	total, err := agg.Query(ctx, window.Query{Unit: 24 * time.Hour})
	if err != nil {
		return res, err
	}
	for _, r := range total.Rows {
		res.LateCounted += r.Late
	}
	if cfg.Verify {
		res.Verified = true
		if res.Mismatches, err = verifyWindows(ctx, store, agg, def); err != nil {
			return res, err
		}
	}
	res.PeakRSSMB = PeakRSSMB()
	return res, nil
}

// cpuTime is the process's user and system CPU time so far (0 where
// getrusage is not available).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// verifyWindows recomputes every minute window (and each day's totals)
// from the raw events, in log order with the same lateness rule, and
// counts the windows whose aggregates differ from the aggregation's or
// that only one side has.
func verifyWindows(ctx context.Context, store eventstore.Store, agg *window.Aggregation, def window.Definition) (int, error) {
	type key struct {
		minute      int64
		sender, typ string
	}
	type val struct {
		count, late   uint64
		sum, min, max float64
	}
	ref := map[key]*val{}
	st := int64(math.MinInt64)
	rec := window.Record{Dims: make([]string, 2), Values: make([]float64, 1)}
	minute := int64(time.Minute)
	head, err := store.Head(ctx)
	if err != nil {
		return 0, err
	}
	for from := uint64(1); from <= head; {
		page, err := store.ReadAll(ctx, from, 10_000)
		if err != nil {
			return 0, err
		}
		for i := range page {
			from = page[i].Position + 1
			if !def.Extract(&page[i], &rec) {
				continue
			}
			t := rec.Time.UnixNano()
			st = max(st, t)
			m := t / minute * minute
			k := key{m, rec.Dims[0], rec.Dims[1]}
			v := ref[k]
			if v == nil {
				v = &val{min: math.Inf(1), max: math.Inf(-1)}
				ref[k] = v
			}
			if m+minute <= st-int64(def.Grace) {
				v.late++
				continue
			}
			v.count++
			v.sum += rec.Values[0]
			v.min, v.max = min(v.min, rec.Values[0]), max(v.max, rec.Values[0])
		}
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for k := range ref {
		lo, hi = min(lo, k.minute), max(hi, k.minute)
	}
	mismatches, matched := 0, 0
	for m := lo; m <= hi; m += minute {
		ans, err := agg.Query(ctx, window.Query{From: time.Unix(0, m), To: time.Unix(0, m+minute), GroupBy: []string{"sender", "type"}})
		if err != nil {
			return 0, err
		}
		for _, r := range ans.Rows {
			v := ref[key{m, r.Dims["sender"], r.Dims["type"]}]
			if v != nil {
				matched++
			}
			s := r.Values["size"]
			if v == nil || v.count != r.Count || v.late != r.Late || v.sum != s.Sum ||
				v.count > 0 && (s.Min == nil || *s.Min != v.min || *s.Max != v.max) {
				mismatches++
			}
		}
	}
	mismatches += len(ref) - matched // windows the aggregation lacks
	return mismatches, nil
}
