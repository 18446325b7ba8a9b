package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/lab/stats"
	"github.com/logbook/logbook/lab/ticketrig"
	"github.com/logbook/logbook/services/tickets"
	"github.com/logbook/logbook/services/tickets/httpapi"
)

// PaperTable is one of the measured tables of "Performance modelling and
// simulation of skewed demand in complex systems" (Shephard, 2017): the
// architecture, the thread groups that loaded it, how its store nodes'
// rate was calibrated, and the values it printed.
type PaperTable struct {
	Number int    `json:"table"`
	Title  string `json:"title"`
	Arch   string `json:"arch"`
	// Sports in node order: sport i's own node is db<i+1>, placed as the
	// paper's Cassandra placed them (Table 11: athletics on db2).
	Sports    []string      `json:"sports"`
	Hot       string        `json:"hot"`
	HotUsers  []int         `json:"hot_users"`  // the hot group's users, one experiment each
	ColdUsers int           `json:"cold_users"` // every other group's users
	Think     time.Duration `json:"think_ns"`   // mean of the Poisson random timer
	Loops     int           `json:"loops"`      // requests per user at the paper's time scale
	// Units is a store node's capacity in units of one cold group's
	// control throughput, as the paper calibrated its model's database
	// rate: Table 9's athletics search capped at 130/s against a
	// constant demand of 19/s; Tables 11 and 13 the cassandra-stress
	// maximum of 475 operations/s against 95/s, the model's db rate 5.0.
	Units float64 `json:"units"`
	// ControlPerGroup is the paper's control throughput of one cold
	// thread group (its demand unit).
	ControlPerGroup float64 `json:"paper_control_per_group"`
	// Columns name the figures of a row after the users; Seed holds the
	// paper's rows: the hot group's users, then Columns.
	Columns []string    `json:"columns"`
	Seed    [][]float64 `json:"seed"`
}

// PaperTables are the paper's Tables 9, 11 and 13, its values typed once,
// here.
var PaperTables = map[int]PaperTable{
	9: {Number: 9, Title: "Simple microservices experimental results", Arch: string(ticketrig.Micro),
		Sports: []string{"athletics", "cycling"}, Hot: "athletics", HotUsers: []int{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}, ColdUsers: 10,
		Think: 500 * time.Millisecond, Loops: 500, Units: 130.0 / 19, ControlPerGroup: 19,
		Columns: []string{"athletics control", "athletics search", "cycling control", "cycling search"},
		Seed: [][]float64{
			{10, 19.29, 17.92, 19.25, 18.08},
			{20, 37.67, 34.39, 18.99, 17.61},
			{30, 56.44, 51.11, 18.96, 17.52},
			{40, 74.61, 67.13, 18.75, 17.4},
			{50, 92.59, 81.54, 18.73, 17.18},
			{60, 111.6, 95.52, 18.7, 16.82},
			{70, 131.43, 111.3, 18.83, 16.93},
			{80, 150.49, 120.7, 18.85, 16.33},
			{90, 168.29, 130.09, 18.83, 16.06},
			{100, 185.85, 134.01, 18.72, 15.94},
		}},
	11: {Number: 11, Title: "Shared queue and distributed DB experimental results", Arch: string(ticketrig.Queue),
		Sports: []string{"cycling", "athletics"}, Hot: "athletics", HotUsers: []int{15, 30, 45, 60, 75, 90, 105, 120, 135, 150}, ColdUsers: 15,
		Think: 100 * time.Millisecond, Loops: 1500, Units: 475.0 / 95, ControlPerGroup: 95,
		Columns: []string{"athletics", "cycling", "total", "control", "ratio", "db1", "db2"},
		Seed: [][]float64{
			{15, 94.55, 93.83, 188.39, 187.03, 1.01, 97.88, 98.96},
			{30, 186.02, 97.53, 283.55, 272.69, 1.91, 101.46, 194.23},
			{45, 282.04, 95.56, 377.6, 372.48, 2.95, 97.66, 293.27},
			{60, 346.47, 95.08, 441.55, 474.85, 3.64, 96.13, 362.94},
			{75, 358, 86.33, 444.33, 561.37, 4.15, 84.96, 365.02},
			{90, 366.9, 71.46, 438.36, 637.29, 5.13, 72.04, 373.2},
			{105, 369.29, 60.7, 429.99, 746.53, 6.08, 61.39, 376.63},
			{120, 378.14, 53.47, 431.61, 793.76, 7.07, 53.93, 385.62},
			{135, 374.62, 45.31, 419.93, 856.46, 8.27, 45.51, 381.08},
			{150, 378.9, 41.38, 420.28, 953.17, 9.16, 41.9, 388.41},
		}},
	13: {Number: 13, Title: "Shared queue and distributed database with replication experimental results", Arch: string(ticketrig.QueueRep),
		Sports: []string{"athletics", "cycling", "diving"}, Hot: "athletics", HotUsers: []int{15, 30, 45, 60, 75, 90, 105, 120, 135, 150}, ColdUsers: 15,
		Think: 100 * time.Millisecond, Loops: 1500, Units: 475.0 / 95, ControlPerGroup: 95,
		Columns: []string{"athletics", "cycling", "diving", "total", "control", "ratio", "db1", "db2", "db3"},
		Seed: [][]float64{
			{15, 111.97, 112.08, 111.92, 335.97, 335.2, 1, 137.26, 167.58, 151},
			{30, 219.25, 113.96, 113.93, 447.14, 439.82, 1.92, 187.74, 149.96, 208.57},
			{45, 336.25, 114.5, 114.5, 565.26, 561.71, 2.94, 194.73, 184.98, 301.59},
			{60, 379.1, 114.14, 114.18, 607.41, 643.45, 3.32, 192.23, 171.2, 307.34},
			{75, 393.12, 95.15, 95.24, 583.51, 772.81, 4.13, 186.57, 161.65, 309.76},
			{90, 404.55, 78.76, 78.56, 561.87, 847.28, 5.14, 175.88, 142.35, 327.07},
			{105, 415.51, 67.68, 67.69, 550.88, 891.84, 6.14, 167.31, 126.33, 339.73},
			{120, 416.2, 59.71, 59.52, 535.42, 920.51, 6.97, 172.79, 112.52, 331.42},
			{135, 414.05, 51.88, 52.06, 517.98, 948.76, 7.98, 171.73, 97.07, 332.88},
			{150, 422.42, 46.39, 46.13, 514.94, 961.01, 9.11, 170.61, 88.64, 341.23},
		}},
}

// TableConfig reruns a PaperTable.
type TableConfig struct {
	Table int
	Model string // ModelClosed (default, the paper's) or ModelOpen
	Runs  int    // each experiment run this many times, the mean taken (the paper: 5)
	// Minute is the moving average's window (the paper's 1 minute); the
	// meters are sampled every Minute/6 (its 10 s) and each user's loop
	// count is scaled by Minute/1m, so a shorter minute shrinks the
	// run's length and leaves every rate as it is.
	Minute time.Duration
	// NodeRate is each store node's requests/s; 0: calibrated from the
	// first run's control runs as Units × a cold group's control
	// throughput.
	NodeRate      float64
	HotUsers      []int  // default the table's
	ReplicaChoice string // queue-rep's (default first: the paper's uneven replicas)
	Seed          uint64
	Progress      io.Writer // a line per experiment (nil: none)
}

// TableCell is one figure: the mean of the runs, their spread, and the
// paper's value.
type TableCell struct {
	Mean  float64   `json:"mean"`
	Min   float64   `json:"min"`
	Max   float64   `json:"max"`
	Runs  []float64 `json:"runs"`
	Paper *float64  `json:"paper,omitempty"`
}

// TableRow is one experiment: the hot group's users.
type TableRow struct {
	Users int                  `json:"users"`
	Cells map[string]TableCell `json:"cells"`
	// Failures, rejections and drops over all its runs.
	Failures int `json:"failures"`
	Rejected int `json:"rejected"`
	Dropped  int `json:"dropped"`
	// MaxInFlight is the most requests the hot group had outstanding.
	MaxInFlight int `json:"max_inflight"`
}

// TableResult is a rerun table.
type TableResult struct {
	Paper   PaperTable `json:"paper"`
	Model   string     `json:"model"`
	Runs    int        `json:"runs"`
	Minute  float64    `json:"minute_seconds"`
	Tick    float64    `json:"tick_seconds"`
	Loops   int        `json:"loops"`
	Columns []string   `json:"columns"`
	Rows    []TableRow `json:"rows"`
	// ControlPerGroup is our control throughput of a cold group (the
	// first run's, mean over its experiments), NodeRate the store
	// nodes' rate, Calibrated whether it was set from it.
	ControlPerGroup float64 `json:"control_per_group"`
	NodeRate        float64 `json:"node_rate"`
	Calibrated      bool    `json:"calibrated"`
	ReplicaChoice   string  `json:"replica_choice,omitempty"`
	Seconds         float64 `json:"seconds"`
}

func (cfg *TableConfig) check() (PaperTable, error) {
	t, ok := PaperTables[cfg.Table]
	if !ok {
		return t, fmt.Errorf("table %d: want 9, 11 or 13", cfg.Table)
	}
	if cfg.Model == "" {
		cfg.Model = ModelClosed
	}
	if cfg.Model != ModelClosed && cfg.Model != ModelOpen {
		return t, fmt.Errorf("model %q: want closed or open", cfg.Model)
	}
	if cfg.Runs == 0 {
		cfg.Runs = 5
	}
	if cfg.Minute == 0 {
		cfg.Minute = time.Minute
	}
	if cfg.Runs < 1 || cfg.Runs > 100 || cfg.Minute < 100*time.Millisecond || cfg.NodeRate < 0 {
		return t, errors.New("runs 1–100, minute ≥ 100ms and node rate ≥ 0 required")
	}
	if cfg.HotUsers != nil {
		if len(cfg.HotUsers) == 0 || slices.ContainsFunc(cfg.HotUsers, func(u int) bool { return u < 1 || u > 10_000 }) {
			return t, errors.New("hot users: 1–10000 each")
		}
		t.HotUsers = cfg.HotUsers
	}
	if cfg.ReplicaChoice == "" {
		cfg.ReplicaChoice = ticketrig.ChooseFirst
	}
	return t, nil
}

// RunPaperTable reruns one of the paper's tables on the tickets service,
// in process: for each run, the control run (every group sending control
// requests) and then the search run, each on a fresh store behind fresh
// emulated nodes, every experiment (hot users) in turn; each figure the
// mean over the runs of the largest moving average.
func RunPaperTable(ctx context.Context, cfg TableConfig) (TableResult, error) {
	t, err := cfg.check()
	if err != nil {
		return TableResult{}, fmt.Errorf("loadtest tickets: %w", err)
	}
	scale := float64(cfg.Minute) / float64(time.Minute)
	res := TableResult{Paper: t, Model: cfg.Model, Runs: cfg.Runs, Minute: cfg.Minute.Seconds(),
		Tick: (cfg.Minute / 6).Seconds(), Loops: max(1, int(math.Round(float64(t.Loops)*scale))), NodeRate: cfg.NodeRate,
		Columns: t.Columns}
	if t.Arch == string(ticketrig.QueueRep) {
		res.ReplicaChoice = cfg.ReplicaChoice
	}
	gcfg := GroupsConfig{Model: cfg.Model, Think: t.Think, Loops: res.Loops, Tick: cfg.Minute / 6, Window: cfg.Minute}
	began := time.Now()
	// figures[users index][column] over the runs.
	figures := make([]map[string][]float64, len(t.HotUsers))
	for i := range figures {
		figures[i] = map[string][]float64{}
	}
	rows := make([]TableRow, len(t.HotUsers))
	for run := range cfg.Runs {
		for phase, control := range []bool{true, false} {
			rate := res.NodeRate
			if control && rate == 0 {
				rate = 1 // control requests touch no node
			}
			// A connection per request outstanding: a user's (closed),
			// or any of the open model's (at most MaxInFlight), so that
			// no request waits for a connection in the client.
			conns := t.ColdUsers*(len(t.Sports)-1) + slices.Max(t.HotUsers)
			if cfg.Model == ModelOpen {
				conns = 8192
			}
			srv, err := startRig(ctx, t, rate, res.ReplicaChoice, conns)
			if err != nil {
				return res, err
			}
			cold := 0.0
			for ui, users := range t.HotUsers {
				g := gcfg
				g.Control = control
				g.Seed = cfg.Seed
				if g.Seed != 0 {
					g.Seed += uint64(run*1000 + phase*100 + ui)
				}
				for _, s := range t.Sports {
					n := t.ColdUsers
					if s == t.Hot {
						n = users
					}
					g.Groups = append(g.Groups, TicketGroup{Sport: s, Users: n})
				}
				gr, err := RunTicketGroups(ctx, srv.client, g)
				if err != nil {
					srv.close()
					return res, err
				}
				if cfg.Progress != nil {
					fmt.Fprintf(cfg.Progress, "run %d/%d, %s, %d users: %.0f s, %d requests\n", run+1, cfg.Runs, map[bool]string{true: "control", false: "search"}[control], users, gr.Seconds, gr.Requests)
				}
				rows[ui].Failures += gr.Failures
				rows[ui].Rejected += gr.Rejected
				rows[ui].Dropped += gr.Dropped
				rows[ui].MaxInFlight = max(rows[ui].MaxInFlight, gr.MaxInFlight[t.Hot])
				t.collect(figures[ui], gr, control)
				for _, s := range t.Sports {
					if s != t.Hot {
						cold += gr.Groups[s] / float64(len(t.Sports)-1)
					}
				}
			}
			srv.close()
			if control && run == 0 {
				res.ControlPerGroup = stats.Round(cold/float64(len(t.HotUsers)), 2)
				if res.NodeRate == 0 {
					res.NodeRate = stats.Round(t.Units*res.ControlPerGroup, 1)
					res.Calibrated = true
				}
			}
		}
	}
	for ui, users := range t.HotUsers {
		rows[ui].Users = users
		rows[ui].Cells = map[string]TableCell{}
		var seed []float64
		for _, r := range t.Seed {
			if int(r[0]) == users {
				seed = r[1:]
			}
		}
		for ci, col := range t.Columns {
			v := figures[ui][col]
			c := TableCell{Runs: v, Min: slices.Min(v), Max: slices.Max(v)}
			for _, x := range v {
				c.Mean += x / float64(len(v))
			}
			c.Mean = stats.Round(c.Mean, 2)
			if seed != nil {
				p := seed[ci]
				c.Paper = &p
			}
			rows[ui].Cells[col] = c
		}
	}
	res.Rows = rows
	res.Seconds = stats.Round(time.Since(began).Seconds(), 1)
	return res, nil
}

// collect adds a run's figures to one experiment's: from the control
// run, each group's control throughput (Table 9: per worker) or the
// server's (Tables 11 and 13); from the search run the sports, their
// total, the hot to cold ratio and the nodes.
func (t PaperTable) collect(f map[string][]float64, gr GroupsResult, control bool) {
	add := func(col string, v float64) {
		if slices.Contains(t.Columns, col) {
			f[col] = append(f[col], stats.Round(v, 2))
		}
	}
	if control {
		for s, v := range gr.Groups {
			add(s+" control", v)
		}
		add("control", gr.Control)
		return
	}
	total := 0.0
	for s, v := range gr.Sports {
		add(s, v)
		add(s+" search", v)
		total += v
	}
	add("total", total)
	cold := t.Sports[0]
	if cold == t.Hot {
		cold = t.Sports[1]
	}
	if gr.Sports[cold] > 0 {
		add("ratio", gr.Sports[t.Hot]/gr.Sports[cold])
	}
	for n, v := range gr.Nodes {
		add(n, v)
	}
}

// rigServer is the tickets service on a fresh store behind the rig, on a
// loopback port.
type rigServer struct {
	client *TicketsClient
	close  func()
}

const rigToken = "viewer-token"

func startRig(ctx context.Context, t PaperTable, rate float64, choice string, users int) (*rigServer, error) {
	gate, err := ticketrig.NewScheduler(ticketrig.SchedConfig{Arch: ticketrig.Arch(t.Arch), Sports: len(t.Sports), NodeRate: rate, ReplicaChoice: choice}, t.Sports)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "logbook-tickets-table-")
	if err != nil {
		gate.Close()
		return nil, err
	}
	store, err := pebblestore.Open(dir, pebblestore.Options{NoSync: true})
	if err != nil {
		gate.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	svc, err := tickets.New(sctx, store, tickets.Config{Catalogue: tickets.Catalogue{Sports: t.Sports, PerSport: 100, Days: 10}, Gate: gate})
	if err != nil {
		cancel()
		store.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	tokens, err := auth.ParseEnv(rigToken+":viewer", httpapi.Roles())
	ln, lerr := net.Listen("tcp", "127.0.0.1:0")
	if err = errors.Join(err, lerr); err != nil {
		cancel()
		svc.Close()
		store.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	hs := &http.Server{Handler: httpapi.New(sctx, svc, tokens), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	c, err := NewTicketsClient("http://"+ln.Addr().String(), rigToken, users+8)
	if err != nil {
		_ = hs.Close()
		cancel()
		svc.Close()
		store.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return &rigServer{client: c, close: func() {
		_ = hs.Close()
		cancel()
		svc.Close()
		store.Close()
		os.RemoveAll(dir)
	}}, nil
}

// Table renders the rerun table: per experiment the hot group's users,
// then each column as ours (the paper's); then how it was scaled.
func (r TableResult) Table() string {
	var b strings.Builder
	p := r.Paper
	fmt.Fprintf(&b, "Table %d, %s: ours (the paper's), each the mean of %d run(s) of the largest %gs moving average, req/s\n",
		p.Number, p.Title, r.Runs, r.Minute)
	head := append([]string{p.Hot + " users"}, r.Columns...)
	rows := [][]string{head}
	for _, row := range r.Rows {
		line := []string{strconv.Itoa(row.Users)}
		for _, col := range r.Columns {
			c := row.Cells[col]
			cell := fmtF(c.Mean)
			if c.Paper != nil {
				cell += " (" + fmtF(*c.Paper) + ")"
			}
			line = append(line, cell)
		}
		rows = append(rows, line)
	}
	writeTable(&b, rows)
	if r.Runs > 1 {
		b.WriteString("\nspread over the runs (min–max)\n")
		rows = [][]string{head}
		for _, row := range r.Rows {
			line := []string{strconv.Itoa(row.Users)}
			for _, col := range r.Columns {
				c := row.Cells[col]
				line = append(line, fmtF(c.Min)+"–"+fmtF(c.Max))
			}
			rows = append(rows, line)
		}
		writeTable(&b, rows)
	}
	fail, rej, drop := 0, 0, 0
	for _, row := range r.Rows {
		fail, rej, drop = fail+row.Failures, rej+row.Rejected, drop+row.Dropped
	}
	how := "calibrated"
	if !r.Calibrated {
		how = "given"
	}
	fmt.Fprintf(&b, "\narch %s, %s model, %d users per cold group, think %v, %d loops per user, meters sampled every %.3gs, %d run(s), %.0f s\n",
		p.Arch, r.Model, p.ColdUsers, p.Think, r.Loops, r.Tick, r.Runs, r.Seconds)
	if r.ReplicaChoice != "" {
		fmt.Fprintf(&b, "replica choice %s\n", r.ReplicaChoice)
	}
	fmt.Fprintf(&b, "control per cold group %.2f/s (the paper's %g/s, a factor %.2f); node rate %g/s %s (%.2f × control per group, as the paper's database rate)\n",
		r.ControlPerGroup, p.ControlPerGroup, r.ControlPerGroup/p.ControlPerGroup, r.NodeRate, how, r.NodeRate/max(r.ControlPerGroup, 1e-9))
	fmt.Fprintf(&b, "failures %d, rejected %d, dropped %d\n", fail, rej, drop)
	return b.String()
}
