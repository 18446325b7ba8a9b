package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/logbook/logbook/lab/cgroup"
	"github.com/logbook/logbook/lab/cluster"
	"github.com/logbook/logbook/lab/loadtest"
)

// ScalingConfig is the flights thesis's scaling experiments (Tables
// 6.1–6.3) on one machine, each process of the cluster on a CPU quota of
// its own (lab/cgroup), so that a node, not the shared machine, is what
// runs out.
type ScalingConfig struct {
	Mode   string // capacity, read or write
	Binary string // the logbook binary the nodes run
	Store  string // a postgres:// URL; empty: start one
	Nginx  string
	Dir    string // logs, the season
	RunDir string // cluster.RunDir() if empty
	Nodes  []int
	Budget Budget
	Rates  []float64 // capacity: offered rates, one node
	Reps   int       // capacity: repetitions per rate; read: per node count
	Knee   float64   // read: one node's knee; 0: measure it first
	Ramp   time.Duration
	Hold   time.Duration
	Scale  float64 // write: the thesis's scenarios scaled by this
	// PlannerScale, if positive, scales the planners instead of Scale
	// (which then scales the legs alone).
	PlannerScale float64
	Pause        time.Duration // write: between the warm-up and the measured run
	Weeks        int           // the season: weeks …
	Flights      int           // … of this many flights a week
	Predict      []int         // also predict these node counts
	// ShortPeriods puts every quota on the shortest period the kernel
	// allows (cgroup.ShortPeriod) rather than its default 100 ms.
	ShortPeriods bool
	Log          io.Writer
}

// Budget is the CPU quota of each kind of process (0: none).
type Budget struct {
	Node, Store, Proxy, Loadgen float64
	Oversubscribe               bool
}

// ScalingRow is one measured configuration.
type ScalingRow struct {
	Nodes          int                        `json:"nodes"`
	Scenario       string                     `json:"scenario,omitempty"`
	OfferedPerSec  float64                    `json:"offered_per_sec"`
	AchievedPerSec float64                    `json:"achieved_per_sec"`
	P50            float64                    `json:"p50_ms"`
	P75            float64                    `json:"p75_ms"`
	P95            float64                    `json:"p95_ms"`
	P99            float64                    `json:"p99_ms"`
	Max            float64                    `json:"max_ms"`
	Requests       int                        `json:"requests"`
	Failures       int                        `json:"failures"`
	Reps           int                        `json:"reps,omitempty"`
	Efficiency     float64                    `json:"efficiency"`
	CPU            map[string]cluster.KindCPU `json:"cpu"`
	StoreSaturated bool                       `json:"store_saturated"`
	// StoreTxPerCommand (write) is the appending transactions PostgreSQL
	// committed per command: 1 ÷ the commands a batch carried on average
	// (0: unknown, PostgreSQL without pg_stat_statements).
	StoreTxPerCommand float64  `json:"store_transactions_per_command,omitempty"`
	Predicted         *float64 `json:"predicted_per_sec,omitempty"`
	PredictedP99      *float64 `json:"predicted_p99_ms,omitempty"`
	// Warm-up (write): the first run on the fresh cluster.
	WarmupPerSec float64 `json:"warmup_per_sec,omitempty"`
	WarmupP99    float64 `json:"warmup_p99_ms,omitempty"`
	// Thesis is the thesis's value for the row, where it has one: its
	// rate (capacity, read) or command frequency (write), and p99.
	ThesisPerSec float64 `json:"thesis_per_sec,omitempty"`
	ThesisP99    float64 `json:"thesis_p99_ms,omitempty"`
	// Planners (write) the row's load generator ran.
	Planners int `json:"planners,omitempty"`
}

// Demand is the calibrated service demand at one kind of process:
// CPU-seconds per request (service demand law).
type Demand struct {
	Kind    string  `json:"kind"`
	Seconds float64 `json:"cpu_seconds_per_request"`
}

// PaperRow is one predicted configuration that was not run.
type PaperRow struct {
	Nodes      int     `json:"nodes"`
	NodeCPUs   float64 `json:"node_cpus"`
	StoreCPUs  float64 `json:"store_cpus"`
	PerSec     float64 `json:"predicted_per_sec"`
	Bottleneck string  `json:"bottleneck"`
	StoreUtil  float64 `json:"store_utilisation"`
}

// ScalingResult is the experiment's outcome.
type ScalingResult struct {
	Mode        string  `json:"mode"`
	PerNodeCPUs float64 `json:"per_node_cpus"`
	Machine     float64 `json:"machine_cpus"`
	Season      string  `json:"season"`
	Scale       float64 `json:"scale,omitempty"`
	// PlannerScale is the planners' factor where it is not Scale.
	PlannerScale float64 `json:"planner_scale,omitempty"`
	// Planners and legs of each scenario as run (write).
	Scenarios  []ScenarioSize `json:"scenarios,omitempty"`
	KneePerSec float64        `json:"knee_per_sec,omitempty"`
	Rows       []ScalingRow   `json:"rows"`
	Demands    []Demand       `json:"demands,omitempty"`
	// Prediction: labelled so; configurations not measured.
	Prediction []PaperRow `json:"prediction,omitempty"`
}

// ScenarioSize is a write scenario as run: the thesis's, scaled.
type ScenarioSize struct {
	Name     string `json:"name"`
	Planners int    `json:"planners"`
	Legs     int    `json:"legs"`
}

// plannerScale is the factor scaling the scenarios' planners.
func (c ScalingConfig) plannerScale() float64 {
	if c.PlannerScale > 0 {
		return c.PlannerScale
	}
	return c.Scale
}

// size scales a thesis scenario: planners by plannerScale, legs by Scale.
func (c ScalingConfig) size(name string, planners, legs int) ScenarioSize {
	return ScenarioSize{Name: name,
		Planners: max(1, int(math.Round(float64(planners)*c.plannerScale()))),
		Legs:     max(1, int(math.Round(float64(legs)*c.Scale)))}
}

// The thesis's measured values (Tables 6.1–6.3).
var (
	thesisCapacity = map[float64]float64{125: 99, 150: 100, 175: 132, 200: 194, 225: 1625, 250: 2533, 275: 2626} // rate → p99 ms
	thesisRead     = map[int][2]float64{1: {175, 145}, 2: {350, 139}, 4: {700, 137}, 8: {1400, 134}, 12: {2100, 145}}
	thesisWrite    = map[string]map[int][2]float64{
		"lower":  {1: {4073, 474}, 2: {4444, 416}, 4: {4709, 281}, 8: {4528, 139}},
		"higher": {1: {3377, 1042}, 2: {4154, 609}, 4: {4321, 537}, 8: {4220, 247}},
	}
	thesisScenarios = []struct {
		name        string
		users, legs int
	}{{"lower", 1250, 750}, {"higher", 1500, 1000}}
)

// nodeCacheMiB is each node's aggregate cache: room for the write
// scenarios' rotations at one node (the higher one's 450 rotations of 300
// legs at --scale 0.3 weigh about 45 MiB, past the default 32 MiB, and one node
// then served half its rate reloading evicted ones), as the thesis's
// nodes kept every planner's rotation in memory.
const nodeCacheMiB = 512

const (
	scalingPlanner = "scaling-planner-token"
	scalingViewer  = "scaling-viewer-token"
)

// scalingRig is what every mode shares: the run, the store, the season.
type scalingRig struct {
	cfg     ScalingConfig
	run     *cluster.Run
	store   string
	loadgen *cgroup.Group
	joined  bool
}

func (s *scalingRig) logf(format string, a ...any) {
	if s.cfg.Log != nil {
		fmt.Fprintf(s.cfg.Log, format+"\n", a...)
	}
}

// Plan is the experiment's CPU budget at its largest configuration.
func (c ScalingConfig) Plan() cgroup.Plan {
	p := cgroup.Plan{Machine: cgroup.MachineCPUs()}
	most := 1
	for _, n := range c.Nodes {
		most = max(most, n)
	}
	writers, replicas := 1, most
	if c.Mode == "write" {
		// One replica keeps the view, so the write nodes run commands
		// only (as the thesis's write model did): a node following
		// the log would add store work per node, not per command.
		writers, replicas = most, 1
	} else if c.Mode == "capacity" {
		replicas = 1
	}
	for i := range writers {
		p.Parts = append(p.Parts, cgroup.Part{Name: fmt.Sprintf("writer-%d", i+1), Kind: "node", CPUs: c.Budget.Node})
	}
	for i := range replicas {
		p.Parts = append(p.Parts, cgroup.Part{Name: fmt.Sprintf("replica-%d", i+1), Kind: "replica", CPUs: c.Budget.Node})
	}
	return appendShared(p, c)
}

func appendShared(p cgroup.Plan, c ScalingConfig) cgroup.Plan {
	p.Parts = append(p.Parts,
		cgroup.Part{Name: "postgres", Kind: "store", CPUs: c.Budget.Store, Given: c.Store != ""},
		cgroup.Part{Name: "nginx", Kind: "proxy", CPUs: c.Budget.Proxy},
		cgroup.Part{Name: "loadgen", Kind: "loadgen", CPUs: c.Budget.Loadgen})
	return p
}

// Scaling runs the experiment of cfg.Mode.
func Scaling(ctx context.Context, cfg ScalingConfig) (res ScalingResult, err error) {
	if err := cfg.Plan().Check(cfg.Budget.Oversubscribe); err != nil {
		return res, err
	}
	run, cleaned, err := cluster.BeginRun(cfg.RunDir)
	if err != nil {
		return res, err
	}
	s := &scalingRig{cfg: cfg, run: run}
	if cfg.ShortPeriods {
		run.UseShortPeriods()
	}
	for _, c := range cleaned {
		s.logf("cleaned up after a dead run: %s", c)
	}
	defer func() {
		if e := run.End(); e != nil && err == nil {
			err = e
		}
	}()
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return res, err
	}
	s.store = cfg.Store
	if s.store == "" {
		// Started without its quota: the season is imported first, at
		// full speed, and the quota set before anything is measured.
		st, err := cluster.StartPostgres(ctx, run, cfg.Dir, 0)
		if err != nil {
			return res, err
		}
		defer st.Stop()
		s.store = st.URL
	} else {
		if s.store, err = withSearchPath(s.store, "scaling_"+strconv.FormatInt(time.Now().Unix(), 10)); err != nil {
			return res, err
		}
	}
	res = ScalingResult{Mode: cfg.Mode, PerNodeCPUs: cfg.Budget.Node, Machine: cgroup.MachineCPUs(), Scale: cfg.Scale,
		Season: fmt.Sprintf("%d weeks × %d flights a week (logbook flights generate --weeks %d --flights-per-week %d)", cfg.Weeks, cfg.Flights, cfg.Weeks, cfg.Flights)}
	if cfg.Mode == "write" {
		if cfg.PlannerScale > 0 && cfg.PlannerScale != cfg.Scale {
			res.PlannerScale = cfg.PlannerScale
		}
		for _, sc := range thesisScenarios {
			res.Scenarios = append(res.Scenarios, cfg.size(sc.name, sc.users, sc.legs))
		}
	} else {
		res.Scale = 0
		if err := s.seed(ctx); err != nil {
			return res, err
		}
	}
	if cfg.Store == "" {
		if err := run.SetQuota("postgres", cfg.Budget.Store); err != nil {
			return res, err
		}
	}
	if cfg.Budget.Loadgen > 0 {
		if s.loadgen, err = run.Group("loadgen", "loadgen", cfg.Budget.Loadgen); err != nil {
			return res, err
		}
	}
	switch cfg.Mode {
	case "capacity":
		err = s.capacity(ctx, &res)
	case "read":
		if cfg.Knee <= 0 {
			var capRes ScalingResult
			if err = s.capacity(ctx, &capRes); err != nil {
				return res, err
			}
			cfg.Knee = capRes.KneePerSec
			s.logf("one node's knee: %.0f requests/s", cfg.Knee)
		}
		res.KneePerSec = cfg.Knee
		err = s.read(ctx, &res, cfg.Knee)
	case "write":
		err = s.write(ctx, &res)
	default:
		err = fmt.Errorf("scaling: unknown mode %q (capacity, read or write)", cfg.Mode)
	}
	if err != nil {
		return res, err
	}
	predict(&res, cfg)
	return res, nil
}

// seed generates the season and imports it into the store.
func (s *scalingRig) seed(ctx context.Context) error {
	dir := filepath.Join(s.cfg.Dir, "season")
	s.logf("generating and importing the season (%d weeks × %d flights a week)", s.cfg.Weeks, s.cfg.Flights)
	gen := exec.CommandContext(ctx, s.cfg.Binary, "flights", "generate", "--out", dir, "--weeks", strconv.Itoa(s.cfg.Weeks), "--flights-per-week", strconv.Itoa(s.cfg.Flights))
	if out, err := gen.CombinedOutput(); err != nil {
		return fmt.Errorf("flights generate: %v\n%s", err, out)
	}
	imp := exec.CommandContext(ctx, s.cfg.Binary, "flights", "import", "--ssim", filepath.Join(dir, "schedule.ssim"), "--rotations", filepath.Join(dir, "rotations.csv"))
	imp.Env = append(os.Environ(), "LOGBOOK_STORE="+s.store)
	if out, err := imp.CombinedOutput(); err != nil {
		return fmt.Errorf("flights import: %v\n%s", err, out)
	}
	return nil
}

// start starts a cluster of writers and replicas on the rig's store, in
// its schema (the store URL's search_path) or, if schema is given, in a
// fresh one of that name.
func (s *scalingRig) start(ctx context.Context, writers, replicas int, schema string) (*cluster.Cluster, error) {
	t0 := time.Now()
	store := s.store
	if schema != "" {
		var err error
		if store, err = withSearchPath(store, schema); err != nil {
			return nil, err
		}
	}
	c, err := cluster.Start(ctx, cluster.Config{Binary: s.cfg.Binary, Store: store, Nginx: s.cfg.Nginx,
		Writers: writers, Replicas: replicas, Dir: filepath.Join(s.cfg.Dir, fmt.Sprintf("cluster-%dw%dr-%d", writers, replicas, time.Now().UnixNano())),
		Tokens: scalingPlanner + " planner\n" + scalingViewer + " viewer\n", Run: s.run, NodeCPUs: s.cfg.Budget.Node, ProxyCPUs: s.cfg.Budget.Proxy,
		ExtraArgs: []string{"--aggregate-cache-mib", strconv.Itoa(nodeCacheMiB)}})
	if err != nil {
		return nil, err
	}
	s.logf("%d write node(s), %d replica(s) ready in %s", writers, replicas, time.Since(t0).Round(100*time.Millisecond))
	// The load generator is this process: from now on it runs on its
	// own quota.
	if s.loadgen != nil && !s.joined {
		if err := s.loadgen.Add(os.Getpid()); err != nil {
			c.Stop()
			return nil, err
		}
		if os.Getenv("GOMAXPROCS") == "" {
			runtime.GOMAXPROCS(cgroup.GoProcs(s.cfg.Budget.Loadgen))
		}
		s.joined = true
	}
	return c, nil
}

// schema names a write configuration's schema.
func (s *scalingRig) schema(scenario string, nodes int) string {
	return fmt.Sprintf("scaling_%s_%d_%d", scenario, nodes, time.Now().UnixNano())
}

// stop stops the cluster and forgets its groups' processes.
func (s *scalingRig) stop(c *cluster.Cluster) {
	c.Stop()
	s.run.Forget("writer-", "replica-", "nginx")
}

// readOnce offers rate to the cluster for one ramp and hold, measuring
// the CPU of each kind over the hold.
func (s *scalingRig) readOnce(ctx context.Context, c *cluster.Cluster, rate float64) (loadtest.ReadResult, map[string]cluster.KindCPU, error) {
	client := loadtest.NewClient(c.URL, scalingViewer, 1, 0)
	defer client.Close()
	// The hold is measured: the CPU snapshot is taken as the ramp ends.
	ramp := s.cfg.Ramp
	done := make(chan cluster.Usage, 1)
	go func() {
		select {
		case <-time.After(ramp):
		case <-ctx.Done():
		}
		done <- s.run.Usage()
	}()
	// One request at a time per connection, as separate users' clients
	// send them, not pipelined: nginx answers a connection's pipelined
	// requests in turn, so a replica paused on its quota would hold up
	// requests queued behind its own on their way to the other replicas
	// (docs/benchmarks.md, "One request per connection, and the busiest
	// write node").
	r, err := loadtest.RunRead(ctx, client, loadtest.ReadConfig{Rate: rate, Ramp: ramp, Hold: s.cfg.Hold, MaxInFlight: 20000, Conns: readConns(rate)})
	u1 := s.run.Usage()
	u0 := <-done
	if err != nil {
		return r, nil, err
	}
	return r, s.run.CPUByKind(u0, u1), nil
}

// readConns is how many connections the load generator dials before a
// read run, one per readConnsPer requests a second and at least 16; a
// request that finds none idle opens another.
func readConns(rate float64) int {
	return max(16, int(math.Ceil(rate/readConnsPer)))
}

// readConnsPer is the requests a second per connection dialled up front.
const readConnsPer = 20

func (s *scalingRig) capacity(ctx context.Context, res *ScalingResult) error {
	c, err := s.start(ctx, 1, 1, "")
	if err != nil {
		return err
	}
	defer s.stop(c)
	for _, rate := range s.cfg.Rates {
		row := ScalingRow{Nodes: 1, OfferedPerSec: rate, Reps: s.cfg.Reps, CPU: map[string]cluster.KindCPU{}}
		for rep := range s.cfg.Reps {
			r, cpu, err := s.readOnce(ctx, c, rate)
			if err != nil {
				return err
			}
			s.logf("capacity %.0f/s rep %d: %.0f/s, p99 %.1f ms, %d failures", rate, rep+1, r.AchievedRate, r.P99, r.Failures)
			addRead(&row, r, cpu, s.cfg.Reps)
		}
		row.StoreSaturated = saturated(row.CPU)
		if p99, ok := thesisCapacity[rate]; ok {
			row.ThesisPerSec, row.ThesisP99 = rate, p99
		}
		res.Rows = append(res.Rows, row)
	}
	res.KneePerSec = Knee(res.Rows)
	return nil
}

// Knee is the highest offered rate whose p99 stays within twice the
// lowest rate's p99 with at most 0.1 % of requests failed (rows in
// increasing offered rate); 0 if none.
func Knee(rows []ScalingRow) float64 {
	var knee, base float64
	for i, r := range rows {
		if i == 0 {
			base = r.P99
		}
		if r.P99 <= 2*base && failRate(r) <= 0.001 {
			knee = r.OfferedPerSec
		}
	}
	return knee
}

// addRead averages one repetition into the row (the thesis's "average
// percentile" columns).
func addRead(row *ScalingRow, r loadtest.ReadResult, cpu map[string]cluster.KindCPU, reps int) {
	w := 1 / float64(reps)
	row.AchievedPerSec += r.AchievedRate * w
	row.P50 += r.P50 * w
	row.P75 += r.P75 * w
	row.P95 += r.P95 * w
	row.P99 += r.P99 * w
	row.Max += r.Max * w
	row.Requests += r.Requests
	row.Failures += r.Failures + r.Dropped
	for k, v := range cpu {
		a := row.CPU[k]
		a.Processes = v.Processes
		a.Quota = v.Quota
		a.Seconds = round3(a.Seconds + v.Seconds)
		a.Cores = round3(a.Cores + v.Cores*w)
		a.OfQuota = round3(a.OfQuota + v.OfQuota*w)
		a.Throttled = round3(a.Throttled + v.Throttled*w)
		row.CPU[k] = a
	}
}

func failRate(r ScalingRow) float64 {
	if r.Requests == 0 {
		return 1
	}
	return float64(r.Failures) / float64(r.Requests)
}

// saturated: PostgreSQL used at least 90 % of its quota.
func saturated(cpu map[string]cluster.KindCPU) bool {
	st, ok := cpu["store"]
	return ok && st.Quota > 0 && st.OfQuota >= 0.9
}

func (s *scalingRig) read(ctx context.Context, res *ScalingResult, knee float64) error {
	if knee <= 0 {
		return errors.New("scaling: no knee: even the lowest rate failed; lower --rates")
	}
	for _, n := range s.cfg.Nodes {
		c, err := s.start(ctx, 1, n, "")
		if err != nil {
			return err
		}
		row := ScalingRow{Nodes: n, OfferedPerSec: knee * float64(n), CPU: map[string]cluster.KindCPU{}, Reps: s.cfg.Reps}
		for rep := range s.cfg.Reps {
			r, cpu, err := s.readOnce(ctx, c, row.OfferedPerSec)
			if err != nil {
				s.stop(c)
				return err
			}
			s.logf("read, %d replica(s), rep %d: %.0f/s, p99 %.1f ms, %d failures", n, rep+1, r.AchievedRate, r.P99, r.Failures)
			addRead(&row, r, cpu, s.cfg.Reps)
		}
		s.stop(c)
		row.StoreSaturated = saturated(row.CPU)
		if t, ok := thesisRead[n]; ok {
			row.ThesisPerSec, row.ThesisP99 = t[0], t[1]
		}
		s.logf("read, %d replica(s): offered %.0f/s, served %.0f/s, p99 %.1f ms", n, row.OfferedPerSec, row.AchievedPerSec, row.P99)
		res.Rows = append(res.Rows, row)
	}
	efficiency(res.Rows)
	return nil
}

func efficiency(rows []ScalingRow) {
	var one float64
	for _, r := range rows {
		if r.Nodes == 1 && (one == 0) {
			one = r.AchievedPerSec
		}
	}
	for i := range rows {
		for _, r := range rows {
			if r.Nodes == 1 && r.Scenario == rows[i].Scenario {
				one = r.AchievedPerSec
			}
		}
		if one > 0 {
			rows[i].Efficiency = round3(rows[i].AchievedPerSec / (float64(rows[i].Nodes) * one))
		}
	}
}

func (s *scalingRig) write(ctx context.Context, res *ScalingResult) error {
	for _, sc := range thesisScenarios {
		size := s.cfg.size(sc.name, sc.users, sc.legs)
		users, legs := size.Planners, size.Legs
		for _, n := range s.cfg.Nodes {
			// Each configuration writes into a schema of its own: its
			// replica starts on an empty log rather than replaying every
			// run before it on its quota, and PostgreSQL's tables are as
			// small for the last row as for the first.
			c, err := s.start(ctx, n, 1, s.schema(sc.name, n))
			if err != nil {
				return err
			}
			row, err := s.writeOnce(ctx, c, n, sc.name, users, legs)
			s.stop(c)
			if err != nil {
				return err
			}
			if t, ok := thesisWrite[sc.name][n]; ok {
				row.ThesisPerSec, row.ThesisP99 = t[0], t[1]
			}
			res.Rows = append(res.Rows, row)
		}
	}
	efficiency(res.Rows)
	return nil
}

func (s *scalingRig) writeOnce(ctx context.Context, c *cluster.Cluster, n int, scenario string, users, legs int) (ScalingRow, error) {
	client := loadtest.NewClient(c.URL, scalingPlanner, min(users, 512), 200*time.Microsecond)
	defer client.Close()
	wcfg := loadtest.WriteConfig{Users: users, Legs: legs, Waves: 10, WaveInterval: 100 * time.Millisecond}
	// The thesis's warm-up: the same workload once, then a pause.
	wcfg.RunID = fmt.Sprintf("warm%d%s%d", n, scenario, time.Now().UnixNano())
	warm, err := loadtest.RunWrite(ctx, client, wcfg)
	if err != nil {
		return ScalingRow{}, err
	}
	select {
	case <-time.After(s.cfg.Pause):
	case <-ctx.Done():
		return ScalingRow{}, ctx.Err()
	}
	wcfg.RunID = fmt.Sprintf("meas%d%s%d", n, scenario, time.Now().UnixNano())
	probe := pgProbe{url: s.store}
	if err := probe.reset(ctx); err != nil {
		s.logf("PostgreSQL's statistics (pg_stat_statements): %v", err)
	}
	u0 := s.run.Usage()
	r, err := loadtest.RunWrite(ctx, client, wcfg)
	if err != nil {
		return ScalingRow{}, err
	}
	u1 := s.run.Usage()
	appendTx, err := probe.dump(ctx, filepath.Join(s.cfg.Dir, fmt.Sprintf("pgstats-%s-%d.txt", scenario, n)), r.Requests)
	if err != nil {
		s.logf("PostgreSQL's statistics (pg_stat_statements): %v", err)
	}
	row := ScalingRow{Nodes: n, Scenario: scenario, OfferedPerSec: 0, AchievedPerSec: r.CommandsPerSec,
		P50: r.P50, P75: r.P75, P95: r.P95, P99: r.P99, Max: r.Max, Requests: r.Requests, Failures: r.Failures,
		CPU: s.run.CPUByKind(u0, u1), WarmupPerSec: warm.CommandsPerSec, WarmupP99: warm.P99, Planners: users}
	row.StoreSaturated = saturated(row.CPU)
	if appendTx > 0 && r.Requests > 0 {
		row.StoreTxPerCommand = round3(float64(appendTx) / float64(r.Requests))
	}
	s.logf("write %s, %d node(s), %d planners: %.0f commands/s, p99 %.1f ms (warm-up %.0f/s, p99 %.1f ms), %d failures",
		scenario, n, users, row.AchievedPerSec, row.P99, warm.CommandsPerSec, warm.P99, r.Failures)
	return row, nil
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
