package loadtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logbook/logbook/lab/stats"
)

// The load models of RunTicketGroups.
const (
	// ModelClosed is JMeter's thread group: each user sends a request,
	// waits for its answer, thinks, and sends the next, so a group never
	// has more than its users' requests outstanding and offers less when
	// the server is slow.
	ModelClosed = "closed"
	// ModelOpen is the open Poisson load of RunTickets: a group's
	// requests leave at exponential gaps averaging Think/Users whatever
	// the server does.
	ModelOpen = "open"
)

// TicketGroup is one thread group: Users users asking for one sport.
type TicketGroup struct {
	Sport string `json:"sport"`
	Users int    `json:"users"`
}

// GroupsConfig is one test run of thread groups running in parallel, as
// the experiments of "Performance modelling and simulation of skewed
// demand in complex systems" (Shephard, 2017) ran JMeter: per sport a
// group of users, each looping Loops times over think → request, the
// think time exponential with mean Think (JMeter's Poisson random timer,
// which runs before each sampler). Meters are sampled every Tick and a
// meter's figure is its largest moving average over Window (the paper:
// logged every 10 s, the largest 1-minute moving average).
type GroupsConfig struct {
	Groups []TicketGroup
	// Model is ModelClosed (default) or ModelOpen (each group a Poisson
	// stream at Users/Think requests/s for Loops × Think).
	Model string
	// Control makes every request a control request (GET
	// /api/tickets/control, which touches no store node): the paper's
	// control test plan, the same groups sending control requests.
	Control     bool
	Think       time.Duration
	Loops       int
	Tick        time.Duration
	Window      time.Duration
	SearchLimit int    // tickets per search answer (default 10)
	MaxInFlight int    // open model: requests outstanding at most (default 8192); beyond, arrivals are dropped and counted
	Seed        uint64 // of the think times and arrivals (0: random)
}

// GroupsResult is a run's measurements: per meter, the largest moving
// average of its rate over the window (requests/s).
type GroupsResult struct {
	Model      string  `json:"model"`
	ControlRun bool    `json:"control_run"`
	Seconds    float64 `json:"seconds"` // the run's length
	Samples    int     `json:"samples"`
	// Sports is the server's meter of the requests each sport had
	// served (the paper's worker meters), Nodes each store node's
	// completed requests (the paper's Cassandra read counts), Control
	// the server's control requests, Groups the successful answers each
	// group received, counted by the client.
	Sports  map[string]float64 `json:"sports"`
	Nodes   map[string]float64 `json:"nodes"`
	Control float64            `json:"control"`
	Groups  map[string]float64 `json:"groups"`
	// MaxInFlight is the most requests each group had outstanding at
	// once: at most its users under the closed model.
	MaxInFlight map[string]int `json:"max_inflight"`
	Requests    int            `json:"requests"`
	Failures    int            `json:"failures"`
	Rejected    int            `json:"rejected"` // answered 429 or 503
	Dropped     int            `json:"dropped"`  // open model: not sent, MaxInFlight reached
	// Short says the run was shorter than one window: the figures are
	// the whole run's averages.
	Short        bool   `json:"short,omitempty"`
	FirstFailure string `json:"first_failure,omitempty"`
}

func (cfg *GroupsConfig) check() error {
	if cfg.Model == "" {
		cfg.Model = ModelClosed
	}
	if cfg.Model != ModelClosed && cfg.Model != ModelOpen {
		return fmt.Errorf("loadtest tickets: model %q (closed or open)", cfg.Model)
	}
	if len(cfg.Groups) == 0 || cfg.Think <= 0 || cfg.Loops < 1 || cfg.Tick <= 0 || cfg.Window < cfg.Tick {
		return errors.New("loadtest tickets: groups, think > 0, loops ≥ 1, tick > 0 and window ≥ tick required")
	}
	seen := map[string]bool{}
	for _, g := range cfg.Groups {
		if g.Users < 1 || seen[g.Sport] {
			return fmt.Errorf("loadtest tickets: group %q: one group per sport, at least one user", g.Sport)
		}
		seen[g.Sport] = true
	}
	if cfg.SearchLimit <= 0 {
		cfg.SearchLimit = 10
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 8192
	}
	return nil
}

// MaxMovingAverage is the largest rate of a counter over a window of w
// sample intervals: counts[i] is the counter's value at times[i]
// (seconds, increasing), and the moving average at sample i ≥ w is
// (counts[i] − counts[i−w]) / (times[i] − times[i−w]). With fewer than
// w+1 samples it is the whole series' average, and short is true.
func MaxMovingAverage(times, counts []float64, w int) (best float64, short bool) {
	n := len(times)
	if n < 2 || len(counts) != n || w < 1 {
		return 0, true
	}
	if n <= w {
		return (counts[n-1] - counts[0]) / (times[n-1] - times[0]), true
	}
	best = math.Inf(-1)
	for i := w; i < n; i++ {
		if dt := times[i] - times[i-w]; dt > 0 {
			best = max(best, (counts[i]-counts[i-w])/dt)
		}
	}
	return best, false
}

// groupsRun is one RunTicketGroups in progress.
type groupsRun struct {
	c        *TicketsClient
	cfg      GroupsConfig
	gen      *ticketsGen
	answers  []atomic.Uint64 // per group: successful answers received
	inflight []atomic.Int64
	maxIn    []atomic.Int64
	slots    chan struct{}
	dropped  atomic.Int64

	mu       sync.Mutex
	requests int
	failures int
	rejected int
	firstErr error
}

// series is the meters' samples.
type series struct {
	t       []float64
	sports  map[string][]float64
	nodes   map[string][]float64
	control []float64
	groups  [][]float64
}

// RunTicketGroups runs cfg's thread groups against the tickets server c
// talks to until every user has sent its Loops requests (the open
// model: for Loops × Think), and returns each meter's largest moving
// average. c must allow a connection per user and one for the sampler.
func RunTicketGroups(ctx context.Context, c *TicketsClient, cfg GroupsConfig) (GroupsResult, error) {
	if err := cfg.check(); err != nil {
		return GroupsResult{}, err
	}
	st, err := c.stats()
	if err != nil {
		return GroupsResult{}, fmt.Errorf("server not ready: %w", err)
	}
	names := make([]string, len(cfg.Groups))
	for i, g := range cfg.Groups {
		if _, ok := st.Sports[g.Sport]; !ok {
			return GroupsResult{}, fmt.Errorf("loadtest tickets: the server has no sport %q", g.Sport)
		}
		names[i] = g.Sport
	}
	r := &groupsRun{c: c, cfg: cfg,
		gen:      newTicketsGen(names, st.PerSport, TicketsConfig{Ops: "search", SearchLimit: cfg.SearchLimit}),
		answers:  make([]atomic.Uint64, len(names)),
		inflight: make([]atomic.Int64, len(names)),
		maxIn:    make([]atomic.Int64, len(names)),
		slots:    make(chan struct{}, cfg.MaxInFlight),
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	ser := &series{sports: map[string][]float64{}, nodes: map[string][]float64{}, groups: make([][]float64, len(names))}
	start := time.Now()
	sample := func() error {
		s, err := c.stats()
		if err != nil {
			return err
		}
		ser.t = append(ser.t, time.Since(start).Seconds())
		for name, v := range s.Sports {
			ser.sports[name] = append(ser.sports[name], float64(v))
		}
		for name, v := range s.Nodes {
			ser.nodes[name] = append(ser.nodes[name], float64(v))
		}
		ser.control = append(ser.control, float64(s.Control))
		for i := range names {
			ser.groups[i] = append(ser.groups[i], float64(r.answers[i].Load()))
		}
		return nil
	}
	if err := sample(); err != nil {
		return GroupsResult{}, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var users sync.WaitGroup
	for gi, g := range cfg.Groups {
		if cfg.Model == ModelOpen {
			users.Go(func() { r.openGroup(runCtx, gi, g.Users, rand.New(rand.NewPCG(seed, uint64(gi)<<32))) })
			continue
		}
		for u := range g.Users {
			users.Go(func() { r.user(runCtx, gi, rand.New(rand.NewPCG(seed, uint64(gi)<<32|uint64(u)))) })
		}
	}
	done := make(chan struct{})
	go func() { users.Wait(); close(done) }()
	ticker := time.NewTicker(cfg.Tick)
	defer ticker.Stop()
	var sampleErr error
loop:
	for {
		select {
		case <-done:
			break loop
		case <-ticker.C:
			if err := sample(); err != nil && sampleErr == nil {
				sampleErr = err
				stop() // the server is gone: end the run
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return GroupsResult{}, err
	}
	if sampleErr != nil {
		return GroupsResult{}, fmt.Errorf("loadtest tickets: sampling the server's meters: %w", sampleErr)
	}
	if err := sample(); err != nil {
		return GroupsResult{}, err
	}
	return r.result(ser, names, start), nil
}

// result makes the figures from the samples.
func (r *groupsRun) result(ser *series, names []string, start time.Time) GroupsResult {
	w := max(1, int(math.Round(float64(r.cfg.Window)/float64(r.cfg.Tick))))
	res := GroupsResult{Model: r.cfg.Model, ControlRun: r.cfg.Control, Seconds: stats.Round(time.Since(start).Seconds(), 2), Samples: len(ser.t),
		Sports: map[string]float64{}, Nodes: map[string]float64{}, Groups: map[string]float64{}, MaxInFlight: map[string]int{},
		Requests: r.requests, Failures: r.failures, Rejected: r.rejected, Dropped: int(r.dropped.Load())}
	ma := func(counts []float64) float64 {
		v, short := MaxMovingAverage(ser.t, counts, w)
		res.Short = res.Short || short
		return stats.Round(v, 2)
	}
	for name, c := range ser.sports {
		if slices.Contains(names, name) {
			res.Sports[name] = ma(c)
		}
	}
	for name, c := range ser.nodes {
		res.Nodes[name] = ma(c)
	}
	res.Control = ma(ser.control)
	for i, name := range names {
		res.Groups[name] = ma(ser.groups[i])
		res.MaxInFlight[name] = int(r.maxIn[i].Load())
	}
	if r.firstErr != nil {
		res.FirstFailure = r.firstErr.Error()
	}
	return res
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// user is one closed-model user of group gi: Loops times, an
// exponential think time and then a request, waiting for its answer.
func (r *groupsRun) user(ctx context.Context, gi int, rng *rand.Rand) {
	for range r.cfg.Loops {
		if !sleep(ctx, time.Duration(rng.ExpFloat64()*float64(r.cfg.Think))) {
			return
		}
		r.do(gi, rng)
	}
}

// openGroup is an open-model group: Poisson arrivals at Users/Think
// requests/s for Loops × Think, each sent without waiting for the ones
// before.
func (r *groupsRun) openGroup(ctx context.Context, gi, users int, rng *rand.Rand) {
	var wg sync.WaitGroup
	defer wg.Wait()
	mean := float64(r.cfg.Think) / float64(users)
	end := time.Now().Add(time.Duration(r.cfg.Loops) * r.cfg.Think)
	for next := time.Now(); ; {
		next = next.Add(time.Duration(rng.ExpFloat64() * mean))
		if next.After(end) || !sleep(ctx, time.Until(next)) {
			return
		}
		select {
		case r.slots <- struct{}{}:
		default:
			r.dropped.Add(1)
			continue
		}
		reqRng := rand.New(rand.NewPCG(rng.Uint64(), 0))
		wg.Go(func() {
			defer func() { <-r.slots }()
			r.do(gi, reqRng)
		})
	}
}

// do sends one request of group gi and records its answer.
func (r *groupsRun) do(gi int, rng *rand.Rand) {
	key := gi
	if r.cfg.Control {
		key = len(r.cfg.Groups)
	}
	method, path, body, _ := r.gen.request(key, rng)
	n := r.inflight[gi].Add(1)
	for m := r.maxIn[gi].Load(); n > m && !r.maxIn[gi].CompareAndSwap(m, n); m = r.maxIn[gi].Load() {
	}
	status, _, err := r.c.Do(method, path, body)
	r.inflight[gi].Add(-1)
	if err == nil && status < 300 {
		r.answers[gi].Add(1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	switch {
	case err != nil:
	case status == 429 || status == 503:
		r.rejected++
		return
	case status < 300:
		return
	default:
		err = fmt.Errorf("%s %s: %d", method, path, status)
	}
	r.failures++
	if r.firstErr == nil {
		r.firstErr = err
	}
}

// RampConfig is a ramp of thread groups against a running tickets
// server: one experiment per entry of HotUsers, the hot sport's group
// with that many users and every other sport of the server's a group of
// ColdUsers; the rest as in GroupsConfig (Window the moving average's,
// sampled every Window/6).
type RampConfig struct {
	Hot       string
	HotUsers  []int
	ColdUsers int
	Model     string
	Control   bool
	Think     time.Duration
	Loops     int
	Window    time.Duration
	Seed      uint64
}

// RampStep is one experiment of a ramp.
type RampStep struct {
	Users int `json:"users"`
	GroupsResult
}

// RunTicketRamp runs cfg's experiments in turn against the server c
// talks to.
func RunTicketRamp(ctx context.Context, c *TicketsClient, cfg RampConfig) ([]RampStep, error) {
	st, err := c.stats()
	if err != nil {
		return nil, fmt.Errorf("server not ready: %w", err)
	}
	if _, ok := st.Sports[cfg.Hot]; !ok {
		return nil, fmt.Errorf("loadtest tickets: the server has no sport %q", cfg.Hot)
	}
	sports := make([]string, 0, len(st.Sports))
	for s := range st.Sports {
		sports = append(sports, s)
	}
	slices.Sort(sports)
	var steps []RampStep
	for i, users := range cfg.HotUsers {
		g := GroupsConfig{Model: cfg.Model, Control: cfg.Control, Think: cfg.Think, Loops: cfg.Loops, Tick: cfg.Window / 6, Window: cfg.Window, Seed: cfg.Seed}
		if g.Seed != 0 {
			g.Seed += uint64(i)
		}
		for _, s := range sports {
			n := cfg.ColdUsers
			if s == cfg.Hot {
				n = users
			}
			g.Groups = append(g.Groups, TicketGroup{Sport: s, Users: n})
		}
		res, err := RunTicketGroups(ctx, c, g)
		if err != nil {
			return steps, err
		}
		steps = append(steps, RampStep{Users: users, GroupsResult: res})
	}
	return steps, nil
}

// RampTable renders a ramp: per experiment the hot group's users, each
// sport's figure, their total, control, and each node's.
func RampTable(hot string, steps []RampStep) string {
	if len(steps) == 0 {
		return ""
	}
	var sports, nodes []string
	for s := range steps[0].Sports {
		sports = append(sports, s)
	}
	for n := range steps[0].Nodes {
		nodes = append(nodes, n)
	}
	slices.Sort(sports)
	slices.SortFunc(nodes, func(a, b string) int { return nodeNum(a) - nodeNum(b) })
	head := append(append(append([]string{hot + " users"}, sports...), "total", "control"), nodes...)
	head = append(head, "failures", "rejected")
	rows := [][]string{head}
	for _, s := range steps {
		row := []string{strconv.Itoa(s.Users)}
		total := 0.0
		for _, sp := range sports {
			row = append(row, fmtF(s.Sports[sp]))
			total += s.Sports[sp]
		}
		row = append(row, fmtF(stats.Round(total, 2)), fmtF(s.Control))
		for _, n := range nodes {
			row = append(row, fmtF(s.Nodes[n]))
		}
		row = append(row, strconv.Itoa(s.Failures), strconv.Itoa(s.Rejected))
		rows = append(rows, row)
	}
	var b strings.Builder
	writeTable(&b, rows)
	return b.String()
}
