package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

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
	IDs                  int // streams written, and queries run in by-id mode
	EventsPerID          int // events per stream
	Buffer               int // the queries' max-buffer-size (page size)
	MaxConcurrentQueries int // permits; 0 with Unthrottled
	// Unthrottled runs the control experiment, the "before" half of the
	// Akka.NET post: no permitter bound at all (every query may read at
	// once), so only the database's connection pool stands between the
	// queries and the database.
	Unthrottled bool
	// ReadTimeout bounds each backend read, as a database client's
	// command timeout does (0: none). A read that times out fails its
	// query, which is then counted as not delivered.
	ReadTimeout time.Duration
	// Deadline bounds the query phase (0: none): at the deadline the run
	// ends and reports how many streams were not delivered whole, rather
	// than failing.
	Deadline time.Duration
	// DatabaseCPU measures the CPU used by the PostgreSQL processes on
	// this machine during the query phase (a database running here).
	DatabaseCPU bool
	// DatabaseBackendPID, if set, is the process id of one of the
	// database server's backends (SELECT pg_backend_pid()): DatabaseCPU
	// then counts that server only (its postmaster and the postmaster's
	// children), not every PostgreSQL server on the machine.
	DatabaseBackendPID int
	Mode               string // CrushByID (default) or CrushAllEvents
	Writers            int    // concurrent appenders in the write phase (default 8)
	Batch              int    // events per append (default EventsPerID, at most 1,000)
	Payload            int    // bytes of data per event
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
	// The control run's failure report: streams not delivered whole by
	// the end (a failed query, or the deadline), and the failed backend
	// reads by kind — timeout, too_many_connections (the database
	// refused a connection: SQLSTATE 53300), connection (could not
	// connect or lost it), other.
	Unthrottled bool             `json:"unthrottled"`
	Undelivered int              `json:"undelivered"`
	HitDeadline bool             `json:"hit_deadline"`
	ReadErrors  map[string]int64 `json:"read_errors"`
	// CPU during the query phase as a percentage of the whole machine:
	// this process's, and with DatabaseCPU the local PostgreSQL
	// server's (a lower bound: a backend that exits takes its time).
	QueryCPUPercent    float64  `json:"query_cpu_percent"`
	DatabaseCPUPercent *float64 `json:"database_cpu_percent,omitempty"`
}

// Rows renders the result as a two-column table.
func (r CrushResult) Rows() [][2]string {
	return [][2]string{
		{"mode", r.Mode},
		{"ids × events per id", fmt.Sprintf("%d × %d = %d events", r.IDs, r.EventsPerID, r.Events)},
		{"buffer / max concurrent queries", fmt.Sprintf("%d / %s", r.Buffer, permitsText(r))},
		{"live queries woken by", r.Wakeups},
		{"queries", fmt.Sprint(r.Queries)},
		{"write seconds", fmt.Sprintf("%.3f (%.0f events/s)", r.WriteSeconds, r.WriteEventsPerSec)},
		{"query seconds", fmt.Sprintf("%.3f (%.0f events/s)", r.QuerySeconds, r.QueryEventsPerSec)},
		{"errors", fmt.Sprint(r.Errors)},
		{"backend queries", fmt.Sprint(r.BackendQueries)},
		{"peak concurrent backend queries", fmt.Sprint(r.PeakConcurrentBackendQueries)},
		{"peak busy database connections", countOrNA(r.PeakBusyConns)},
		{"peak RSS MiB", fmt.Sprintf("%.0f", r.PeakRSSMB)},
		{"streams not delivered whole", fmt.Sprintf("%d (deadline hit: %v)", r.Undelivered, r.HitDeadline)},
		{"failed reads by kind", fmt.Sprint(r.ReadErrors)},
		{"query phase CPU % of the machine: this process / database", fmt.Sprintf("%.1f / %s", r.QueryCPUPercent, percentOrNA(r.DatabaseCPUPercent))},
	}
}

func percentOrNA(p *float64) string {
	if p == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", *p)
}

func permitsText(r CrushResult) string {
	if r.Unthrottled {
		return "unlimited"
	}
	return fmt.Sprint(r.MaxConcurrentQueries)
}

// pollingStore hides the store's commit signal, so queries must poll.
type pollingStore struct{ eventstore.Store }

// countingStore gives each read a timeout, as a database client's command
// timeout does, and counts the reads that fail by kind. It passes the
// store's commit signal through (Unwrap).
type countingStore struct {
	eventstore.Store
	timeout time.Duration
	kinds   *errorKinds
}

func (s *countingStore) Unwrap() eventstore.Store { return s.Store }

func (s *countingStore) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout > 0 {
		return context.WithTimeout(ctx, s.timeout)
	}
	return ctx, func() {}
}

func (s *countingStore) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]eventstore.Event, error) {
	c, cancel := s.ctx(ctx)
	defer cancel()
	evs, err := s.Store.ReadStream(c, stream, from, max)
	s.kinds.count(ctx, err)
	return evs, err
}

func (s *countingStore) ReadAll(ctx context.Context, from uint64, max int) ([]eventstore.Event, error) {
	c, cancel := s.ctx(ctx)
	defer cancel()
	evs, err := s.Store.ReadAll(c, from, max)
	s.kinds.count(ctx, err)
	return evs, err
}

func (s *countingStore) Head(ctx context.Context) (uint64, error) {
	c, cancel := s.ctx(ctx)
	defer cancel()
	h, err := s.Store.Head(c)
	s.kinds.count(ctx, err)
	return h, err
}

// errorKinds counts failed reads by kind.
type errorKinds struct {
	mu sync.Mutex
	n  map[string]int64
}

func newErrorKinds() *errorKinds { return &errorKinds{n: map[string]int64{}} }

// count counts err, unless there is none or the run itself ended (ctx,
// the caller's, is done: the end of the run cancels every query).
func (k *errorKinds) count(ctx context.Context, err error) {
	if err == nil || ctx.Err() != nil {
		return
	}
	kind := classifyReadError(err)
	k.mu.Lock()
	k.n[kind]++
	k.mu.Unlock()
}

func (k *errorKinds) snapshot() map[string]int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return maps.Clone(k.n)
}

// classifyReadError names a failed read's kind: timeout,
// too_many_connections, connection or other.
func classifyReadError(err error) string {
	var pgErr *pgconn.PgError
	var connErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &pgErr) && (pgErr.Code == "53300" || pgErr.Code == "53400"):
		return "too_many_connections"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &connErr), errors.As(err, &netErr), pgconn.SafeToRetry(err):
		return "connection"
	default:
		return "other"
	}
}

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
	if cfg.Unthrottled {
		// One permit per query: the permitter never makes one wait.
		cfg.MaxConcurrentQueries = max(cfg.IDs, 1)
	}
	if cfg.IDs <= 0 || cfg.EventsPerID <= 0 || cfg.Buffer <= 0 || cfg.MaxConcurrentQueries <= 0 || cfg.Payload < 0 || cfg.ReadTimeout < 0 || cfg.Deadline < 0 {
		return CrushResult{}, errors.New("bench crush: ids, events per id, buffer and max concurrent queries must be positive, payload, read timeout and deadline not negative")
	}
	if cfg.Mode != CrushByID && cfg.Mode != CrushAllEvents {
		return CrushResult{}, fmt.Errorf("bench crush: unknown mode %q (%s, %s)", cfg.Mode, CrushByID, CrushAllEvents)
	}
	r := CrushResult{
		Mode: cfg.Mode, IDs: cfg.IDs, EventsPerID: cfg.EventsPerID, Events: cfg.IDs * cfg.EventsPerID,
		Buffer: cfg.Buffer, MaxConcurrentQueries: cfg.MaxConcurrentQueries, Wakeups: "commit",
		Unthrottled: cfg.Unthrottled, ReadErrors: map[string]int64{},
	}
	if cfg.Unthrottled {
		r.MaxConcurrentQueries = 0
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

	kinds := newErrorKinds()
	var qstore eventstore.Store = &countingStore{Store: store, timeout: cfg.ReadTimeout, kinds: kinds}
	if cfg.Poll {
		qstore = pollingStore{qstore}
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
	cpu0, qstart := processCPU(), time.Now()
	db0, dbOK := time.Duration(0), false
	postmaster := 0
	if cfg.DatabaseBackendPID > 0 {
		postmaster = parentPID(cfg.DatabaseBackendPID)
	}
	if cfg.DatabaseCPU {
		db0, dbOK = postgresCPU(postmaster)
	}
	if cfg.Mode == CrushByID {
		r.Queries = cfg.IDs
		cfg.Progress.Start("streams delivered", cfg.IDs)
		var delivered int
		qel, delivered, r.HitDeadline, err = crushByID(ctx, j, names, cfg.EventsPerID, cfg.Deadline, &errs, cfg.Progress)
		r.Undelivered = cfg.IDs - delivered
	} else {
		r.Queries = 1
		cfg.Progress.Start("events delivered", r.Events)
		qel, err = crushAllEvents(ctx, j, names, cfg.EventsPerID, first, last, &errs, cfg.Progress)
	}
	stopSampling()
	wall := time.Since(qstart)
	r.QueryCPUPercent = stats.Round(cpuPercent(processCPU()-cpu0, wall, runtime.NumCPU()), 1)
	if db1, ok := postgresCPU(postmaster); dbOK && ok {
		p := stats.Round(cpuPercent(db1-db0, wall, runtime.NumCPU()), 1)
		r.DatabaseCPUPercent = &p
	}
	if err != nil {
		return r, err
	}
	r.ReadErrors = kinds.snapshot()
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
func crushByID(ctx context.Context, j *query.Reader, names []string, m int, deadline time.Duration, errs *atomic.Int64, prog *progress.Counter) (el time.Duration, delivered int, hitDeadline bool, err error) {
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var whole atomic.Int64 // streams delivered whole
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
					whole.Add(1)
					finish()
				}
			}
		}()
	}
	var timeout <-chan time.Time
	if deadline > 0 {
		t := time.NewTimer(deadline)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-allDone:
		el = time.Duration(end.Load())
	case <-ctx.Done():
		el = time.Duration(end.Load())
	case <-timeout:
		hitDeadline, el = true, deadline
	}
	cancel()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return el, int(whole.Load()), hitDeadline, fmt.Errorf("bench crush: %w", err)
	}
	return el, int(whole.Load()), hitDeadline, nil
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

// CrushProcessesResult is `bench crush --processes N`: N processes running
// the test at once against one database, as several nodes of a service
// do, each with its own throttle.
type CrushProcessesResult struct {
	Processes   int              `json:"processes"`
	IDs         int              `json:"ids"` // all processes' streams
	Undelivered int              `json:"undelivered"`
	Errors      int64            `json:"errors"`
	ReadErrors  map[string]int64 `json:"read_errors"`
	// The slowest process's query phase, and the processes' CPU summed.
	QuerySeconds       float64       `json:"query_seconds"`
	QueryCPUPercent    float64       `json:"query_cpu_percent"`
	DatabaseCPUPercent *float64      `json:"database_cpu_percent,omitempty"` // the highest any process saw
	PerProcess         []CrushResult `json:"per_process"`
}

// Sum fills in the totals from PerProcess.
func (r *CrushProcessesResult) Sum() {
	r.IDs, r.Undelivered, r.Errors, r.QuerySeconds, r.QueryCPUPercent = 0, 0, 0, 0, 0
	r.ReadErrors = map[string]int64{}
	for _, p := range r.PerProcess {
		r.IDs += p.IDs
		r.Undelivered += p.Undelivered
		r.Errors += p.Errors
		for k, v := range p.ReadErrors {
			r.ReadErrors[k] += v
		}
		r.QuerySeconds = max(r.QuerySeconds, p.QuerySeconds)
		r.QueryCPUPercent = stats.Round(r.QueryCPUPercent+p.QueryCPUPercent, 1)
		if p.DatabaseCPUPercent != nil && (r.DatabaseCPUPercent == nil || *p.DatabaseCPUPercent > *r.DatabaseCPUPercent) {
			v := *p.DatabaseCPUPercent
			r.DatabaseCPUPercent = &v
		}
	}
}

// Rows renders the result as a two-column table: the totals, then a line
// per process.
func (r CrushProcessesResult) Rows() [][2]string {
	rows := [][2]string{
		{"processes", fmt.Sprint(r.Processes)},
		{"streams (all processes)", fmt.Sprint(r.IDs)},
		{"streams not delivered whole", fmt.Sprint(r.Undelivered)},
		{"errors", fmt.Sprint(r.Errors)},
		{"failed reads by kind", fmt.Sprint(r.ReadErrors)},
		{"slowest query phase s", fmt.Sprintf("%.3f", r.QuerySeconds)},
		{"query phase CPU % of the machine: processes / database", fmt.Sprintf("%.1f / %s", r.QueryCPUPercent, percentOrNA(r.DatabaseCPUPercent))},
	}
	for i, p := range r.PerProcess {
		rows = append(rows, [2]string{fmt.Sprintf("process %d", i+1),
			fmt.Sprintf("%d streams, %d undelivered, %d errors, query %.3f s, write %.0f events/s", p.IDs, p.Undelivered, p.Errors, p.QuerySeconds, p.WriteEventsPerSec)})
	}
	return rows
}
