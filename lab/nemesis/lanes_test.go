package nemesis

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/lab/plot"
)

// Faults that act on the same thing share a lane: a lane's heal must
// never end another lane's fault (a proxy's Heal ends every fault on
// it), and two faults of the same process must not race.
func TestLanesOfTheBuiltInFaults(t *testing.T) {
	byOn := map[string]string{}
	for _, f := range builtinFaults() {
		nf, ok := f.(netFault)
		if !ok {
			continue
		}
		if l, seen := byOn[nf.on]; seen && l != nf.lane {
			t.Errorf("%s acts on the %s proxies in lane %s, another fault on them in lane %s", nf.kind, nf.on, nf.lane, l)
		}
		byOn[nf.on] = nf.lane
	}
	want := map[string]string{
		"kill-writer": laneWriters, "kill-replica": laneReplicas, "pause-node": laneWriters,
		"kill-postgres": lanePostgres, "stop-postgres": lanePostgres,
		"partition-postgres": laneStoreLinks, "reset-postgres": laneStoreLinks, "latency-postgres": laneStoreLinks,
		"partition-proxy": laneProxyLinks, "kill-kafka": laneBroker, "partition-kafka": laneBroker,
	}
	for _, f := range builtinFaults() {
		if Lane(f) != want[f.Kind()] {
			t.Errorf("%s in lane %q, want %q", f.Kind(), Lane(f), want[f.Kind()])
		}
	}
	if len(lanes(builtinFaults())) != 6 {
		t.Errorf("%d lanes, want 6", len(lanes(builtinFaults())))
	}
}

// fakeFault records when it was broken and healed.
type fakeFault struct {
	kind, lane string
	mu         *sync.Mutex
	log        *[]span
}

type span struct {
	kind, lane string
	from, to   time.Time
}

func (f fakeFault) Kind() string { return f.kind }
func (f fakeFault) Lane() string { return f.lane }
func (f fakeFault) Inject(ctx context.Context, env *Env, rng *rand.Rand) (string, func(context.Context) error, error) {
	from := time.Now()
	return "x", func(context.Context) error {
		time.Sleep(5 * time.Millisecond)
		f.mu.Lock()
		*f.log = append(*f.log, span{f.kind, f.lane, from, time.Now()})
		f.mu.Unlock()
		return nil
	}, nil
}

// The schedule: within a lane one fault at a time, each kind Rounds
// times over the duration; lanes at once.
func TestScheduleLanes(t *testing.T) {
	var mu sync.Mutex
	var log []span
	ff := func(kind, lane string) Fault { return fakeFault{kind, lane, &mu, &log} }
	faults := []Fault{ff("a1", "a"), ff("a2", "a"), ff("a3", "a"), ff("b1", "b"), ff("c1", "c"), ff("c2", "c")}
	cfg := Config{Duration: 600 * time.Millisecond, Rounds: 4, Hold: 10 * time.Millisecond, Quiet: time.Millisecond,
		Progress: func(string) {}}
	start := time.Now()
	s := &schedule{cfg: cfg, sum: &Summary{Report: Report{Faults: map[string]int{}}}, start: start, end: start.Add(cfg.Duration)}
	ctx := t.Context()
	var wg sync.WaitGroup
	ls := lanes(faults)
	for i, l := range ls {
		wg.Go(func() { s.lane(ctx, ctx, func() {}, i, len(ls), l) })
	}
	wg.Wait()
	for _, k := range []string{"a1", "a2", "a3", "b1", "c1", "c2"} {
		if n := s.sum.Faults[k]; n < 3 || n > 5 {
			t.Errorf("%s injected %d times, want about 4 (the rounds)", k, n)
		}
	}
	overlapAcross := false
	for i, x := range log {
		for _, y := range log[i+1:] {
			if x.from.Before(y.to) && y.from.Before(x.to) {
				if x.lane == y.lane {
					t.Errorf("%s and %s of lane %s overlap", x.kind, y.kind, x.lane)
				} else {
					overlapAcross = true
				}
			}
		}
	}
	if !overlapAcross {
		t.Error("no faults of different lanes overlapped")
	}
}

// A heal while a fault on the write path is still on counts its recovery
// from when that one heals too; a fault off the write path (the broker,
// a replica, a kv node's link) delays no count; a fault that begins after
// the heal counts in full; a heal no write follows is a violation.
func TestRecoveryCountsFromWhole(t *testing.T) {
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	rec := &Recorder{start: t0}
	for _, c := range []float64{1, 16, 30} {
		rec.ops = append(rec.ops, &Op{Workload: "flights", Write: true, Outcome: OK, Invoke: at(c - 0.5), Complete: at(c)})
	}
	// A kv write does not count: the kv nodes are not the flights service.
	rec.ops = append(rec.ops, &Op{Workload: "kv", Write: true, Outcome: OK, Invoke: at(11), Complete: at(11.5)})
	timeline := []FaultRecord{
		{Kind: "partition-kafka", Lane: laneBroker, Target: "writer-1", Start: at(8), Healed: at(10)}, // PostgreSQL still down: whole at 15
		{Kind: "kill-postgres", Lane: lanePostgres, Target: "postgres", Start: at(9), Healed: at(15)},
		{Kind: "kill-replica", Lane: laneReplicas, Target: "replica-1", Start: at(9), Healed: at(28)},     // writer-1 still down: whole at 29.5
		{Kind: "kill-kafka", Lane: laneBroker, Target: "kafka", Start: at(20), Healed: at(25)},            // the replica is off the path; the kill after counts
		{Kind: "partition-postgres", Lane: laneStoreLinks, Target: "kv-1", Start: at(26), Healed: at(27)}, // off the path itself; writer-1 down: 29.5
		{Kind: "partition-kafka", Lane: laneBroker, Target: "replica-1", Start: at(31), Healed: at(33)},   // no write after
		{Kind: "kill-writer", Lane: laneWriters, Target: "writer-1", Start: at(26), Healed: at(29.5)},
	}
	sum := &Summary{Report: Report{Faults: map[string]int{}}}
	recovery(timeline, rec, sum)
	want := map[int]float64{0: 1, 1: 1, 2: 0.5, 3: 5, 4: 0.5, 6: 0.5}
	for i, w := range want {
		if d := timeline[i].RecoveryS - w; d > 0.01 || d < -0.01 {
			t.Errorf("%s: recovery %.2f s, want %.2f", timeline[i].Kind, timeline[i].RecoveryS, w)
		}
	}
	if !timeline[0].Whole.Equal(at(15)) || !timeline[3].Whole.Equal(at(25)) {
		t.Errorf("whole at %v and %v, want 15 s and 25 s", timeline[0].Whole.Sub(t0), timeline[3].Whole.Sub(t0))
	}
	if sum.MaxRecoveryS != 5 || len(sum.Violations) != 1 || sum.Violations[0].Check != "recovery" {
		t.Errorf("max %.2f, violations %v", sum.MaxRecoveryS, sum.Violations)
	}
}

// The figure: throughput over a timeline with a row per kind of fault.
func TestFigureRowsPerKind(t *testing.T) {
	t0 := time.Now()
	rec := &Recorder{start: t0}
	rec.ops = append(rec.ops, &Op{Workload: "flights", Write: true, Outcome: OK, Invoke: t0, Complete: t0.Add(3 * time.Second)})
	sum := &Summary{rec: rec, Timeline: []FaultRecord{
		{Kind: "kill-postgres", Lane: lanePostgres, Start: t0.Add(time.Second), Healed: t0.Add(2 * time.Second)},
		{Kind: "kill-kafka", Lane: laneBroker, Start: t0.Add(time.Second), Healed: t0.Add(4 * time.Second)},
		{Kind: "kill-postgres", Lane: lanePostgres, Start: t0.Add(5 * time.Second), Healed: t0.Add(6 * time.Second)},
	}}
	f := sum.Figure()
	if len(f.Panels) != 2 || len(f.Panels[1].Rows) != 2 || len(f.Panels[1].Spans) != 3 {
		t.Fatalf("panels %d, rows %v, spans %d", len(f.Panels), f.Panels[len(f.Panels)-1].Rows, len(f.Panels[len(f.Panels)-1].Spans))
	}
	if err := plot.Save(filepath.Join(t.TempDir(), "n.png"), f); err != nil {
		t.Fatal(err)
	}
}

// failFault cannot be injected.
type failFault struct{}

func (failFault) Kind() string { return "fail" }
func (failFault) Lane() string { return "f" }
func (failFault) Inject(context.Context, *Env, *rand.Rand) (string, func(context.Context) error, error) {
	return "x", nil, context.DeadlineExceeded
}

// A fault that cannot be injected ends every lane's schedule early, and
// every fault another lane had injected is healed before the lanes end.
func TestScheduleStopsOnAFailedFault(t *testing.T) {
	var mu sync.Mutex
	var log []span
	faults := []Fault{fakeFault{"a1", "a", &mu, &log}, failFault{}}
	cfg := Config{Duration: 10 * time.Second, Rounds: 100, Hold: 50 * time.Millisecond, Quiet: time.Millisecond, Progress: func(string) {}}
	start := time.Now()
	s := &schedule{cfg: cfg, sum: &Summary{Report: Report{Faults: map[string]int{}}}, start: start, end: start.Add(cfg.Duration)}
	sctx, stop := context.WithCancel(t.Context())
	defer stop()
	var wg sync.WaitGroup
	ls := lanes(faults)
	for i, l := range ls {
		wg.Go(func() { s.lane(t.Context(), sctx, stop, i, len(ls), l) })
	}
	wg.Wait()
	if time.Since(start) > 3*time.Second {
		t.Fatalf("the schedule went on %v after a fault failed", time.Since(start))
	}
	if len(s.sum.Violations) != 1 || s.sum.Violations[0].Check != "fault" {
		t.Errorf("violations %v", s.sum.Violations)
	}
	if s.sum.Faults["a1"] != len(log) {
		t.Errorf("%d faults a1 counted, %d healed", s.sum.Faults["a1"], len(log))
	}
}
