package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/logbook/logbook/lab/notifymonolith"
	"github.com/logbook/logbook/lab/stats"
	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/deliver"
	"github.com/logbook/logbook/services/notify/pipeline"
	"github.com/logbook/logbook/services/notify/sink"
	"github.com/logbook/logbook/services/notify/stages"
	"github.com/logbook/logbook/services/notify/userscdc"
)

// The notify benchmark's modes.
const (
	ModePipeline = "pipeline"
	ModeMonolith = "monolith"
)

// Modes lists the notify benchmark's modes.
var Modes = []string{ModePipeline, ModeMonolith, ModeStages}

// NotifyType is the notification type the benchmark sends; the
// generated users refuse it at the share NotifyPopulation says.
const NotifyType = "like_update"

// NotifyPopulation is the users the benchmark generates (Users is set to
// the largest size): 10 % turned the type off on every channel, 2 %
// opted out of everything, 10 % have no e-mail address, 20 % no device.
var NotifyPopulation = userscdc.Population{Type: NotifyType, Refuse: 0.1, OptOut: 0.02, NoEmail: 0.1, NoPush: 0.2, Seed: 1}

// NotifyConfig configures RunNotify.
type NotifyConfig struct {
	UsersDB       string        // the users' database, postgres://…
	Schema        string        // made for the run's users' tables (dropped first if there; default logbook_notify_bench)
	Sizes         []int         // recipients per request
	Runs          int           // requests per size above 1
	LatencyRuns   int           // warm requests of size 1 (the published latency test ran 20)
	Mode          string        // ModePipeline or ModeMonolith
	SinkErrorRate float64       // share of the sink's calls answered 503
	Timeout       time.Duration // the longest one request may take to be delivered (default 5 min)
	Log           *slog.Logger

	// Pipeline mode: the service runs as a child process of Exe.
	Exe   string
	Data  string // its data directory: empty or absent ("" a fresh temporary one)
	Store string // or a PostgreSQL store
	Bus   string // and a Kafka bus
	// DebugAddr, if set, is where the service serves Go's profiles.
	DebugAddr string

	// Stages mode: Exe runs StageProcs processes of each stage on Bus
	// (kafka://…/PREFIX; fresh topics PREFIX-<time>.* per run).
	StageProcs int
	// KillStage, if set, SIGKILLs the first process of that stage
	// KillAfter after each request of at least KillMin recipients is
	// sent, and restarts it under the same instance name.
	KillStage string
	KillAfter time.Duration
	KillMin   int
	// AtLeastOnce runs the stages without transactions (for comparison).
	AtLeastOnce bool
}

// NotifyRow is one size's figures: from the request sent until the sink
// acknowledged its last new delivery.
type NotifyRow struct {
	Size          int       `json:"size"`
	Mode          string    `json:"mode"`
	Runs          int       `json:"runs"`
	MeanMS        float64   `json:"mean_ms"`
	P50MS         float64   `json:"p50_ms"`
	P99MS         float64   `json:"p99_ms"`
	MinMS         float64   `json:"min_ms"`
	MaxMS         float64   `json:"max_ms"`
	PerRecipientU float64   `json:"per_recipient_us"` // mean over the deliveries' recipients, µs
	Deliveries    int64     `json:"deliveries"`       // per request
	Failed        bool      `json:"failed"`
	Reason        string    `json:"reason,omitempty"`
	SamplesMS     []float64 `json:"samples_ms"` // in the order they were sent
	Seed          string    `json:"seed"`       // what the published study measured
}

// NotifyChecks are the exactness checks of a run.
type NotifyChecks struct {
	// ExpectedDeliveries is the recount, by SQL on the users' tables and
	// independent of the service's code, of the (recipient, channel)
	// pairs the requests that did not fail should have delivered.
	ExpectedDeliveries  int64 `json:"expected_deliveries"`
	UniqueKeys          int64 `json:"unique_keys"`          // distinct idempotency keys the sink took
	DuplicateDeliveries int64 `json:"duplicate_deliveries"` // messages the sink took a second time
	// MetricsMismatches compares the service's metric windows with the
	// sink and the recount; null where the mode has no metrics.
	MetricsMismatches *int64 `json:"metrics_mismatches"`
	// CountMismatches are requests whose delivered count, as the
	// service reports it, differs from the recount (pipeline).
	CountMismatches  int64 `json:"count_mismatches"`
	Retries          int64 `json:"retries"`           // delivery calls retried, as the service counted them
	SinkFailedCalls  int64 `json:"sink_failed_calls"` // calls the sink failed on purpose
	FailedDeliveries int64 `json:"failed_deliveries"` // messages the service gave up on
}

// NotifyResult is what RunNotify measured.
type NotifyResult struct {
	Mode          string  `json:"mode"`
	Users         int     `json:"users"`
	GenerateS     float64 `json:"generate_s"`
	SinkErrorRate float64 `json:"sink_error_rate"`
	// ColdMS: pipeline, from the service's process start, on a fresh
	// store and state (so with the snapshot of every user), until the
	// sink acknowledged the first notification; monolith, the first
	// request on a monolith with no connection yet.
	ColdMS *float64 `json:"cold_ms"`
	// ColdRestartMS (pipeline): the same after the service was stopped
	// and started again on its store and state.
	ColdRestartMS *float64 `json:"cold_restart_ms"`
	// ColdReadyMS and ColdRestartReadyMS (pipeline): of those, the time
	// until the service's /healthz answered.
	ColdReadyMS *float64 `json:"cold_ready_ms"`
	// ColdCopiedMS (pipeline): from the same start until the service's
	// users view had copied its first snapshot and answered from its own
	// rows (/healthz "users": "view"). Until then lookups go to the
	// snapshot in the users' database; the warm requests are sent after.
	ColdCopiedMS       *float64     `json:"cold_copied_ms"`
	ColdRestartReadyMS *float64     `json:"cold_restart_ready_ms"`
	ColdSeed           string       `json:"cold_seed"`
	Rows               []NotifyRow  `json:"rows"`
	Checks             NotifyChecks `json:"checks"`
	// Stages is the stage deployment's audit of its topics (stages mode).
	Stages   *StagesAudit `json:"stages,omitempty"`
	Failures []string     `json:"failures"` // checks that failed; empty when the run is exact
	Pass     bool         `json:"pass"`
}

// seedFigure is what the published study reports for a size: Fig. 5.1 gives numbers
// for one notification; Fig. 5.2's are not in its text, only its words.
func seedFigure(mode string, size int) string {
	if mode == ModeMonolith {
		switch size {
		case 1:
			return "vg-monolith ≈ 2,000 ms (Fig. 5.1)"
		case 100, 1000:
			return "vg-monolith \"performed well\" (Fig. 5.2)"
		case 10_000:
			return "vg-monolith \"degrades significantly\" (Fig. 5.2)"
		case 100_000:
			return "vg-monolith failed: \"SQL statements being too long\" (Fig. 5.2)"
		case 1_000_000:
			return "— (the published study stopped at vg-monolith's failure at 100,000)"
		}
		return "—"
	}
	switch size {
	case 1:
		return "mass comm warm ≈ 1,000 ms (Fig. 5.1)"
	case 100, 1000, 10_000, 100_000:
		return "mass comm \"remains unaffected\" up to 100,000 (Fig. 5.2)"
	case 1_000_000:
		return "mass comm \"significant delay\" (Fig. 5.2)"
	}
	return "—"
}

// target is the system under test.
type target interface {
	// send posts one request and returns once it is accepted; retries
	// and failed deliveries are what the answer says, where it says it.
	send(ctx context.Context, id string, ids []int64, at time.Time) (sendAnswer, error)
	// finish waits until the service has done the request a names and
	// adds what it counted to a (pipeline).
	finish(ctx context.Context, a *sendAnswer) error
	metricsMismatches(ctx context.Context, sent []sentRequest) (*int64, error)
	close()
}

type sendAnswer struct {
	id                         string // the service's id of the request
	position                   uint64 // the log position its acceptance is at
	retries, failed, delivered int64
	counted                    bool // delivered is the service's count
}

// sentRequest is what a request that was delivered should have added
// to the metric windows.
type sentRequest struct {
	at                            time.Time // its timestamp, which the windows group by
	requested, delivered, retries int64
}

// RunNotify runs the latency and scalability tests of Xiao's "Mass Communication System" (§5, Figs.
// 5.1–5.2) against one mode: it makes the users' tables in a fresh
// schema, generates as many users as the largest size, starts the
// loopback sink, starts the system under test, and sends one request
// per size per run to users 1…size, timing each from the moment it is
// sent until the sink acknowledges its last new delivery.
func RunNotify(ctx context.Context, cfg NotifyConfig) (NotifyResult, error) {
	sizes, err := cfg.check()
	if err != nil {
		return NotifyResult{}, err
	}
	users := sizes[len(sizes)-1]
	r := &notifyRun{cfg: cfg, sizes: sizes,
		res:     NotifyResult{Mode: cfg.Mode, Users: users, SinkErrorRate: cfg.SinkErrorRate},
		samples: map[int][]time.Duration{}, reasons: map[int]string{}}

	// The users' database.
	admin, err := pgx.Connect(ctx, cfg.UsersDB)
	if err != nil {
		return r.res, fmt.Errorf("bench notify: users' database: %w", err)
	}
	defer admin.Close(context.Background())
	if err := clearNotifyRun(ctx, admin, cfg); err != nil {
		return r.res, fmt.Errorf("bench notify: clear an earlier run: %w", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := clearNotifyRun(ctx, admin, cfg); err != nil {
			cfg.Log.Warn("bench notify: drop the run's schema and the service's replication slot", "schema", cfg.Schema, "slot", pipelineSlot(cfg), "err", err)
		}
	}()
	start := time.Now()
	src, err := userscdc.OpenSource(ctx, cfg.UsersDB, cfg.Schema)
	if err != nil {
		return r.res, err
	}
	defer src.Close()
	if err := r.makeUsers(ctx, src, users, start); err != nil {
		return r.res, err
	}

	// The sink.
	r.sink, err = sink.New(sink.Options{ErrorRate: cfg.SinkErrorRate, Seed: 1})
	if err != nil {
		return r.res, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return r.res, err
	}
	sinkSrv := &http.Server{Handler: r.sink, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = sinkSrv.Serve(ln) }()
	defer sinkSrv.Close()
	sinkURL := "http://" + ln.Addr().String() + sink.Path

	// The system under test, and its cold start.
	r.started = time.Now()
	switch cfg.Mode {
	case ModeMonolith:
		r.tg, err = startMonolith(ctx, cfg, sinkURL)
	case ModePipeline:
		r.tg, err = startPipeline(ctx, cfg, sinkURL)
	case ModeStages:
		r.tg, err = startStages(ctx, cfg, sinkURL)
	}
	if err != nil {
		return r.res, err
	}
	defer r.tg.close()
	if err := r.coldStart(ctx); err != nil {
		return r.res, err
	}
	r.warm(ctx)
	if err := ctx.Err(); err != nil {
		return r.res, err
	}
	if err := r.coldRestart(ctx); err != nil {
		return r.res, err
	}
	r.tabulate()
	if err := r.check(ctx); err != nil {
		return r.res, err
	}
	return r.res, nil
}

// check fills in the defaults and returns the sizes, sorted and without
// duplicates.
func (cfg *NotifyConfig) check() ([]int, error) {
	if cfg.UsersDB == "" || len(cfg.Sizes) == 0 || cfg.Runs <= 0 || cfg.LatencyRuns < 0 {
		return nil, errors.New("bench notify: a users database, sizes and a positive number of runs are needed")
	}
	if !slices.Contains(Modes, cfg.Mode) {
		return nil, fmt.Errorf("bench notify: mode %q: want %s", cfg.Mode, strings.Join(Modes, ", "))
	}
	if cfg.Mode == ModeStages {
		if cfg.Bus == "" {
			return nil, errors.New("bench notify: stages mode needs a Kafka bus")
		}
		if cfg.StageProcs <= 0 {
			cfg.StageProcs = 2
		}
		if cfg.KillAfter <= 0 {
			cfg.KillAfter = 500 * time.Millisecond
		}
	}
	if cfg.Schema == "" {
		cfg.Schema = "logbook_notify_bench"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	sizes := slices.Clone(cfg.Sizes)
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)
	if sizes[0] <= 0 {
		return nil, errors.New("bench notify: sizes must be positive")
	}
	return sizes, nil
}

// clearNotifyRun drops what a run leaves in the users' database: its
// schema and the service's replication slot.
func clearNotifyRun(ctx context.Context, admin *pgx.Conn, cfg NotifyConfig) error {
	if err := dropSlot(ctx, admin, pipelineSlot(cfg)); err != nil {
		return err
	}
	_, err := admin.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{cfg.Schema}.Sanitize()+` CASCADE`)
	return err
}

// notifyRun is one RunNotify: the system under test, the sink, and what
// was sent and measured so far.
type notifyRun struct {
	cfg   NotifyConfig
	sizes []int
	res   NotifyResult

	// expected is the deliveries a request to users 1…n should make, by
	// n, as the recount found.
	expected map[int]int64
	sink     *sink.Sink
	tg       target
	started  time.Time // when the system under test was started

	want    int64 // unique keys the sink should have taken so far
	checks  NotifyChecks
	sent    []sentRequest
	seq     int
	samples map[int][]time.Duration
	reasons map[int]string // why a size's request failed, its first failure
}

// makeUsers generates the users in the run's schema and recounts the
// deliveries each size should make; GenerateS is the time since start.
func (r *notifyRun) makeUsers(ctx context.Context, src *userscdc.Source, users int, start time.Time) error {
	pop := NotifyPopulation
	pop.Users = users
	r.cfg.Log.Info("bench notify: generating users", "users", users, "schema", r.cfg.Schema)
	if err := src.Generate(ctx, pop); err != nil {
		return err
	}
	// User 1, the one notified by the size-1 requests, gets the
	// notification on at least one channel.
	if _, err := src.Pool.Exec(ctx, `UPDATE `+src.Table("users")+` SET opt_out = false, email = 'user1@example.org' WHERE id = 1;
		DELETE FROM `+src.Table("user_settings")+` WHERE user_id = 1`); err != nil {
		return err
	}
	if _, err := src.Pool.Exec(ctx, `ANALYZE `+src.Table("users")+`; ANALYZE `+src.Table("user_settings")+`; ANALYZE `+src.Table("user_devices")); err != nil {
		return err
	}
	r.res.GenerateS = stats.Round(time.Since(start).Seconds(), 2)
	r.expected = map[int]int64{}
	for _, n := range r.sizes {
		var err error
		if r.expected[n], err = recount(ctx, src, n); err != nil {
			return err
		}
	}
	if n := r.expected[1]; slices.Contains(r.sizes, 1) && n == 0 {
		return errors.New("bench notify: user 1 is notified on no channel")
	}
	return nil
}

// one sends a request to users 1…n and waits for its deliveries; it
// returns the time from sending to the last new delivery.
func (r *notifyRun) one(ctx context.Context, n int) (time.Duration, error) {
	r.seq++
	id := fmt.Sprintf("bench-%s-%d-%d-%d", r.cfg.Mode, n, r.seq, r.started.UnixNano())
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	rctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	at := time.Now()
	a, err := r.tg.send(rctx, id, ids, at)
	if err != nil {
		return 0, err
	}
	expected := r.expected[n]
	r.want += expected
	st, err := r.sink.WaitUnique(rctx, r.want)
	if err != nil {
		return 0, fmt.Errorf("%d of %d deliveries acknowledged after %v: %w", st.UniqueKeys-(r.want-expected), expected, time.Since(at).Round(time.Millisecond), err)
	}
	if err := r.tg.finish(rctx, &a); err != nil {
		return 0, err
	}
	r.checks.Retries += a.retries
	r.checks.FailedDeliveries += a.failed
	if a.counted && a.delivered != expected {
		r.checks.CountMismatches++
	}
	r.sent = append(r.sent, sentRequest{at: at, requested: int64(n), delivered: expected, retries: a.retries})
	return st.LastNewKeyAt.Sub(at), nil
}

// coldStart sends the first request, of size 1 if that is one of the
// sizes, and times it from the start of the system under test.
func (r *notifyRun) coldStart(ctx context.Context) error {
	if !slices.Contains(r.sizes, 1) {
		return nil
	}
	if _, err := r.one(ctx, 1); err != nil {
		return fmt.Errorf("bench notify: the cold request: %w", err)
	}
	cold := stats.MS(r.sink.Stats().LastNewKeyAt.Sub(r.started))
	r.res.ColdMS = &cold
	if t, ok := r.tg.(interface{ readyAt() time.Time }); ok {
		ready := stats.MS(t.readyAt().Sub(r.started))
		r.res.ColdReadyMS = &ready
	}
	if t, ok := r.tg.(interface {
		copied(context.Context) (time.Time, error)
	}); ok {
		// Warm is after the cold start has ended: the users' copy in.
		at, err := t.copied(ctx)
		if err != nil {
			return err
		}
		copied := stats.MS(at.Sub(r.started))
		r.res.ColdCopiedMS = &copied
	}
	if r.cfg.Mode != ModeMonolith {
		r.res.ColdSeed = "mass comm ≈ 20,000 ms (Lambda cold start, Fig. 5.1)"
	} else {
		r.res.ColdSeed = "vg-monolith ≈ 2,000 ms (Fig. 5.1)"
	}
	return nil
}

// warm sends the latency runs of size 1, then Runs requests of every
// size, recording each one's time or why it failed.
func (r *notifyRun) warm(ctx context.Context) {
	for run := range r.cfg.LatencyRuns {
		if slices.Contains(r.sizes, 1) {
			r.send(ctx, 1, run+1)
		}
	}
	for run := range r.cfg.Runs {
		for _, n := range r.sizes {
			if n == 1 && r.cfg.LatencyRuns > 0 {
				continue
			}
			r.send(ctx, n, run+1)
		}
	}
}

// send sends one warm request of size n and records its time, or why it
// failed.
func (r *notifyRun) send(ctx context.Context, n, run int) {
	if r.reasons[n] != "" && r.cfg.Mode == ModeMonolith {
		return // it failed once; the query is the same every time
	}
	r.cfg.Log.Debug("bench notify: sending", "mode", r.cfg.Mode, "size", n, "run", run)
	d, err := r.one(ctx, n)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		r.cfg.Log.Warn("bench notify: request failed", "size", n, "err", err)
		if r.reasons[n] == "" {
			r.reasons[n] = err.Error()
		}
		return
	}
	r.samples[n] = append(r.samples[n], d)
}

// coldRestart restarts the pipeline on its data — a cold process whose
// store and users' view are in place (the published study's Lambdas found
// OpenSearch filled) — and times a request of size 1 from the restart.
func (r *notifyRun) coldRestart(ctx context.Context) error {
	t, ok := r.tg.(interface{ restart(context.Context) error })
	if !ok || !slices.Contains(r.sizes, 1) {
		return nil
	}
	restarted := time.Now()
	if err := t.restart(ctx); err != nil {
		return err
	}
	if _, err := r.one(ctx, 1); err != nil {
		return fmt.Errorf("bench notify: the request after the restart: %w", err)
	}
	cold := stats.MS(r.sink.Stats().LastNewKeyAt.Sub(restarted))
	r.res.ColdRestartMS = &cold
	if t, ok := r.tg.(interface{ readyAt() time.Time }); ok {
		ready := stats.MS(t.readyAt().Sub(restarted))
		r.res.ColdRestartReadyMS = &ready
	}
	return nil
}

// tabulate makes a row of each size's samples.
func (r *notifyRun) tabulate() {
	for _, n := range r.sizes {
		row := NotifyRow{Size: n, Mode: r.cfg.Mode, Runs: len(r.samples[n]), Deliveries: r.expected[n], Seed: seedFigure(r.cfg.Mode, n)}
		if r.reasons[n] != "" {
			row.Failed, row.Reason = true, r.reasons[n]
		}
		if len(r.samples[n]) > 0 {
			s := stats.Sort(r.samples[n])
			var sum time.Duration
			for _, d := range r.samples[n] {
				sum += d
				row.SamplesMS = append(row.SamplesMS, stats.MS(d))
			}
			mean := sum / time.Duration(len(s))
			row.MeanMS, row.P50MS, row.P99MS = stats.MS(mean), stats.MS(s.Percentile(50)), stats.MS(s.Percentile(99))
			row.MinMS, row.MaxMS = stats.MS(s[0]), stats.MS(s.Max())
			row.PerRecipientU = stats.Round(float64(mean.Nanoseconds())/1e3/float64(n), 2)
		}
		r.res.Rows = append(r.res.Rows, row)
	}
}

// check runs the exactness checks, once late duplicates had a moment to
// arrive, and says whether the run passed.
func (r *notifyRun) check(ctx context.Context) error {
	time.Sleep(200 * time.Millisecond)
	st := r.sink.Stats()
	r.checks.ExpectedDeliveries = r.want
	r.checks.UniqueKeys = st.UniqueKeys
	r.checks.DuplicateDeliveries = st.Duplicates
	r.checks.SinkFailedCalls = st.FailedCalls
	var err error
	if r.checks.MetricsMismatches, err = r.tg.metricsMismatches(ctx, r.sent); err != nil {
		return err
	}
	if t, ok := r.tg.(*stagesTarget); ok {
		// A killed delivery process's last poll is posted again by the
		// next owner: the sink takes each key once and the outcomes
		// topic counts each batch once. Those resends are reported, not
		// counted as deliveries made twice.
		if r.cfg.KillStage == stages.Deliver {
			r.checks.DuplicateDeliveries = 0
		}
		if r.res.Stages, err = t.audit(ctx, st.Duplicates); err != nil {
			return err
		}
		r.checks.Retries, r.checks.FailedDeliveries = r.res.Stages.Retries, r.res.Stages.Failed
	}
	r.res.Checks = r.checks
	r.res.Failures = append([]string{}, r.checks.failures()...)
	if a := r.res.Stages; a != nil {
		r.res.Failures = append(r.res.Failures, a.Problems()...)
		if a.Delivered != r.want {
			r.res.Failures = append(r.res.Failures, fmt.Sprintf("the outcomes topic counts %d delivered, the recount expects %d", a.Delivered, r.want))
		}
	}
	for _, row := range r.res.Rows {
		if row.Failed && r.cfg.Mode != ModeMonolith {
			r.res.Failures = append(r.res.Failures, fmt.Sprintf("size %d failed: %s", row.Size, row.Reason))
		}
	}
	r.res.Pass = len(r.res.Failures) == 0
	return nil
}

// dropSlot drops a replication slot and the publication of the same
// name, if they are there; a slot still in use (its walsender ending) is
// tried again for a while.
func dropSlot(ctx context.Context, conn *pgx.Conn, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, name)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, err := conn.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{name}.Sanitize())
	return err
}

func (c NotifyChecks) failures() []string {
	var out []string
	if c.UniqueKeys != c.ExpectedDeliveries {
		out = append(out, fmt.Sprintf("the sink took %d distinct keys, the recount expects %d", c.UniqueKeys, c.ExpectedDeliveries))
	}
	if c.DuplicateDeliveries != 0 {
		out = append(out, fmt.Sprintf("%d deliveries received twice", c.DuplicateDeliveries))
	}
	if c.MetricsMismatches != nil && *c.MetricsMismatches != 0 {
		out = append(out, fmt.Sprintf("%d metric windows differ from the recount", *c.MetricsMismatches))
	}
	if c.CountMismatches != 0 {
		out = append(out, fmt.Sprintf("%d requests' delivered counts differ from the recount", c.CountMismatches))
	}
	if c.Retries < c.SinkFailedCalls {
		out = append(out, fmt.Sprintf("%d retries counted for %d calls the sink failed", c.Retries, c.SinkFailedCalls))
	}
	if c.FailedDeliveries != 0 {
		out = append(out, fmt.Sprintf("%d deliveries failed for good", c.FailedDeliveries))
	}
	return out
}

// recount is how many (recipient, channel) deliveries a request of
// NotifyType to users 1…n should make, by SQL on the users' tables: a
// user not opted out gets push if they have a device and did not turn
// push off for the type, and e-mail if they have an address and did not
// turn e-mail off.
func recount(ctx context.Context, src *userscdc.Source, n int) (int64, error) {
	off := func(c string) string {
		return `EXISTS (SELECT 1 FROM ` + src.Table("user_settings") + ` s WHERE s.user_id = u.id AND s.type = $2 AND s.channel = '` + c + `' AND NOT s.enabled)`
	}
	var push, email int64
	err := src.Pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE NOT u.opt_out AND EXISTS (SELECT 1 FROM `+src.Table("user_devices")+` d WHERE d.user_id = u.id) AND NOT `+off("push")+`),
		count(*) FILTER (WHERE NOT u.opt_out AND coalesce(u.email, '') <> '' AND NOT `+off("email")+`)
		FROM `+src.Table("users")+` u WHERE u.id BETWEEN 1 AND $1`, n, NotifyType).Scan(&push, &email)
	if err != nil {
		return 0, fmt.Errorf("bench notify: recount: %w", err)
	}
	return push + email, nil
}

// monolithTarget serves the monolith's Handler on loopback and posts to
// it: one HTTP request does the whole work.
type monolithTarget struct {
	pool   *pgxpool.Pool
	srv    *http.Server
	url    string
	client *http.Client
}

func startMonolith(ctx context.Context, cfg NotifyConfig, sinkURL string) (target, error) {
	pool, err := pgxpool.New(ctx, cfg.UsersDB)
	if err != nil {
		return nil, fmt.Errorf("bench notify: monolith: %w", err)
	}
	d, err := deliver.New(deliver.Config{Endpoints: map[notify.Channel]string{notify.Push: sinkURL, notify.Email: sinkURL}})
	if err != nil {
		pool.Close()
		return nil, err
	}
	// The service's own templates and policy: the same work as the
	// pipeline's.
	m := &notifymonolith.Monolith{Pool: pool, Schema: cfg.Schema, Templates: pipeline.DefaultTemplates, Policy: pipeline.DefaultPolicy, Deliverer: d}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pool.Close()
		return nil, err
	}
	srv := &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &monolithTarget{pool: pool, srv: srv, url: "http://" + ln.Addr().String() + notifymonolith.Path, client: &http.Client{}}, nil
}

func (t *monolithTarget) send(ctx context.Context, id string, ids []int64, at time.Time) (sendAnswer, error) {
	body, err := json.Marshal(notifymonolith.SendBody{Type: NotifyType, ClubID: 1, Sender: "bench", Timestamp: at, ToUsers: ids})
	if err != nil {
		return sendAnswer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return sendAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", id)
	resp, err := t.client.Do(req)
	if err != nil {
		return sendAnswer{}, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return sendAnswer{}, errors.New(problemDetail(resp.Status, data))
	}
	var a notifymonolith.Answer
	if err := json.Unmarshal(data, &a); err != nil {
		return sendAnswer{}, fmt.Errorf("monolith's answer: %w", err)
	}
	return sendAnswer{id: a.ID, retries: a.Retries, failed: a.Failed, delivered: a.Delivered, counted: true}, nil
}

func (t *monolithTarget) finish(context.Context, *sendAnswer) error { return nil }

func (t *monolithTarget) metricsMismatches(context.Context, []sentRequest) (*int64, error) {
	return nil, nil // the monolith keeps no metrics
}

func (t *monolithTarget) close() {
	_ = t.srv.Close()
	t.pool.Close()
}

// problemDetail is an RFC 9457 answer's detail, or the status and body.
func problemDetail(status string, body []byte) string {
	var p struct {
		Detail string `json:"detail"`
	}
	if json.Unmarshal(body, &p) == nil && p.Detail != "" {
		return p.Detail
	}
	return strings.TrimSpace(status + ": " + string(body))
}

// Print writes one table for the mode: the figures per size beside the
// published study's, then the checks.
func (r NotifyResult) Print(w io.Writer) error {
	fmt.Fprintf(w, "mode %s: %s users generated in %.1f s; sink error rate %g\n\n", r.Mode, group(int64(r.Users)), r.GenerateS, r.SinkErrorRate)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "recipients\truns\tmean ms\tp50 ms\tp99 ms\tµs/recipient\tdeliveries\t   published figure (§5.3)")
	if r.ColdMS != nil {
		fmt.Fprintf(tw, "1 cold\t1\t%.1f\t\t\t\t\t   %s\n", *r.ColdMS, r.ColdSeed)
	}
	if r.ColdRestartMS != nil {
		fmt.Fprintf(tw, "1 cold, restarted\t1\t%.1f\t\t\t\t\t   the service stopped and started again on its data\n", *r.ColdRestartMS)
	}
	for _, row := range r.Rows {
		size := group(int64(row.Size))
		if row.Size == 1 {
			size = "1 warm"
		}
		if row.Failed && row.Runs == 0 {
			fmt.Fprintf(tw, "%s\t0\tfailed\t\t\t\t%s\t   %s\n", size, group(row.Deliveries), row.Seed)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.2f\t%s\t   %s\n", size, row.Runs, row.MeanMS, row.P50MS, row.P99MS, row.PerRecipientU, group(row.Deliveries), row.Seed)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.ColdReadyMS != nil && r.ColdRestartReadyMS != nil {
		fmt.Fprintf(w, "\ncold: %.1f ms until the service's /healthz answered; restarted: %.1f ms", *r.ColdReadyMS, *r.ColdRestartReadyMS)
		if r.ColdCopiedMS != nil {
			fmt.Fprintf(w, "; the users' snapshot copied into the view at %.1f ms (warm requests after)", *r.ColdCopiedMS)
		}
	}
	for _, row := range r.Rows {
		if row.Failed {
			fmt.Fprintf(w, "\n%s recipients failed: %s", group(int64(row.Size)), row.Reason)
		}
	}
	c := r.Checks
	metrics := "not checked (no metrics in this mode)"
	if c.MetricsMismatches != nil {
		metrics = strconv.FormatInt(*c.MetricsMismatches, 10)
	}
	fmt.Fprintf(w, "\n\nchecks: expected deliveries %d, unique keys %d, duplicates %d, metrics mismatches %s, requests miscounted %d, retries %d (sink failed %d calls), failed for good %d\n",
		c.ExpectedDeliveries, c.UniqueKeys, c.DuplicateDeliveries, metrics, c.CountMismatches, c.Retries, c.SinkFailedCalls, c.FailedDeliveries)
	if a := r.Stages; a != nil {
		fmt.Fprintf(w, "stages: %d processes per stage; topics: %d chunks, %d checked, %d batches, %d outcomes, duplicates %v, %d delivered by the outcomes; %d messages posted again after aborted delivery polls (dropped by key)",
			a.Procs, a.Chunks, a.Checked, a.Batches, a.Outcomes, a.Duplicates, a.Delivered, a.Resends)
		if a.Killed != "" {
			fmt.Fprintf(w, "; stage %s SIGKILLed and restarted %d times", a.Killed, a.Kills)
		}
		fmt.Fprintln(w)
	}
	if r.Pass {
		fmt.Fprintln(w, "exact: pass")
	} else {
		fmt.Fprintf(w, "exact: FAIL: %s\n", strings.Join(r.Failures, "; "))
	}
	return nil
}

// group writes n with thousands separators.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
