package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/logbook/logbook/lab/stats"
)

// TicketsConfig is the skewed-demand experiment on the tickets service
// (after "Performance modelling and simulation of skewed demand in complex
// systems", Shephard, 2017 — "the paper" below):
// every cold sport at ColdRate requests/s, the hot sport at ColdRate × m
// for each multiplier m in turn, and control requests besides; each step
// held for Step, of which the first Warmup is not measured. Arrivals are
// an open Poisson process (exponential gaps, like JMeter's Poisson timer
// in the paper's runs): they leave on schedule whatever the server does.
type TicketsConfig struct {
	ColdRate    float64
	Multipliers []float64
	Step        time.Duration
	Warmup      time.Duration
	Ops         string  // search, book or mixed
	ControlRate float64 // control requests/s; negative: the step's total offered rate
	Hot         string  // the hot sport (default athletics)
	SearchLimit int     // tickets per search answer (default 10)
	MaxInFlight int     // requests outstanding at most (default 8192); beyond, arrivals are dropped and counted
	// Pipeline: "on" sends requests pipelined over PipeConns
	// connections, their writes batched for up to BatchDelay (counted
	// in the latency); "off" one request per connection at a time;
	// "auto" (the default) pipelines when the server's nodes are
	// unlimited (node rate 0).
	Pipeline   string
	PipeConns  int           // default 4
	BatchDelay time.Duration // 0: each request written at once
	Seed       uint64        // of the arrival process (0: random)
}

// TicketsStep is one step's measurements. Rates are per second over the
// measured part of the step (the step less its warm-up): offered counts
// the requests sent in it, throughput and rejected the answers received
// in it — what a meter at the server counts, as in the paper; latencies
// are those of the requests sent in it. Keys are sport names and
// "control".
type TicketsStep struct {
	Multiplier float64            `json:"multiplier"`
	Offered    map[string]float64 `json:"offered"`    // requests sent
	Throughput map[string]float64 `json:"throughput"` // requests served (2xx, and 409 for a booking refused)
	Rejected   map[string]float64 `json:"rejected"`   // answered 429 or 503: queues full
	P50        map[string]float64 `json:"p50_ms"`     // of served requests, from when they were due
	P99        map[string]float64 `json:"p99_ms"`
	Nodes      map[string]float64 `json:"nodes"` // requests completed per store node
	// ServiceRate is each node's measured service rate: the requests it
	// completed over the service time its server accepted in the step
	// (absent for unlimited nodes). A performance model is calibrated
	// with it (logbook pepa predict).
	ServiceRate map[string]float64 `json:"node_service_rate,omitempty"`
	Failures    int                `json:"failures"`
	Dropped     int                `json:"dropped"` // not sent: MaxInFlight reached
}

// TicketsResult is the whole experiment.
type TicketsResult struct {
	Arch     string   `json:"arch"`
	NodeRate float64  `json:"node_rate"`
	ColdRate float64  `json:"cold_rate"`
	Ops      string   `json:"ops"`
	Hot      string   `json:"hot"`
	Sports   []string `json:"sports"`
	// Placement names the nodes holding each sport, and Workers is the
	// queue architectures' worker pool, as the server reported them.
	Placement map[string][]string `json:"placement,omitempty"`
	Workers   int                 `json:"workers,omitempty"`
	Step      float64             `json:"step_seconds"`
	Steps     []TicketsStep       `json:"steps"`
	// ColdMinFraction is the lowest throughput/offered of any cold sport
	// over all steps; HotFractionOfCapacity the hot sport's throughput at
	// the last step over the capacity of the nodes holding it (0 when
	// the nodes are unlimited).
	ColdMinFraction       float64 `json:"cold_min_fraction"`
	HotFractionOfCapacity float64 `json:"hot_fraction_of_capacity"`
	// ColdMinServedFraction is the lowest share, over cold sports and
	// steps, of the requests sent in a step's measured part that were
	// served (whenever). Unlike ColdMinFraction it has no noise from
	// answers crossing the window's edges, which dominates with many
	// sports at low rates (1,000 sports at 1 request/s each).
	ColdMinServedFraction float64 `json:"cold_min_served_fraction"`
	FirstFailure          string  `json:"first_failure,omitempty"`
	// Pipelined says whether requests were pipelined (see
	// TicketsConfig.Pipeline).
	Pipelined bool `json:"pipelined"`
}

// ticketsStats is the server's /api/tickets/stats.
type ticketsStats struct {
	Arch      string              `json:"arch"`
	Sports    map[string]uint64   `json:"sports"`
	Control   uint64              `json:"control"`
	Nodes     map[string]uint64   `json:"nodes"`
	NodeBusy  map[string]float64  `json:"node_busy_seconds"`
	Workers   int                 `json:"workers"`
	NodeRate  float64             `json:"node_rate"`
	Placement map[string][]string `json:"placement"`
	PerSport  int                 `json:"tickets_per_sport"`
}

// TicketsClient sends requests over a pool of connections, one request
// per connection at a time. Not pipelined on purpose: a pipelined
// connection answers in order, so a cold sport's answer would wait behind
// a hot one's queued ahead of it on the same connection, and the client
// would measure its own head-of-line blocking instead of the server's
// scheduling.
type TicketsClient struct {
	hc          *fasthttp.HostClient
	auth, token string
}

// NewTicketsClient returns a client for base (http://host:port) with a
// bearer token and at most conns connections.
func NewTicketsClient(base, token string, conns int) (*TicketsClient, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("url %q: want http://host:port", base)
	}
	addr := u.Host
	if u.Port() == "" {
		addr += map[bool]string{true: ":443", false: ":80"}[u.Scheme == "https"]
	}
	return &TicketsClient{
		hc: &fasthttp.HostClient{Addr: addr, IsTLS: u.Scheme == "https", MaxConns: max(1, conns),
			MaxConnWaitTimeout: requestTimeout, ReadTimeout: requestTimeout, WriteTimeout: requestTimeout},
		auth:  "Bearer " + token,
		token: token,
	}, nil
}

// Do sends one request and returns the status and body.
func (c *TicketsClient) Do(method, path, body string) (int, []byte, error) {
	req := fasthttp.AcquireRequest()
	res := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	req.Header.SetHost(c.hc.Addr)
	req.Header.SetRequestURI(path)
	req.Header.SetMethod(method)
	req.Header.Set("Authorization", c.auth)
	if body != "" {
		req.Header.SetContentType("application/json")
		req.SetBodyString(body)
	}
	if err := c.hc.Do(req, res); err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return res.StatusCode(), append([]byte(nil), res.Body()...), nil
}

func (c *TicketsClient) stats() (ticketsStats, error) {
	var st ticketsStats
	status, body, err := c.Do("GET", "/api/tickets/stats", "")
	if err != nil {
		return st, err
	}
	if status != 200 {
		return st, fmt.Errorf("GET /api/tickets/stats: %d %s", status, strings.TrimSpace(string(body)))
	}
	return st, json.Unmarshal(body, &st)
}

// outcome is one request's fate.
type outcome struct {
	key    int // sport index, or control (len(sports))
	step   int // in whose measured part it was sent; -1: in a warm-up
	served bool
	reject bool
	fail   bool
	lat    time.Duration
	done   time.Time
}

// RunTickets runs the experiment against the server c talks to.
func RunTickets(ctx context.Context, c *TicketsClient, cfg TicketsConfig) (TicketsResult, error) {
	if err := cfg.check(); err != nil {
		return TicketsResult{}, err
	}
	st, err := c.stats()
	if err != nil {
		return TicketsResult{}, fmt.Errorf("server not ready: %w", err)
	}
	r, err := newTicketsRun(c, cfg, st)
	if err != nil {
		return TicketsResult{}, err
	}
	res := TicketsResult{Arch: st.Arch, NodeRate: st.NodeRate, ColdRate: cfg.ColdRate, Ops: cfg.Ops, Hot: cfg.Hot, Sports: r.sports, Step: cfg.Step.Seconds(),
		Placement: st.Placement, Workers: st.Workers}
	// Pipelined over a few connections when the nodes are unlimited
	// (every answer takes microseconds, so head-of-line blocking is
	// negligible and the generator's CPU is what limits the rate),
	// else one request per connection at a time.
	if cfg.Pipeline == "on" || (cfg.Pipeline == "auto" && st.NodeRate == 0) {
		if r.pl, err = newPipeline(c.hc.Addr, c.token, cfg.PipeConns, cfg.BatchDelay); err != nil {
			return TicketsResult{}, fmt.Errorf("loadtest tickets: %w", err)
		}
		defer r.pl.close()
		res.Pipelined = true
	}
	defer r.timer.Stop()
	for si, m := range cfg.Multipliers {
		if err := r.step(ctx, si, m); err != nil {
			return res, err
		}
	}
	r.wg.Wait()
	if r.firstErr != nil {
		res.FirstFailure = r.firstErr.Error()
	}
	r.tabulate(&res)
	if st.NodeRate > 0 && len(res.Steps) > 0 {
		capacity := st.NodeRate * float64(len(st.Placement[cfg.Hot]))
		res.HotFractionOfCapacity = stats.Round(res.Steps[len(res.Steps)-1].Throughput[cfg.Hot]/capacity, 4)
	}
	return res, nil
}

// check refuses a configuration the experiment cannot run and fills in
// the defaults.
func (cfg *TicketsConfig) check() error {
	if cfg.ColdRate <= 0 || len(cfg.Multipliers) == 0 || cfg.Step <= 0 || cfg.Warmup < 0 || cfg.Warmup >= cfg.Step {
		return errors.New("loadtest tickets: cold rate > 0, multipliers, step > 0 and 0 ≤ warmup < step required")
	}
	switch cfg.Ops {
	case "search", "book", "mixed":
	default:
		return fmt.Errorf("loadtest tickets: ops %q (search, book or mixed)", cfg.Ops)
	}
	if cfg.Hot == "" {
		cfg.Hot = "athletics"
	}
	if cfg.SearchLimit <= 0 {
		cfg.SearchLimit = 10
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 8192
	}
	switch cfg.Pipeline {
	case "":
		cfg.Pipeline = "auto"
	case "auto", "on", "off":
	default:
		return fmt.Errorf("loadtest tickets: pipeline %q (auto, on or off)", cfg.Pipeline)
	}
	if cfg.PipeConns <= 0 {
		cfg.PipeConns = 4
	}
	if cfg.BatchDelay < 0 {
		return errors.New("loadtest tickets: batch delay must not be negative")
	}
	return nil
}

// ticketsRun is one RunTickets: the arrival process, the requests in
// flight, and the outcomes and server counters of each step.
type ticketsRun struct {
	c        *TicketsClient
	cfg      TicketsConfig
	sports   []string // sorted; a request's key indexes them
	hot      int      // the hot sport's key
	control  int      // the control requests' key: len(sports)
	rng      *rand.Rand
	gen      *ticketsGen
	pl       *pipeline // nil: one request per connection at a time
	slots    chan struct{}
	timer    *time.Timer
	measured time.Duration // the measured part of a step

	wg       sync.WaitGroup
	mu       sync.Mutex
	outcomes []outcome
	firstErr error

	// Per step: the nodes' completion rates and service rates over the
	// measured part, its window, the arrivals dropped at MaxInFlight.
	nodeRates    []map[string]float64
	serviceRates []map[string]float64
	windows      [][2]time.Time
	dropped      []int
}

func newTicketsRun(c *TicketsClient, cfg TicketsConfig, st ticketsStats) (*ticketsRun, error) {
	sports := make([]string, 0, len(st.Sports))
	for s := range st.Sports {
		sports = append(sports, s)
	}
	sort.Strings(sports)
	hot := slices.Index(sports, cfg.Hot)
	if hot < 0 {
		return nil, fmt.Errorf("loadtest tickets: the server has no sport %q", cfg.Hot)
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	n := len(cfg.Multipliers)
	return &ticketsRun{
		c: c, cfg: cfg, sports: sports, hot: hot, control: len(sports),
		rng:          rand.New(rand.NewPCG(seed, 1)),
		gen:          newTicketsGen(sports, st.PerSport, cfg),
		slots:        make(chan struct{}, cfg.MaxInFlight),
		timer:        time.NewTimer(time.Hour),
		measured:     cfg.Step - cfg.Warmup,
		nodeRates:    make([]map[string]float64, n),
		serviceRates: make([]map[string]float64, n),
		windows:      make([][2]time.Time, n),
		dropped:      make([]int, n),
	}, nil
}

// record notes a request's answer (status, or err if none came).
func (r *ticketsRun) record(key, step int, due time.Time, method string, after func(int), status int, err error) {
	now := time.Now()
	o := outcome{key: key, step: step, lat: now.Sub(due), done: now}
	switch {
	case err != nil:
		o.fail = true
	case status == 429 || status == 503:
		o.reject = true
	case status < 300 || (status == 409 && method == "POST"):
		o.served = true
		if after != nil {
			after(status)
		}
	default:
		o.fail = true
		err = fmt.Errorf("%s: %d", method, status)
	}
	r.mu.Lock()
	r.outcomes = append(r.outcomes, o)
	if err != nil && r.firstErr == nil {
		r.firstErr = err
	}
	r.mu.Unlock()
}

// step runs step si, the hot sport at m times the cold rate: the
// arrivals over Step, the server's counters at the end of the warm-up
// and of the step.
func (r *ticketsRun) step(ctx context.Context, si int, m float64) error {
	cfg, pl := r.cfg, r.pl
	hotRate := cfg.ColdRate * m
	ctrlRate := cfg.ControlRate
	if ctrlRate < 0 {
		ctrlRate = hotRate + cfg.ColdRate*float64(len(r.sports)-1)
	}
	total := hotRate + ctrlRate + cfg.ColdRate*float64(len(r.sports)-1)
	start := time.Now()
	var before ticketsStats
	var err error
	statsTaken := false
	for next := start; ; {
		next = next.Add(time.Duration(r.rng.ExpFloat64() / total * float64(time.Second)))
		if next.Sub(start) >= cfg.Step {
			break
		}
		if !statsTaken && next.Sub(start) >= cfg.Warmup {
			if pl != nil {
				pl.flush()
			}
			if before, err = r.c.stats(); err != nil {
				return err
			}
			statsTaken = true
		}
		if err := r.wait(ctx, next); err != nil {
			return err
		}
		key := r.pick(hotRate, ctrlRate, total)
		inWindow := next.Sub(start) >= cfg.Warmup
		select {
		case r.slots <- struct{}{}:
		default:
			if inWindow {
				r.dropped[si]++
			}
			continue
		}
		step := si
		if !inWindow {
			step = -1
		}
		r.send(key, step, next)
	}
	if pl != nil {
		pl.flush()
	}
	if !statsTaken {
		if before, err = r.c.stats(); err != nil {
			return err
		}
	}
	if d := time.Until(start.Add(cfg.Step)); d > 0 {
		time.Sleep(d)
	}
	after, err := r.c.stats()
	if err != nil {
		return err
	}
	r.windows[si] = [2]time.Time{start.Add(cfg.Warmup), start.Add(cfg.Step)}
	r.nodes(si, before, after)
	return nil
}

// wait waits until next, the next arrival, letting buffered requests that
// no arrival can join before their batch delay ends leave first. If ctx
// ends, it waits for the requests in flight and returns ctx's error.
func (r *ticketsRun) wait(ctx context.Context, next time.Time) error {
	pl := r.pl
	if pl != nil {
		if u, ok := pl.until(time.Now()); ok && time.Until(next) >= u {
			pl.flush()
		}
	}
	if d := time.Until(next); d > 50*time.Microsecond {
		r.timer.Reset(d)
		select {
		case <-r.timer.C:
		case <-ctx.Done():
			if pl != nil {
				pl.flush()
			}
			r.wg.Wait()
			return ctx.Err()
		}
	}
	return nil
}

// pick chooses an arrival's key: the hot sport, control, or a cold one,
// in proportion to their rates.
func (r *ticketsRun) pick(hotRate, ctrlRate, total float64) int {
	u := r.rng.Float64() * total
	switch {
	case u < hotRate:
		return r.hot
	case u < hotRate+ctrlRate:
		return r.control
	}
	key := int((u - hotRate - ctrlRate) / r.cfg.ColdRate)
	if key >= r.hot {
		key++
	}
	return min(key, len(r.sports)-1)
}

// send sends a request of key, due at due and counted in step (-1: in a
// warm-up), holding a slot until it is answered.
func (r *ticketsRun) send(key, step int, due time.Time) {
	method, path, body, after := r.gen.request(key, r.rng)
	r.wg.Add(1)
	if r.pl != nil {
		r.pl.send(due, method, path, body, func(status int, err error) {
			<-r.slots
			r.record(key, step, due, method, after, status, err)
			r.wg.Done()
		})
		return
	}
	go func() {
		defer r.wg.Done()
		status, _, err := r.c.Do(method, path, body)
		<-r.slots
		r.record(key, step, due, method, after, status, err)
	}()
}

// nodes sets step si's node completion and service rates from the
// server's counters before and after its measured part.
func (r *ticketsRun) nodes(si int, before, after ticketsStats) {
	r.nodeRates[si] = map[string]float64{}
	for n, v := range after.Nodes {
		r.nodeRates[si][n] = stats.Round(float64(v-before.Nodes[n])/r.measured.Seconds(), 2)
		if busy := after.NodeBusy[n] - before.NodeBusy[n]; busy > 0 {
			if r.serviceRates[si] == nil {
				r.serviceRates[si] = map[string]float64{}
			}
			r.serviceRates[si][n] = stats.Round(float64(v-before.Nodes[n])/busy, 2)
		}
	}
}

// tabulate makes each step's figures from the outcomes, and the cold
// sports' lowest fractions over all steps.
func (r *ticketsRun) tabulate(res *TicketsResult) {
	res.ColdMinFraction = math.Inf(1)
	res.ColdMinServedFraction = math.Inf(1)
	for si, m := range r.cfg.Multipliers {
		res.Steps = append(res.Steps, r.stepResult(si, m, res))
	}
	if math.IsInf(res.ColdMinFraction, 1) {
		res.ColdMinFraction, res.ColdMinServedFraction = 0, 0
	}
	res.ColdMinFraction = stats.Round(res.ColdMinFraction, 4)
	res.ColdMinServedFraction = stats.Round(res.ColdMinServedFraction, 4)
}

// stepResult is step si's figures; it lowers res's cold fractions to
// this step's.
func (r *ticketsRun) stepResult(si int, m float64, res *TicketsResult) TicketsStep {
	s := TicketsStep{Multiplier: m, Offered: map[string]float64{}, Throughput: map[string]float64{}, Rejected: map[string]float64{},
		P50: map[string]float64{}, P99: map[string]float64{}, Nodes: r.nodeRates[si], ServiceRate: r.serviceRates[si], Dropped: r.dropped[si]}
	lat := map[int][]time.Duration{}
	sent := map[int]int{}
	served := map[int]int{}
	servedSent := map[int]int{} // of the requests sent in the window
	rejected := map[int]int{}
	w := r.windows[si]
	for _, o := range r.outcomes {
		if o.step == si {
			sent[o.key]++
			if o.served {
				lat[o.key] = append(lat[o.key], o.lat)
				servedSent[o.key]++
			}
			if o.fail {
				s.Failures++
			}
		}
		if o.done.Before(w[0]) || !o.done.Before(w[1]) {
			continue
		}
		switch {
		case o.served:
			served[o.key]++
		case o.reject:
			rejected[o.key]++
		}
	}
	secs := r.measured.Seconds()
	for k := 0; k <= r.control; k++ {
		n := "control"
		if k != r.control {
			n = r.sports[k]
		}
		s.Offered[n] = stats.Round(float64(sent[k])/secs, 2)
		s.Throughput[n] = stats.Round(float64(served[k])/secs, 2)
		s.Rejected[n] = stats.Round(float64(rejected[k])/secs, 2)
		if len(lat[k]) > 0 {
			p := stats.Sort(lat[k])
			s.P50[n], s.P99[n] = stats.MS(p.Percentile(50)), stats.MS(p.Percentile(99))
		}
		if k != r.hot && k != r.control && sent[k] > 0 {
			res.ColdMinFraction = min(res.ColdMinFraction, s.Throughput[n]/s.Offered[n])
			res.ColdMinServedFraction = min(res.ColdMinServedFraction, float64(servedSent[k])/float64(sent[k]))
		}
	}
	return s
}

// ticketsGen makes the requests of each kind of operation. For book and
// return it keeps, per sport, the tickets its owners hold, so that a
// return gives back a ticket that was booked.
type ticketsGen struct {
	sports []string
	cfg    TicketsConfig
	mu     sync.Mutex
	held   [][]string // per sport: "id owner"
	n      int
	// perSport is the server's tickets per sport: books pick among them.
	perSport int
}

func newTicketsGen(sports []string, perSport int, cfg TicketsConfig) *ticketsGen {
	return &ticketsGen{sports: sports, cfg: cfg, held: make([][]string, len(sports)), perSport: max(1, perSport)}
}

// request returns the next request for key, and what to do with its
// answer's status (nil: nothing).
func (g *ticketsGen) request(key int, rng *rand.Rand) (method, path, body string, after func(int)) {
	if key == len(g.sports) {
		return "GET", "/api/tickets/control", "", nil
	}
	sport := g.sports[key]
	op := g.cfg.Ops
	if op == "mixed" {
		switch rng.IntN(4) {
		case 0:
			op = "book"
		case 1:
			op = "return"
		default:
			op = "search"
		}
	}
	switch op {
	case "return":
		g.mu.Lock()
		h := g.held[key]
		if len(h) > 0 {
			i := rng.IntN(len(h))
			item := h[i]
			h[i] = h[len(h)-1]
			g.held[key] = h[:len(h)-1]
			g.mu.Unlock()
			id, owner, _ := strings.Cut(item, " ")
			return "POST", "/api/tickets/" + id + "/return", `{"owner":"` + owner + `"}`, nil
		}
		g.mu.Unlock()
		fallthrough
	case "book":
		g.mu.Lock()
		g.n++
		owner := "user-" + strconv.Itoa(g.n)
		g.mu.Unlock()
		id := sport + "." + strconv.Itoa(rng.IntN(g.perSport))
		return "POST", "/api/tickets/" + id + "/book", `{"owner":"` + owner + `"}`, func(status int) {
			if status == 200 && g.cfg.Ops == "mixed" {
				g.mu.Lock()
				g.held[key] = append(g.held[key], id+" "+owner)
				g.mu.Unlock()
			}
		}
	}
	return "GET", "/api/tickets/search?sport=" + url.QueryEscape(sport) + "&limit=" + strconv.Itoa(g.cfg.SearchLimit), "", nil
}

// Table renders the result in the layout of the paper's tables: per step
// the multiplier, each sport's throughput (with more than four sports:
// the hot one, the cold ones' lowest and mean), total, control, the ratio
// of hot to cold demand, and each node's completed requests/s (with many
// nodes: those holding the hot sport); then the p99 latencies.
func (r TicketsResult) Table() string {
	var b strings.Builder
	many := len(r.Sports) > 4
	cold := []string{}
	for _, s := range r.Sports {
		if s != r.Hot {
			cold = append(cold, s)
		}
	}
	nodes := []string{}
	if len(r.Steps) > 0 {
		for n := range r.Steps[0].Nodes {
			nodes = append(nodes, n)
		}
		sort.Slice(nodes, func(i, j int) bool { return nodeNum(nodes[i]) < nodeNum(nodes[j]) })
	}
	if many {
		// Only the nodes that carry the hot sport's load.
		var hotNodes []string
		for _, n := range nodes {
			if r.Steps[len(r.Steps)-1].Nodes[n] > 0.5*r.NodeRate && r.NodeRate > 0 {
				hotNodes = append(hotNodes, n)
			}
		}
		nodes = hotNodes
	}
	head := []string{"multiplier", "offered " + r.Hot, r.Hot}
	if many {
		head = append(head, "cold min", "cold mean")
	} else {
		head = append(head, cold...)
	}
	head = append(head, "total", "control", "ratio")
	head = append(head, nodes...)
	rows := [][]string{head}
	for _, s := range r.Steps {
		row := []string{fmtF(s.Multiplier), fmtF(s.Offered[r.Hot]), fmtF(s.Throughput[r.Hot])}
		total := s.Throughput[r.Hot]
		minC, sumC, offC := math.Inf(1), 0.0, 0.0
		for _, c := range cold {
			total += s.Throughput[c]
			minC = min(minC, s.Throughput[c])
			sumC += s.Throughput[c]
			offC += s.Offered[c]
			if !many {
				row = append(row, fmtF(s.Throughput[c]))
			}
		}
		if many {
			row = append(row, fmtF(minC), fmtF(sumC/float64(len(cold))))
		}
		ratio := 0.0
		if offC > 0 {
			ratio = s.Offered[r.Hot] / (offC / float64(len(cold)))
		}
		row = append(row, fmtF(total), fmtF(s.Throughput["control"]), fmtF(ratio))
		for _, n := range nodes {
			row = append(row, fmtF(s.Nodes[n]))
		}
		rows = append(rows, row)
	}
	writeTable(&b, rows)
	b.WriteString("\np99 latency, ms\n")
	head = []string{"multiplier", r.Hot}
	if many {
		head = append(head, "cold max")
	} else {
		head = append(head, cold...)
	}
	head = append(head, "control", "rejected/s", "failures", "dropped")
	rows = [][]string{head}
	for _, s := range r.Steps {
		row := []string{fmtF(s.Multiplier), fmtF(s.P99[r.Hot])}
		worst, rej := 0.0, 0.0
		for _, c := range cold {
			worst = max(worst, s.P99[c])
			if !many {
				row = append(row, fmtF(s.P99[c]))
			}
		}
		for _, v := range s.Rejected {
			rej += v
		}
		if many {
			row = append(row, fmtF(worst))
		}
		row = append(row, fmtF(s.P99["control"]), fmtF(rej), strconv.Itoa(s.Failures), strconv.Itoa(s.Dropped))
		rows = append(rows, row)
	}
	writeTable(&b, rows)
	fmt.Fprintf(&b, "\narch %s, node rate %g/s, cold rate %g/s, ops %s; cold min fraction %.4f (served of sent %.4f); hot fraction of capacity %.4f\n",
		r.Arch, r.NodeRate, r.ColdRate, r.Ops, r.ColdMinFraction, r.ColdMinServedFraction, r.HotFractionOfCapacity)
	if r.Pipelined {
		b.WriteString("requests pipelined\n")
	}
	if r.FirstFailure != "" {
		fmt.Fprintf(&b, "first failure: %s\n", r.FirstFailure)
	}
	return b.String()
}

func nodeNum(n string) int {
	v, _ := strconv.Atoi(strings.TrimPrefix(n, "db"))
	return v
}

func fmtF(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e9 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func writeTable(b *strings.Builder, rows [][]string) {
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	for _, r := range rows {
		for i, c := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			fmt.Fprintf(b, "%*s", width[i], c)
		}
		b.WriteString("\n")
	}
}
