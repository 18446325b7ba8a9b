package ticketmodel

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/logbook/logbook/lab/loadtest"
	"github.com/logbook/logbook/lab/pepa"
)

// solve parses, calibrates and solves a generated model.
func solve(t *testing.T, m *Model, rates map[string]float64) *pepa.Result {
	t.Helper()
	parsed, err := pepa.Parse(m.Text)
	if err != nil {
		t.Fatalf("%v\n%s", err, m.Text)
	}
	sys, err := pepa.Check(parsed, rates)
	if err != nil {
		t.Fatalf("%v\n%s", err, m.Text)
	}
	res, err := sys.Solve(context.Background(), pepa.SolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func sum(res *pepa.Result, acts []string) float64 {
	s := 0.0
	for _, a := range acts {
		s += res.Throughput[a]
	}
	return s
}

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Max(math.Abs(want), 1e-12) {
		t.Errorf("%s = %.6g, want %.6g (±%g relative)", what, got, want, tol)
	}
}

// mm1kLoss is the throughput of an M/M/1/K queue: λ(1 − P_K).
func mm1kLoss(lambda, mu float64, k int) float64 {
	rho := lambda / mu
	pk := (1 - rho) * math.Pow(rho, float64(k)) / (1 - math.Pow(rho, float64(k+1)))
	return lambda * (1 - pk)
}

// One sport on one node behind a pool of n places is an M/M/1/n queue
// that loses what finds the pool full.
func TestSharedIsMM1K(t *testing.T) {
	m, err := New(Spec{Arch: "queue", Sports: []string{"athletics"}, Placement: map[string][]string{"athletics": {"db1"}}, Places: 5})
	if err != nil {
		t.Fatal(err)
	}
	res := solve(t, m, map[string]float64{"rate_athletics": 8, "mu_db1": 10})
	near(t, "athletics", sum(res, m.Arrivals["athletics"]), mm1kLoss(8, 10, 5), 1e-8)
}

// Two sports sharing one node share its queue: together they are an
// M/M/1/n queue of the summed rate, and each is served in proportion to
// its demand — the split that first-come first-served gives, which the
// model obtains from PEPA's passive rates.
func TestSharedNodeSplitsByDemand(t *testing.T) {
	m, err := New(Spec{Arch: "queue", Sports: []string{"athletics", "cycling"}, Places: 6,
		Placement: map[string][]string{"athletics": {"db1"}, "cycling": {"db1"}}})
	if err != nil {
		t.Fatal(err)
	}
	res := solve(t, m, map[string]float64{"rate_athletics": 9, "rate_cycling": 3, "mu_db1": 10})
	total := mm1kLoss(12, 10, 6)
	near(t, "athletics", sum(res, m.Arrivals["athletics"]), total*9/12, 1e-8)
	near(t, "cycling", sum(res, m.Arrivals["cycling"]), total*3/12, 1e-8)
	near(t, "node", res.Throughput["serve_db1"], total, 1e-8)
}

// The paper's shared-queue result in the model: once the hot sport's node
// saturates, every sport is served in proportion to its demand, so a cold
// sport gets about μ·c/a; under fair the cold sports keep their demand
// and the hot one gets what is left of its two nodes.
func TestArchitecturesDirection(t *testing.T) {
	sports := []string{"athletics", "cycling", "diving"}
	run := loadtest.TicketsResult{Sports: sports, NodeRate: 100}
	rates := func(m *Model, a float64) map[string]float64 {
		r := map[string]float64{"rate_athletics": a, "rate_cycling": 20, "rate_diving": 20, "mu_db1": 100, "mu_db2": 100, "mu_db3": 100}
		if m.Spec.Control {
			r["rate_control"] = 20
		}
		return r
	}
	for _, arch := range []string{"queue", "fair", "micro"} {
		spec, err := SpecOf(run, Options{Arch: arch})
		if err != nil {
			t.Fatal(err)
		}
		m, err := New(spec)
		if err != nil {
			t.Fatal(err)
		}
		res := solve(t, m, rates(m, 400))
		ath, cyc := sum(res, m.Arrivals["athletics"]), sum(res, m.Arrivals["cycling"])
		switch arch {
		case "queue":
			near(t, "queue: cycling", cyc, 100*20.0/400, 0.05)
			near(t, "queue: athletics", ath, 100, 0.02)
			near(t, "queue: control", sum(res, m.Arrivals["control"]), cyc, 1e-6)
		case "fair":
			if cyc < 0.99*20 {
				t.Errorf("fair: cycling %.2f of 20", cyc)
			}
			// Athletics' two nodes hold 200/s, less cycling's share of db1
			// (cycling lives on db1 and db2, diving on db2 and db3).
			if ath < 0.9*(200-20) || ath > 200 {
				t.Errorf("fair: athletics %.2f, want most of what its two nodes have left", ath)
			}
		case "micro":
			if cyc < 0.99*20 || ath > 100 || ath < 95 {
				t.Errorf("micro: athletics %.2f, cycling %.2f", ath, cyc)
			}
		}
	}
}

// Sports and nodes whose names are not identifiers are renamed, and say so.
func TestNames(t *testing.T) {
	m, err := New(Spec{Arch: "queue-rep", Sports: []string{"Beach Volley", "sport-2"}, Places: 3,
		Placement: map[string][]string{"Beach Volley": {"db1", "db2"}, "sport-2": {"db2", "db1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Text, `sport1 is sport "Beach Volley"`) || m.Names.Rate("sport-2") != "rate_sport2" {
		t.Errorf("names:\n%s", m.Text)
	}
	if _, err := pepa.Parse(m.Text); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Spec{Arch: "queue", Sports: []string{"a"}, Places: 3}); err == nil {
		t.Error("a sport on no node was accepted")
	}
	if _, err := New(Spec{Arch: "lottery", Sports: []string{"a"}, Places: 3, Placement: map[string][]string{"a": {"db1"}}}); err == nil {
		t.Error("an unknown architecture was accepted")
	}
}

// Predict calibrates each step with its measured rates: a step offered
// below capacity is predicted to be served whole, and the error is the
// measured throughput's distance from the prediction.
func TestPredictCalibratesEachStep(t *testing.T) {
	run := loadtest.TicketsResult{
		Arch: "queue", NodeRate: 100, Workers: 16, Sports: []string{"athletics", "cycling"},
		Placement: map[string][]string{"athletics": {"db1"}, "cycling": {"db2"}},
		Steps: []loadtest.TicketsStep{
			{Multiplier: 1, Offered: map[string]float64{"athletics": 20, "cycling": 20, "control": 20},
				Throughput:  map[string]float64{"athletics": 22, "cycling": 20, "control": 20},
				ServiceRate: map[string]float64{"db1": 100, "db2": 100}},
			{Multiplier: 10, Offered: map[string]float64{"athletics": 200, "cycling": 20, "control": 20},
				Throughput:  map[string]float64{"athletics": 50, "cycling": 10, "control": 10},
				ServiceRate: map[string]float64{"db1": 50, "db2": 100}},
		},
	}
	p, err := Predict(context.Background(), run, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Places != 16 || len(p.Steps) != 2 {
		t.Fatalf("prediction %+v", p)
	}
	a := p.Steps[0].Sports["athletics"]
	near(t, "step 1 athletics predicted", a.Predicted, 20, 1e-3)
	near(t, "step 1 athletics error %", a.Error, 10, 1e-3)
	// At ×10 db1 was measured at 50/s: the model saturates at that rate,
	// and cycling gets about 50·20/200.
	b := p.Steps[1].Sports
	near(t, "step 10 athletics predicted", b["athletics"].Predicted, 50, 0.02)
	near(t, "step 10 cycling predicted", b["cycling"].Predicted, 5, 0.06)
	if p.MaxAbsError < 50 {
		t.Errorf("largest error %.1f %%: cycling measured 10 against about 5 predicted", p.MaxAbsError)
	}

	run.NodeRate = 0
	if _, err := Predict(context.Background(), run, Options{}); err == nil {
		t.Error("a run on unlimited nodes was predicted")
	}
	run.NodeRate, run.Placement = 100, nil
	if _, err := Predict(context.Background(), run, Options{}); err == nil || !strings.Contains(err.Error(), "placement") {
		t.Errorf("a run without placement: %v", err)
	}
}

// Names that would collide are made unique: a fallback name a real sport
// already has, a sport called control, names whose underscores would make
// two arrival actions alike; micro refuses two sports on one node.
func TestNamesNeverCollide(t *testing.T) {
	for _, sports := range [][]string{
		{"sport2", "a b"},
		{"a", "a_b"},
	} {
		placement := map[string][]string{sports[0]: {"b_c"}, sports[1]: {"c"}}
		m, err := New(Spec{Arch: "queue", Sports: sports, Places: 3, Placement: placement, Control: true})
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := pepa.Parse(m.Text)
		if err != nil {
			t.Fatalf("%v: %v\n%s", sports, err, m.Text)
		}
		rates := map[string]float64{}
		for _, s := range sports {
			rates[m.Names.Rate(s)] = 1
		}
		rates[m.Names.Rate("control")] = 1
		for _, nd := range m.Nodes {
			rates[m.Names.Service(nd)] = 10
		}
		if len(rates) != len(sports)+1+len(m.Nodes) {
			t.Fatalf("%v: rate names collide: %v", sports, rates)
		}
		if _, err := pepa.Check(parsed, rates); err != nil {
			t.Fatalf("%v: %v\n%s", sports, err, m.Text)
		}
		if len(m.Arrivals) != len(sports)+1 {
			t.Errorf("%v: arrivals %v", sports, m.Arrivals)
		}
	}
	if _, err := New(Spec{Arch: "queue", Sports: []string{"control"}, Places: 3, Placement: map[string][]string{"control": {"db1"}}}); err == nil {
		t.Error("a sport called control was accepted")
	}
	_, err := New(Spec{Arch: "micro", Sports: []string{"a", "b"}, Places: 3, Placement: map[string][]string{"a": {"db1"}, "b": {"db1"}}})
	if err == nil || !strings.Contains(err.Error(), "share db1") {
		t.Errorf("micro with a shared node: %v", err)
	}
}

// A run with more sports than a Markov chain can hold is refused with a
// clear message instead of running out of memory.
func TestPredictBoundsTheStateSpace(t *testing.T) {
	var sports []string
	placement := map[string][]string{}
	offered := map[string]float64{"control": 1}
	for i := range 12 {
		s := string(rune('a' + i))
		sports = append(sports, s)
		placement[s] = []string{s + "node"}
		offered[s] = 1
	}
	run := loadtest.TicketsResult{Arch: "queue", NodeRate: 100, Workers: 16, Sports: sports, Placement: placement,
		Steps: []loadtest.TicketsStep{{Multiplier: 1, Offered: offered, Throughput: offered}}}
	_, err := Predict(context.Background(), run, Options{})
	if err == nil || !strings.Contains(err.Error(), "states") {
		t.Fatalf("12 sports under queue: %v", err)
	}
}
