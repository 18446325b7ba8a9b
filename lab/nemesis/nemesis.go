// Package nemesis tests logbook's multi-node deployment the way Jepsen
// tests databases: it runs a real cluster — its own PostgreSQL as the
// shared store, its own Kafka broker as the bus, write nodes publishing
// to it, a replica fed by Kafka and one fed over HTTP, nginx in front —
// drives client workloads through nginx that record every operation
// (invocation, completion or timeout, result), injects faults on a seeded
// random schedule, heals each, and after the last heal checks what
// cannot be argued with: every acknowledged write is in the store and
// answered by the API, a command retried with its idempotency key took
// effect once, the kv compare-and-set history (two `logbook kv serve`
// nodes on the same store) is linearizable, the replicas converge to the
// store's view, the Kafka
// topic holds the log with no gap and no duplicate, and the publisher
// resumed. `logbook nemesis` runs it.
//
// # Extending it
//
// Faults and workloads are plug-ins, given in Config.Faults and
// Config.Workloads beside the built-in ones:
//
//   - A Fault has a Kind (its name in --faults and in the summary's
//     count) and Inject, which breaks something in the running Env and
//     returns the heal, and may have a Lane (see Lane): what it acts
//     on. The runner records both times; it runs the lanes at once and,
//     within each, one fault at a time, in a seeded random order that
//     gives every kind its turn each round.
//   - A Workload runs clients until its context ends (Run), recording
//     every operation in the Recorder, and afterwards checks its own
//     history against the healed cluster (Check), filling its fields of
//     the Summary and returning its violations.
//
// Network faults act on lab/faultnet proxies the runner puts between
// each node and the store (Env.PGProxies), nginx and each node
// (Env.NginxProxies), and each node and the broker (Env.KafkaProxies,
// one broker listener per node). Config.StoreFor, if set, gives each
// node's store URL from its name and the URL through its proxy (which
// carries application_name=logbook-<node>: the pause fault finds a
// node's sessions by it; keep it). Env gives a fault or a workload everything running: the cluster,
// the store, the broker, the binary, a client.
package nemesis

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/logbook/logbook/lab/cluster"
	"github.com/logbook/logbook/lab/faultnet"
)

// Fault is one kind of fault and its heal.
type Fault interface {
	// Kind names the fault: kill-writer, pause-node, …
	Kind() string
	// Inject breaks something, returns what it broke (a node's name,
	// say) and the function that heals it. The heal must leave the
	// cluster as it found it: processes running, connections allowed.
	Inject(ctx context.Context, env *Env, rng *rand.Rand) (target string, heal func(context.Context) error, err error)
}

// Workload is a client workload and its check.
type Workload interface {
	Name() string
	// Run runs clients until ctx ends, recording every operation.
	Run(ctx context.Context, env *Env, rec *Recorder) error
	// Check runs after the last heal, once every process is up: it
	// checks the history against the cluster, fills its fields of sum,
	// and returns what does not hold.
	Check(ctx context.Context, env *Env, rec *Recorder, sum *Summary) []Violation
}

// Violation is a check that does not hold.
type Violation struct {
	Check  string `json:"check"`
	Detail string `json:"detail"`
}

func (v Violation) String() string { return v.Check + ": " + v.Detail }

// Env is the running system, as faults and workloads see it.
type Env struct {
	Cluster *cluster.Cluster
	Store   *cluster.Store
	Broker  *Broker
	Binary  string
	Dir     string
	// Bus is the kafka:// URL of the log's topic.
	Bus string
	// Token is a bearer token with the roles planner and viewer's
	// (role planner; every token is a viewer), AdminToken of role admin.
	Token, AdminToken string
	Log               *slog.Logger
	// Client is what workloads use: short timeouts, keep-alive.
	Client *http.Client
	// PauseTimeout is how long the pause fault holds a node stopped.
	PauseTimeout time.Duration
	// Plant is the planted bug, for the test that shows the checks
	// catch one ("" none).
	Plant string
	// KV are the kv nodes (logbook kv serve on the store) the kv
	// workload drives.
	KV []*cluster.Node
	// PGProxies stand between each node (by name, kv nodes included)
	// and PostgreSQL; NginxProxies between nginx and each node of the
	// cluster. The network faults act on them.
	PGProxies, NginxProxies map[string]*faultnet.Proxy
	// KafkaProxies stand between each node that uses the bus and the
	// broker: each reaches it at a listener of its own, advertised at
	// its proxy (faultnet.KafkaNodes).
	KafkaProxies map[string]*faultnet.Proxy
}

// Summary is the run's outcome, as `logbook nemesis --json` prints it.
type Summary struct {
	Seed    uint64 `json:"seed"`
	Seconds float64
	// Start is when the workloads started: the timeline's zero.
	Start time.Time
	Report
	// Timeline is every fault injected, in order.
	Timeline []FaultRecord `json:"timeline"`
	rec      *Recorder
}

// Report is what `logbook nemesis --json` prints: exactly the documented
// keys.
type Report struct {
	Operations int `json:"operations"`
	// Acknowledged writes, and those missing from the store or from the
	// API's answer after the last heal.
	Acknowledged     int `json:"acknowledged"`
	LostAcknowledged int `json:"lost_acknowledged"`
	// DuplicateEffects counts commands that took effect more than once.
	DuplicateEffects int `json:"duplicate_effects"`
	// Linearizable is the verdict of a workload that checks
	// linearizability; null when none ran (not checked).
	Linearizable      *bool          `json:"linearizable"`
	ReplicasConverged bool           `json:"replicas_converged"`
	KafkaGaps         int            `json:"kafka_gaps"`
	KafkaDuplicates   int            `json:"kafka_duplicates"`
	Faults            map[string]int `json:"faults"`
	MaxRecoveryS      float64        `json:"max_recovery_s"`
	Violations        []Violation    `json:"violations"`
}

// SlowestRecovery is the fault after whose heal the first write took
// longest (MaxRecoveryS), if any was healed.
func (s *Summary) SlowestRecovery() (FaultRecord, bool) {
	var worst FaultRecord
	found := false
	for _, f := range s.Timeline {
		if !found || f.RecoveryS > worst.RecoveryS {
			worst, found = f, true
		}
	}
	return worst, found
}

// JSON is the summary with exactly the keys of `logbook nemesis --json`.
func (s *Summary) JSON() any {
	o := s.Report
	if o.Violations == nil {
		o.Violations = []Violation{}
	}
	return o
}

// FaultRecord is one injected fault.
type FaultRecord struct {
	Kind   string    `json:"kind"`
	Lane   string    `json:"lane"`
	Target string    `json:"target"`
	Start  time.Time `json:"start"`
	Healed time.Time `json:"healed"` // when the heal finished
	// Whole is when the faults on the write path still on at the heal
	// (other lanes') had healed too: Healed, or later (see recovery).
	Whole time.Time `json:"whole"`
	// RecoveryS is the time from Whole to the first write acknowledged
	// after it.
	RecoveryS float64 `json:"recovery_s"`
	Err       string  `json:"err,omitempty"`
}

// Config configures a run.
type Config struct {
	Binary    string // the logbook binary the nodes run
	Nginx     string // default /usr/sbin/nginx
	KafkaLibs string // the broker's jars (KafkaLibs)
	Dir       string // logs and data; a temporary directory if empty (removed unless Keep)
	Keep      bool
	Seed      uint64
	// Duration of the fault schedule; the checks come after it.
	Duration time.Duration
	// Rounds is how many rounds (each of a lane's kinds once) each lane
	// spreads over Duration (default one per RoundEvery of it).
	Rounds int
	// MinRounds: the schedule goes on past Duration until this many
	// rounds are done.
	MinRounds int
	// Kinds of faults to inject (nil: every built-in and Extra one).
	Kinds []string
	// Faults and Workloads are added to the built-in ones.
	Faults    []Fault
	Workloads []Workload
	// Hold is how long a fault lasts before its heal (default 2 s);
	// Quiet the pause after a heal before the lane's next fault
	// (default 1 s).
	Hold, Quiet time.Duration
	// PauseTimeout is how long a node stays stopped (default 6 s: past
	// the nodes' idle-in-transaction timeout, IdleInTransaction, and the
	// publisher lock's 5 s ping).
	PauseTimeout time.Duration
	// Clients of the flights workload (default 8). Each waits on one
	// command at a time, and a command to a paused or cut-off node hangs
	// until the client's 3 s timeout: with too few clients every one can
	// be waiting on the same stalled node, and the recovery measured
	// after another fault's heal is the workload's, not the cluster's.
	Clients int
	// KVNodes is how many kv nodes the kv workload drives (default 2;
	// negative: no kv workload), KVClients its clients (default 4).
	KVNodes, KVClients int
	// StoreFor gives a node's store URL from its name and the store's
	// own URL (see the package doc).
	StoreFor func(node, store string) (string, error)
	// ConvergeWithin bounds the time the replicas and the publisher
	// have after the last heal (default 60 s).
	ConvergeWithin time.Duration
	// Plant plants a bug for the test that the checks catch one:
	// "skip-event" puts a proxy between the HTTP-fed replica and the
	// node it follows that drops an event of the live stream now and
	// then (a replica that skips an event). Never set outside that
	// test.
	Plant string
	Log   *slog.Logger
	// Progress, if set, receives a line per fault.
	Progress func(string)
}

// RoundEvery is how long a round of each lane takes unless
// Config.Rounds says otherwise: every kind of fault once per 25 s, 24
// times in ten minutes.
const RoundEvery = 25 * time.Second

// Kinds lists the built-in faults' kinds.
func Kinds() []string {
	var out []string
	for _, f := range builtinFaults() {
		out = append(out, f.Kind())
	}
	return out
}

// Recorder is the history of a run: every operation of every workload,
// as it was invoked and completed.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []*Op
}

// Outcome is how an operation ended.
type Outcome string

const (
	OK      Outcome = "ok"      // acknowledged
	Fail    Outcome = "fail"    // definitely not applied (the server said so)
	Unknown Outcome = "unknown" // timed out or failed in a way that leaves it open
)

// Op is one operation of a workload.
type Op struct {
	Workload string
	Client   int
	Kind     string // create, add-leg, read, …
	Write    bool
	Key      string // idempotency key, or what names the operation
	Value    string
	Invoke   time.Time
	Complete time.Time
	Outcome  Outcome
	Result   string // position, answer, or error
	Attempts int
}

// Invoke records an operation's invocation.
func (r *Recorder) Invoke(op *Op) *Op {
	op.Invoke = time.Now()
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
	return op
}

// Complete records its completion.
func (r *Recorder) Complete(op *Op, out Outcome, result string) {
	r.mu.Lock()
	op.Complete, op.Outcome, op.Result = time.Now(), out, result
	r.mu.Unlock()
}

// Ops returns the history so far (the operations are shared, not copied:
// read them once the workloads have stopped).
func (r *Recorder) Ops() []*Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

// firstWriteAfter is the completion time of the first write acknowledged
// after t, or the zero time.
func (r *Recorder) firstWriteAfter(t time.Time) time.Time {
	var first time.Time
	for _, op := range r.Ops() {
		// The kv nodes are not the flights service: its writes measure
		// its recovery.
		if op.Workload == "kv" {
			continue
		}
		if op.Write && op.Outcome == OK && op.Complete.After(t) && (first.IsZero() || op.Complete.Before(first)) {
			first = op.Complete
		}
	}
	return first
}

// Run starts the cluster, runs the workloads under the fault schedule,
// heals, checks, stops everything and returns the summary. An error is
// a run that could not be made (no PostgreSQL, a cluster that would not
// start); what the checks find is in Summary.Violations.
func Run(ctx context.Context, cfg Config) (sum *Summary, err error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string) {}
	}
	cfg.Hold = orDefault(cfg.Hold, 2*time.Second)
	cfg.Quiet = orDefault(cfg.Quiet, time.Second)
	if cfg.Rounds <= 0 {
		cfg.Rounds = max(1, int(cfg.Duration/RoundEvery))
	}
	cfg.PauseTimeout = orDefault(cfg.PauseTimeout, 6*time.Second)
	cfg.ConvergeWithin = orDefault(cfg.ConvergeWithin, 60*time.Second)
	if cfg.Clients <= 0 {
		cfg.Clients = 8
	}
	if cfg.KVNodes == 0 {
		cfg.KVNodes = 2
	}
	if cfg.KVClients <= 0 {
		cfg.KVClients = 4
	}
	faults, err := selectFaults(cfg)
	if err != nil {
		return nil, err
	}
	libs, err := KafkaLibs(cfg.KafkaLibs)
	if err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "logbook-nemesis-")
		if err != nil {
			return nil, err
		}
		cfg.Dir = d
		if !cfg.Keep {
			defer os.RemoveAll(d)
		}
	}
	env, stop, err := startEnv(ctx, cfg, libs)
	if err != nil {
		return nil, err
	}
	defer stop()

	workloads := []Workload{&Flights{Clients: cfg.Clients}}
	if len(env.KV) > 0 {
		workloads = append(workloads, &KV{Clients: cfg.KVClients, Seed: cfg.Seed + 1})
	}
	workloads = append(workloads, cfg.Workloads...)
	rec := &Recorder{start: time.Now()}
	sum = &Summary{Seed: cfg.Seed, Report: Report{Faults: map[string]int{}, ReplicasConverged: true}}
	wctx, wcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	werrs := make([]error, len(workloads))
	for i, w := range workloads {
		wg.Go(func() { werrs[i] = w.Run(wctx, env, rec) })
	}

	// The schedule: a lane per kind of thing the faults break (see
	// Lane), all at once; within a lane one fault at a time, in rounds
	// that give each of its kinds one turn in a seeded random order,
	// until the duration is spent.
	end := rec.start.Add(cfg.Duration)
	sched := &schedule{cfg: cfg, env: env, sum: sum, start: rec.start, end: end}
	sctx, scancel := context.WithCancel(ctx)
	var lw sync.WaitGroup
	ls := lanes(faults)
	for i, lane := range ls {
		lw.Go(func() { sched.lane(ctx, sctx, scancel, i, len(ls), lane) })
	}
	lw.Wait()
	scancel()
	timeline := sched.timeline
	slices.SortFunc(timeline, func(a, b FaultRecord) int { return a.Start.Compare(b.Start) })
	// A little traffic after the last heal, so that its recovery is seen.
	sleepCtx(ctx, 3*time.Second)
	wcancel()
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for i, err := range werrs {
		if err != nil {
			sum.Violations = append(sum.Violations, Violation{"workload", fmt.Sprintf("%s: %v", workloads[i].Name(), err)})
		}
	}
	sum.Seconds = time.Since(rec.start).Seconds()
	sum.Start = rec.start

	// Recovery: from each heal to the first write acknowledged after it.
	recovery(timeline, rec, sum)
	sum.Timeline = timeline
	// The timeline, each fault's recovery with it, beside the logs.
	if b, err := json.MarshalIndent(timeline, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(cfg.Dir, "timeline.json"), b, 0o644)
	}

	cctx, ccancel := context.WithTimeout(ctx, cfg.ConvergeWithin+2*time.Minute)
	defer ccancel()
	for _, w := range workloads {
		sum.Violations = append(sum.Violations, w.Check(cctx, env, rec, sum)...)
	}
	sum.Violations = append(sum.Violations, checkCluster(cctx, env, cfg.ConvergeWithin, sum)...)
	sum.Operations = len(rec.Ops())
	sum.rec = rec
	return sum, nil
}

// schedule runs the lanes of faults and keeps what they did.
type schedule struct {
	cfg        Config
	env        *Env
	start, end time.Time
	mu         sync.Mutex // guards what follows, and sum's Faults and Violations
	sum        *Summary
	timeline   []FaultRecord
}

// lane injects faults, one at a time, paced so that its Rounds rounds
// spread evenly over the duration: its k-th fault starts k slots of
// Duration ÷ (Rounds × its kinds) after its first, or Quiet after the
// last heal when that one ran late (so the lane catches up after a slow
// heal), until the duration is spent and MinRounds are done. Lane i of n
// starts i/n of a slot late, so that the lanes' faults do not all begin
// at once. A fault that cannot be injected or healed ends the whole
// schedule (stop): the cluster is no longer what the checks assume.
// Heals run on ctx, which only Ctrl-C ends; the waits on sctx, which
// stop ends too.
func (s *schedule) lane(ctx, sctx context.Context, stop func(), i, n int, faults []Fault) {
	cfg := s.cfg
	// Lane 0 draws what a run of one lane always drew.
	seed := cfg.Seed + uint64(i)*0x51afd7ed558ccd
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	slot := cfg.Duration / time.Duration(cfg.Rounds*len(faults))
	first := s.start.Add(cfg.Quiet + slot*time.Duration(i)/time.Duration(n))
	next, k := first, 0
	more := func(round int) bool {
		return sctx.Err() == nil && (round < cfg.MinRounds || time.Now().Before(s.end))
	}
	for round := 0; more(round); round++ {
		for _, j := range rng.Perm(len(faults)) {
			sleepCtx(sctx, time.Until(next))
			if !more(round) {
				return
			}
			f := faults[j]
			fr := FaultRecord{Kind: f.Kind(), Lane: Lane(f), Start: time.Now()}
			k++
			next = first.Add(slot * time.Duration(k))
			target, heal, err := f.Inject(ctx, s.env, rng)
			fr.Target = target
			if err != nil {
				fr.Err = err.Error()
				fr.Healed = time.Now()
				s.record(fr, false, Violation{"fault", fmt.Sprintf("%s: inject: %v", f.Kind(), err)})
				stop()
				return
			}
			sleepCtx(sctx, cfg.Hold)
			// On Ctrl-C (ctx ends) the heal gives up at once: everything
			// is about to be stopped anyway.
			hctx, hcancel := context.WithTimeout(ctx, 3*time.Minute)
			err = heal(hctx)
			hcancel()
			fr.Healed = time.Now()
			if err != nil {
				fr.Err = err.Error()
				s.record(fr, true, Violation{"heal", fmt.Sprintf("%s %s: %v", f.Kind(), target, err)})
				stop()
				return
			}
			s.record(fr, true)
			if q := fr.Healed.Add(cfg.Quiet); next.Before(q) {
				next = q
			}
		}
	}
}

// record adds a fault to the timeline, to its kind's count if it was
// injected, and v to the violations.
func (s *schedule) record(fr FaultRecord, injected bool, v ...Violation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timeline = append(s.timeline, fr)
	if injected {
		s.sum.Faults[fr.Kind]++
	}
	s.sum.Violations = append(s.sum.Violations, v...)
	s.cfg.Progress(fmt.Sprintf("%6.1fs %-11s %-18s %-10s %.1fs", fr.Start.Sub(s.start).Seconds(), fr.Lane, fr.Kind, fr.Target, fr.Healed.Sub(fr.Start).Seconds()))
}

// Lane names what a fault breaks: faults of one lane never overlap,
// faults of different lanes may. A Fault given in Config.Faults names
// its lane with a Lane() string method, or shares the writers' lane.
func Lane(f Fault) string {
	if l, ok := f.(interface{ Lane() string }); ok {
		return l.Lane()
	}
	return laneWriters
}

// The built-in lanes: what their faults act on.
const (
	laneWriters    = "writers"     // a write node or kv node killed, the publisher's write node paused
	laneReplicas   = "replicas"    // a replica killed
	lanePostgres   = "postgres"    // the database server, killed or stopped
	laneStoreLinks = "store-links" // each node's connections to PostgreSQL (its proxy): cut, reset or slowed
	laneProxyLinks = "proxy-links" // nginx's connections to each node (their proxies): cut
	laneBroker     = "broker"      // the broker killed, a node's connections to it cut
)

// lanes groups faults by Lane, in the order of each lane's first fault.
func lanes(faults []Fault) [][]Fault {
	var names []string
	by := map[string][]Fault{}
	for _, f := range faults {
		l := Lane(f)
		if _, ok := by[l]; !ok {
			names = append(names, l)
		}
		by[l] = append(by[l], f)
	}
	out := make([][]Fault, len(names))
	for i, n := range names {
		out[i] = by[n]
	}
	return out
}

// recovery sets each fault's Whole and RecoveryS, and the summary's
// MaxRecoveryS: the time from each heal to the first flights write
// acknowledged after it. A heal while a fault on the write path is still
// on (onWritePath: a write node, PostgreSQL, a write node's link to it or
// from nginx) is not yet a recovery: it counts from when those faults
// have healed too. Faults off the write path (the broker, the replicas,
// the kv nodes) never delay the count, and a fault that begins after the
// heal counts in full.
func recovery(timeline []FaultRecord, rec *Recorder, sum *Summary) {
	for i := range timeline {
		fr := &timeline[i]
		fr.Whole = fr.Healed
		for _, g := range timeline {
			if onWritePath(g) && g.Start.Before(fr.Healed) && g.Healed.After(fr.Whole) {
				fr.Whole = g.Healed
			}
		}
		first := rec.firstWriteAfter(fr.Whole)
		if first.IsZero() {
			sum.Violations = append(sum.Violations, Violation{"recovery", fmt.Sprintf("no write acknowledged after the heal of %s %s", fr.Kind, fr.Target)})
			continue
		}
		fr.RecoveryS = first.Sub(fr.Whole).Seconds()
		sum.MaxRecoveryS = max(sum.MaxRecoveryS, round2(fr.RecoveryS))
	}
}

// onWritePath says whether a fault stands between the flights clients
// and the store: PostgreSQL down, or a flights write node down, paused or
// cut off from PostgreSQL or from nginx. A fault of a lane the runner
// does not know is taken to be off it (it delays no count).
func onWritePath(f FaultRecord) bool {
	switch f.Lane {
	case lanePostgres:
		return true
	case laneWriters, laneStoreLinks, laneProxyLinks:
		return strings.HasPrefix(f.Target, "writer-")
	}
	return false
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// selectFaults picks the faults cfg.Kinds names, built-in or extra.
func selectFaults(cfg Config) ([]Fault, error) {
	all := append(builtinFaults(), cfg.Faults...)
	if len(cfg.Kinds) == 0 {
		return all, nil
	}
	byKind := map[string]Fault{}
	var names []string
	for _, f := range all {
		byKind[f.Kind()] = f
		names = append(names, f.Kind())
	}
	var out []Fault
	for _, k := range cfg.Kinds {
		f, ok := byKind[k]
		if !ok {
			return nil, fmt.Errorf("nemesis: no fault %q; the faults are %s", k, strings.Join(names, ", "))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

const (
	plannerToken = "nemesis-planner"
	adminToken   = "nemesis-admin"
	viewerToken  = "nemesis-viewer"
)

// startEnv starts PostgreSQL, the broker, the cluster and nginx; stop
// ends them all, whatever happened.
func startEnv(ctx context.Context, cfg Config, libs string) (env *Env, stop func(), err error) {
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	// (A failed start returns a nil stop: the deferred call uses its own.)
	defer func() {
		if err != nil {
			stopAll()
		}
	}()
	env = &Env{Dir: cfg.Dir, Binary: cfg.Binary, Token: plannerToken, AdminToken: adminToken, Log: cfg.Log,
		PauseTimeout: cfg.PauseTimeout, Plant: cfg.Plant,
		Client:    &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		PGProxies: map[string]*faultnet.Proxy{}, NginxProxies: map[string]*faultnet.Proxy{}}
	stops = append(stops, env.closeProxies)
	env.Store, err = cluster.StartPostgres(ctx, nil, cfg.Dir, 0)
	if err != nil {
		return nil, nil, err
	}
	stops = append(stops, env.Store.Stop)
	// The nodes on the bus: the write nodes and the Kafka-fed replica.
	busNodes := []string{"writer-1", "writer-2", "replica-1"}
	var kafkaNames []string
	for _, n := range busNodes {
		kafkaNames = append(kafkaNames, strings.ReplaceAll(n, "-", "_"))
	}
	listeners, kproxies, err := faultnet.KafkaNodes(kafkaNames...)
	if err != nil {
		return nil, nil, err
	}
	env.KafkaProxies = map[string]*faultnet.Proxy{}
	for _, n := range busNodes {
		env.KafkaProxies[n] = kproxies[strings.ToUpper(strings.ReplaceAll(n, "-", "_"))]
	}
	env.Broker, err = startBroker(ctx, libs, filepath.Join(cfg.Dir, "kafka"), listeners)
	if err != nil {
		return nil, nil, err
	}
	stops = append(stops, env.Broker.Stop)
	env.Bus = "kafka://" + env.Broker.Addr + "/nemesis"
	// Every node reaches the store through a proxy of its own, which the
	// network faults cut, reset or slow; Config.StoreFor goes on top.
	storeFor := func(node, store string) (string, error) {
		u, err := env.proxyStore(node, store)
		if err != nil || cfg.StoreFor == nil {
			return u, err
		}
		return cfg.StoreFor(node, u)
	}
	var sfErr error
	ccfg := cluster.Config{Binary: cfg.Binary, Store: env.Store.URL, Bus: env.Bus, Writers: 2, Replicas: 1, HTTPReplicas: 1,
		Dir: filepath.Join(cfg.Dir, "cluster"), Nginx: cfg.Nginx, ReplicaToken: viewerToken,
		Tokens: plannerToken + " planner\n" + adminToken + " admin\n" + viewerToken + " viewer\n",
		BusFor: func(node string) string {
			if p := env.KafkaProxies[node]; p != nil {
				return "kafka://" + p.Addr() + "/nemesis"
			}
			sfErr = fmt.Errorf("nemesis: no Kafka listener for %s", node)
			return env.Bus
		},
		NginxTo: func(n *cluster.Node) string {
			a, err := env.proxyNginx(n)
			if err != nil {
				sfErr = err
			}
			return a
		},
		StoreFor: func(node string) string {
			u, err := storeFor(node, nodeStoreURL(env.Store.URL, node))
			if err != nil {
				sfErr = err
			}
			return u
		}}
	if cfg.Plant == "skip-event" {
		p, err := startSkipper()
		if err != nil {
			return nil, nil, err
		}
		stops = append(stops, p.Close)
		ccfg.ReplicaOf = func(writers []*cluster.Node) string {
			if err := p.follow(writers[0].URL); err != nil {
				sfErr = err
			}
			return p.URL
		}
	}
	env.Cluster, err = cluster.Start(ctx, ccfg)
	if sfErr != nil && err == nil {
		env.Cluster.Stop()
		err = sfErr
	}
	if err != nil {
		return nil, nil, err
	}
	// (The closures take what they stop now: a failed start returns a
	// nil env.)
	c := env.Cluster
	stops = append(stops, func() {
		// A paused node cannot stop: resume every one first.
		for _, n := range c.Nodes() {
			_ = n.Signal(sigCont)
		}
		c.Stop()
	})
	for i := range max(cfg.KVNodes, 0) {
		name := fmt.Sprintf("kv-%d", i+1)
		store, err := storeFor(name, nodeStoreURL(env.Store.URL, name))
		if err != nil {
			return nil, nil, err
		}
		n, err := startKV(ctx, cfg.Binary, cfg.Dir, name, store)
		if err != nil {
			return nil, nil, err
		}
		env.KV = append(env.KV, n)
		stops = append(stops, n.Kill)
	}
	return env, stopAll, nil
}

// IdleInTransaction is the nodes' idle_in_transaction_session_timeout:
// shorter than the store's default, so that a pause (Config.PauseTimeout)
// outlasts it without holding the lanes long.
const IdleInTransaction = 4 * time.Second

// nodeStoreURL is a node's store URL: raw with application_name
// logbook-name, so that each node's sessions say whose they are in
// pg_stat_activity, and IdleInTransaction.
func nodeStoreURL(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	q.Set("application_name", "logbook-"+name)
	q.Set("idle_in_transaction_session_timeout", IdleInTransaction.String())
	u.RawQuery = q.Encode()
	return u.String()
}
