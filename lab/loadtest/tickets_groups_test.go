package loadtest

import (
	"context"
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/services/tickets"
	"github.com/logbook/logbook/services/tickets/httpapi"
)

// The largest moving average of a known series: a counter sampled every
// 10 s whose rate is 1/s, then 3/s for 30 s, then 0.
func TestMaxMovingAverage(t *testing.T) {
	times := []float64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	counts := []float64{0, 10, 20, 30, 60, 90, 120, 120, 120, 120, 120}
	// Windows of 6 samples (1 minute): 0–60 holds 120 requests, 10–70
	// 110, 20–80 100: the largest is 2/s.
	if got, short := MaxMovingAverage(times, counts, 6); got != 2 || short {
		t.Errorf("1-minute window: %v (short %v), want 2", got, short)
	}
	// Windows of 3 samples (30 s): 30–60 holds the burst, 3/s.
	if got, _ := MaxMovingAverage(times, counts, 3); got != 3 {
		t.Errorf("30 s window: %v, want 3", got)
	}
	// Shorter than a window: the whole series' average, flagged.
	if got, short := MaxMovingAverage(times[:4], counts[:4], 6); got != 1 || !short {
		t.Errorf("short series: %v (short %v), want 1 and short", got, short)
	}
	// Uneven sampling: the last sample 5 s after the one before.
	if got, _ := MaxMovingAverage([]float64{0, 10, 15}, []float64{0, 10, 20}, 1); got != 2 {
		t.Errorf("uneven: %v, want 2 (10 requests in 5 s)", got)
	}
}

// probe is a gate that records, per sport, how many requests are inside
// it at once and when each arrived, and holds each for hold.
type probe struct {
	hold    time.Duration
	mu      sync.Mutex
	in, max map[int]int
	arrived map[int][]time.Time
}

func newProbe(hold time.Duration) *probe {
	return &probe{hold: hold, in: map[int]int{}, max: map[int]int{}, arrived: map[int][]time.Time{}}
}

func (p *probe) Do(ctx context.Context, sport int, op func() error) error {
	p.mu.Lock()
	p.in[sport]++
	p.max[sport] = max(p.max[sport], p.in[sport])
	p.arrived[sport] = append(p.arrived[sport], time.Now())
	p.mu.Unlock()
	if p.hold > 0 {
		time.Sleep(p.hold)
	}
	err := op()
	p.mu.Lock()
	p.in[sport]--
	p.mu.Unlock()
	return err
}

func (p *probe) Describe() tickets.GateInfo { return tickets.GateInfo{Name: "probe"} }
func (p *probe) Close()                     {}

// serveProbe serves the tickets API for two sports behind gate.
func serveProbe(t *testing.T, gate tickets.Gate) *TicketsClient {
	t.Helper()
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := tickets.New(ctx, store, tickets.Config{Catalogue: tickets.Catalogue{Sports: []string{"athletics", "cycling"}, PerSport: 20, Days: 2}, Gate: gate})
	if err != nil {
		t.Fatal(err)
	}
	tokens, _ := auth.ParseEnv("viewer-token:viewer", httpapi.Roles())
	srv := httptest.NewServer(httpapi.New(ctx, svc, tokens))
	t.Cleanup(func() {
		srv.Close()
		cancel()
		svc.Close()
		store.Close()
	})
	c, err := NewTicketsClient(srv.URL, "viewer-token", 256)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Under the closed model a group never has more requests in the server
// than its users, and with a slow server and short think times it has
// exactly that many; the open model at the same rate piles up more.
func TestClosedGroupsKeepUsersInFlight(t *testing.T) {
	run := func(model string) (*probe, GroupsResult) {
		p := newProbe(30 * time.Millisecond)
		c := serveProbe(t, p)
		res, err := RunTicketGroups(context.Background(), c, GroupsConfig{Model: model,
			Groups: []TicketGroup{{Sport: "athletics", Users: 7}, {Sport: "cycling", Users: 3}},
			Think:  time.Millisecond, Loops: 20, Tick: 100 * time.Millisecond, Window: 300 * time.Millisecond, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if res.Failures > 0 {
			t.Fatalf("%s: %d failures: %s", model, res.Failures, res.FirstFailure)
		}
		return p, res
	}
	p, res := run(ModelClosed)
	for sport, users := range map[int]int{0: 7, 1: 3} {
		if p.max[sport] != users {
			t.Errorf("closed: sport %d had at most %d requests in the server, want exactly its %d users", sport, p.max[sport], users)
		}
		if n := len(p.arrived[sport]); n != users*20 {
			t.Errorf("closed: sport %d sent %d requests, want users × loops = %d", sport, n, users*20)
		}
	}
	if res.MaxInFlight["athletics"] != 7 || res.MaxInFlight["cycling"] != 3 {
		t.Errorf("closed: the client counted %v in flight, want athletics 7, cycling 3", res.MaxInFlight)
	}
	// Each user holds the server 30 ms per request, thinking ~1 ms: a
	// group's throughput is about users / 31 ms.
	if a := res.Sports["athletics"]; a < 7/0.031*0.6 || a > 7/0.031*1.1 {
		t.Errorf("closed: athletics at %.1f/s, want about %.0f/s", a, 7/0.031)
	}
	p, _ = run(ModelOpen)
	if p.max[0] <= 7 {
		t.Errorf("open: athletics had at most %d in the server; an open load at 7000/s against 30 ms requests should pile up", p.max[0])
	}
}

// A user's think time is exponential with the configured mean: one
// closed user against an instant server sends requests at gaps whose
// mean is the think time (plus a round trip) and whose coefficient of
// variation is about 1, as an exponential's is.
func TestThinkTimeIsExponential(t *testing.T) {
	p := newProbe(0)
	c := serveProbe(t, p)
	const think, loops = 10 * time.Millisecond, 400
	if _, err := RunTicketGroups(context.Background(), c, GroupsConfig{
		Groups: []TicketGroup{{Sport: "cycling", Users: 1}},
		Think:  think, Loops: loops, Tick: time.Second, Window: time.Second, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	at := p.arrived[1]
	if len(at) != loops {
		t.Fatalf("%d requests, want %d", len(at), loops)
	}
	var sum, sq float64
	for i := 1; i < len(at); i++ {
		g := at[i].Sub(at[i-1]).Seconds() * 1000
		sum += g
		sq += g * g
	}
	n := float64(len(at) - 1)
	mean := sum / n
	cv := math.Sqrt(sq/n-mean*mean) / mean
	// The mean of 399 exponential gaps of 10 ms has a standard error of
	// 0.5 ms: 8 ms allows four of them below. Above, a round trip and
	// late timers add to every gap: 12.8 ms was seen under -race at load
	// average 25, so up to 20 ms (a think time of twice the mean would
	// still fail).
	if mean < 8 || mean > 20 {
		t.Errorf("mean gap %.2f ms, want about 10 ms", mean)
	}
	if cv < 0.8 || cv > 1.2 {
		t.Errorf("coefficient of variation %.2f, want about 1 (exponential)", cv)
	}
}

// Every table's seed rows hold the users of its experiments and one
// value per column, and the columns are the paper's.
func TestPaperTablesShape(t *testing.T) {
	want := map[int]string{
		9:  "athletics control,athletics search,cycling control,cycling search",
		11: "athletics,cycling,total,control,ratio,db1,db2",
		13: "athletics,cycling,diving,total,control,ratio,db1,db2,db3",
	}
	for n, cols := range want {
		tb := PaperTables[n]
		if got := strings.Join(tb.Columns, ","); got != cols {
			t.Errorf("table %d: columns %s, want %s", n, got, cols)
		}
		if len(tb.Seed) != len(tb.HotUsers) {
			t.Errorf("table %d: %d seed rows for %d experiments", n, len(tb.Seed), len(tb.HotUsers))
		}
		for i, r := range tb.Seed {
			if len(r) != 1+len(tb.Columns) || int(r[0]) != tb.HotUsers[i] {
				t.Errorf("table %d row %d: %v", n, i, r)
			}
		}
	}
	// Table 11's total is its sports' sum, and its ratio athletics over
	// cycling, as the paper computed them.
	for _, r := range PaperTables[11].Seed {
		if math.Abs(r[1]+r[2]-r[3]) > 0.02 || math.Abs(r[1]/r[2]-r[5]) > 0.01 {
			t.Errorf("table 11 row %v: total or ratio not as computed here", r)
		}
	}
}

// A short rerun of Table 11 end to end: two experiments, one run, a
// 600 ms "minute". Every cell is there with the paper's beside it, the
// node rate is calibrated from the control run, and the shape is the
// paper's: the control run carries the groups' demand, athletics is
// capped by its node (db2) while its demand grows.
func TestPaperTableShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about ten seconds")
	}
	res, err := RunPaperTable(context.Background(), TableConfig{Table: 11, Runs: 1, Minute: 600 * time.Millisecond, HotUsers: []int{15, 90}, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if res.Loops != 15 || res.Tick != 0.1 || !res.Calibrated {
		t.Fatalf("loops %d, tick %v, calibrated %v: want 15, 0.1, true", res.Loops, res.Tick, res.Calibrated)
	}
	// 15 users thinking 100 ms, answered at once: about 150/s.
	if res.ControlPerGroup < 75 || res.ControlPerGroup > 160 {
		t.Errorf("control per group %.1f/s, want about 150", res.ControlPerGroup)
	}
	if math.Abs(res.NodeRate-5*res.ControlPerGroup) > 1 {
		t.Errorf("node rate %.1f, want 5 × control per group %.1f", res.NodeRate, res.ControlPerGroup)
	}
	for _, row := range res.Rows {
		for _, col := range PaperTables[11].Columns {
			c, ok := row.Cells[col]
			if !ok || c.Paper == nil || len(c.Runs) != 1 {
				t.Errorf("users %d: column %s: %+v", row.Users, col, c)
			}
		}
		if row.Failures+row.Rejected+row.Dropped > 0 || row.MaxInFlight > row.Users {
			t.Errorf("users %d: %d failures, %d rejected, %d dropped, %d in flight", row.Users, row.Failures, row.Rejected, row.Dropped, row.MaxInFlight)
		}
		c := row.Cells
		if r := c["athletics"].Mean / c["cycling"].Mean; math.Abs(r-c["ratio"].Mean) > 0.05*r {
			t.Errorf("users %d: ratio %.2f, athletics/cycling %.2f", row.Users, c["ratio"].Mean, r)
		}
		// Athletics is served by db2 alone, cycling by db1.
		if math.Abs(c["db2"].Mean-c["athletics"].Mean) > 0.2*c["athletics"].Mean {
			t.Errorf("users %d: db2 %.1f, athletics %.1f", row.Users, c["db2"].Mean, c["athletics"].Mean)
		}
	}
	lo, hi := res.Rows[0].Cells, res.Rows[1].Cells
	// The control run's demand grows with the users (2 → 7 groups' worth).
	if hi["control"].Mean < 2.5*lo["control"].Mean {
		t.Errorf("control %.1f at 90 users, %.1f at 15", hi["control"].Mean, lo["control"].Mean)
	}
	// At 90 users athletics asks for 6 × control per group; its node
	// serves at most 5 × (the moving average may overshoot a little).
	if a := hi["athletics"].Mean; a > 1.25*res.NodeRate || a < 2*lo["athletics"].Mean {
		t.Errorf("athletics %.1f at 90 users (%.1f at 15), node rate %.1f", a, lo["athletics"].Mean, res.NodeRate)
	}
	out := res.Table()
	for _, s := range []string{"athletics users", "(94.55)", "(373.20)", "node rate", "calibrated"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
}

// A ramp against a running server: one experiment per hot users, every
// sport of the server a group, the hot one's users as given.
func TestTicketRamp(t *testing.T) {
	p := newProbe(5 * time.Millisecond)
	c := serveProbe(t, p)
	steps, err := RunTicketRamp(context.Background(), c, RampConfig{Hot: "athletics", HotUsers: []int{2, 6}, ColdUsers: 2,
		Think: 5 * time.Millisecond, Loops: 10, Window: 120 * time.Millisecond, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[1].Users != 6 || steps[1].MaxInFlight["athletics"] > 6 || steps[1].MaxInFlight["cycling"] > 2 {
		t.Fatalf("steps %+v", steps)
	}
	if n := len(p.arrived[0]); n != (2+6)*10 {
		t.Errorf("athletics sent %d requests, want (2+6) users × 10 loops", n)
	}
	// Six users against 5 ms requests: more than the two users did.
	if steps[1].Sports["athletics"] <= steps[0].Sports["athletics"] {
		t.Errorf("athletics %.1f/s with 6 users, %.1f/s with 2", steps[1].Sports["athletics"], steps[0].Sports["athletics"])
	}
	if out := RampTable("athletics", steps); !strings.Contains(out, "athletics users") || !strings.Contains(out, "cycling") {
		t.Errorf("table:\n%s", out)
	}
}

// Where each column comes from: Table 9's control columns are each
// group's own answers in the control run (the paper's per-worker
// meters), its search columns the server's sport meters; Table 11's
// control is the server's control meter, its total the sports' sum, its
// ratio athletics over cycling, its db columns the nodes'.
func TestTableColumnsFromMeters(t *testing.T) {
	ctrl := GroupsResult{Groups: map[string]float64{"athletics": 40, "cycling": 20}, Control: 61, Sports: map[string]float64{"athletics": 0, "cycling": 0}}
	search := GroupsResult{Groups: map[string]float64{"athletics": 35, "cycling": 19}, Sports: map[string]float64{"athletics": 30, "cycling": 10},
		Nodes: map[string]float64{"db1": 10, "db2": 30}, Control: 0}
	f := map[string][]float64{}
	PaperTables[9].collect(f, ctrl, true)
	PaperTables[9].collect(f, search, false)
	want9 := map[string]float64{"athletics control": 40, "cycling control": 20, "athletics search": 30, "cycling search": 10}
	for col, v := range want9 {
		if len(f[col]) != 1 || f[col][0] != v {
			t.Errorf("table 9 %s: %v, want [%v]", col, f[col], v)
		}
	}
	if len(f) != 4 {
		t.Errorf("table 9: columns %v, want only its four", f)
	}
	f = map[string][]float64{}
	PaperTables[11].collect(f, ctrl, true)
	PaperTables[11].collect(f, search, false)
	want11 := map[string]float64{"athletics": 30, "cycling": 10, "total": 40, "control": 61, "ratio": 3, "db1": 10, "db2": 30}
	for col, v := range want11 {
		if len(f[col]) != 1 || f[col][0] != v {
			t.Errorf("table 11 %s: %v, want [%v]", col, f[col], v)
		}
	}
	// Two runs: the mean, and the spread printed.
	two := 2.0
	r := TableResult{Paper: PaperTables[11], Runs: 2, Columns: []string{"athletics"}, Rows: []TableRow{{Users: 15,
		Cells: map[string]TableCell{"athletics": {Mean: 95, Min: 90, Max: 100, Runs: []float64{90, 100}, Paper: &two}}}}}
	if out := r.Table(); !strings.Contains(out, "95 (2)") || !strings.Contains(out, "90–100") {
		t.Errorf("two runs:\n%s", out)
	}
}
