package pepa

import (
	"context"
	"math"
	"strings"
	"testing"
)

func solveText(t *testing.T, src string, set map[string]float64) *Result {
	t.Helper()
	m, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Check(m, set)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Solve(context.Background(), SolveOptions{Tolerance: 1e-13})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %.12g, want %.12g", what, got, want)
	}
}

// An M/M/1/K queue written in PEPA: K places, each empty or full, an
// arrival stream that fills one (passive places, so arrivals are lost
// when all are full) and a server that empties one. Its steady state is
// P(n) = ρ^n (1−ρ) / (1−ρ^(K+1)), ρ = λ/μ; throughput λ(1 − P(K)).
func TestMM1KAgainstFormula(t *testing.T) {
	const model = `
lambda = 2; mu = 3; k = 7;
Arrivals = (arrive, lambda).Arrivals;
Server = (serve, mu).Server;
Place = (arrive, T).Full;
Full = (serve, T).Place;
Arrivals <arrive> Place[k] <serve> Server
`
	for _, lambda := range []float64{0.5, 2, 3, 6} {
		const mu, k = 3.0, 7
		r := solveText(t, model, map[string]float64{"lambda": lambda})
		if r.States != k+1 {
			t.Fatalf("λ=%g: %d states, want %d", lambda, r.States, k+1)
		}
		rho := lambda / mu
		p := make([]float64, k+1)
		var z, mean float64
		for n := range p {
			p[n] = math.Pow(rho, float64(n))
			z += p[n]
		}
		for n := range p {
			p[n] /= z
			mean += float64(n) * p[n]
		}
		near(t, "throughput arrive", r.Throughput["arrive"], lambda*(1-p[k]), 1e-9)
		near(t, "throughput serve", r.Throughput["serve"], mu*(1-p[0]), 1e-9)
		near(t, "mean population Full", r.Populations["Place"]["Full"], mean, 1e-9)
		near(t, "utilisation Place/Full", r.Utilisation["Place"]["Full"], mean/k, 1e-9)
	}
}

// Two components that never interact: each alternates between two states,
// so each is in its first state with probability (1/r1)/(1/r1 + 1/r2) and
// cycles at 1/(1/r1 + 1/r2), and the joint state is the product.
func TestIndependentComponents(t *testing.T) {
	r := solveText(t, `
r1 = 1; r2 = 3; s1 = 0.5; s2 = 4;
P = (a, r1).P2; P2 = (b, r2).P;
Q = (c, s1).Q2; Q2 = (d, s2).Q;
P || Q
`, nil)
	if r.States != 4 || r.Transitions != 8 {
		t.Errorf("%d states, %d transitions; want 4 and 8", r.States, r.Transitions)
	}
	near(t, "throughput a", r.Throughput["a"], 1/(1.0+1.0/3), 1e-10)
	near(t, "throughput c", r.Throughput["c"], 1/(2+0.25), 1e-10)
	near(t, "utilisation P/P", r.Utilisation["P"]["P"], 1/(1+1.0/3), 1e-10)
	near(t, "utilisation Q/Q2", r.Utilisation["Q"]["Q2"], 0.25/2.25, 1e-10)
}

// A client and a server that cooperate: the client's request is active,
// the server accepts it passively; the server's response is active and
// the client waits for it passively. The server picks one of two
// responses with passive weights 1 : 2, so after a request it is B1 with
// probability 1/3. A cycle takes 1/r + (1/3)/m1 + (2/3)/m2.
func TestCooperationWithPassiveRates(t *testing.T) {
	r := solveText(t, `
r = 2; m1 = 4; m2 = 1;
Client = (req, r).Wait;
Wait = (resp, T).Client;
Server = (req, T).B1 + (req, 2 * T).B2;
B1 = (resp, m1).Server;
B2 = (resp, m2).Server;
Client <req, resp> Server
`, nil)
	cycle := 1/2.0 + (1.0/3)/4 + (2.0/3)/1
	near(t, "throughput req", r.Throughput["req"], 1/cycle, 1e-10)
	near(t, "throughput resp", r.Throughput["resp"], 1/cycle, 1e-10)
	near(t, "utilisation Server/B2", r.Utilisation["Server"]["B2"], (2.0/3)/1/cycle, 1e-10)
}

// The apparent-rate rule: a shared action proceeds at the slower side's
// total rate, and each side's choice keeps its proportions. A offers go
// at 3; B offers go at 1 to B1 and at 1 to B2 (apparent rate 2). The
// cooperation goes at min(3, 2) = 2, half to each. Hiding turns go into
// tau.
func TestApparentRateRule(t *testing.T) {
	r := solveText(t, `
A = (go, 3).A;
B = (go, 1).B1 + (go, 1).B2;
B1 = (back, 10).B;
B2 = (back, 10).B;
A <go> B
`, nil)
	// Cycle: go at 2, then back at 10.
	near(t, "throughput go", r.Throughput["go"], 1/(0.5+0.1), 1e-10)
	near(t, "utilisation B1", r.Utilisation["B"]["B1"], 0.05/0.6, 1e-10)
	h := solveText(t, `
A = (go, 3).A;
B = (go, 1).B1 + (go, 1).B2;
B1 = (back, 10).B;
B2 = (back, 10).B;
(A <go> B)/{go}
`, nil)
	if _, ok := h.Throughput["go"]; ok {
		t.Error("go is hidden but still reported")
	}
	near(t, "throughput tau", h.Throughput["tau"], 1/(0.5+0.1), 1e-10)
}

// P[N][a] is N copies that must all take part in every a: with N = 3
// copies each alternating (a, 1) and (b, 2), a fires only when all three
// have done their b.
func TestArrayWithCooperationSet(t *testing.T) {
	r := solveText(t, `
P = (a, 1).P2;
P2 = (b, 2).P;
P[3][a]
`, nil)
	if r.States != 8 {
		t.Errorf("%d states, want 8 (2^3: synchronised copies are not counted)", r.States)
	}
	// A cycle: one a (rate 1, all copies at once), then the three b's in
	// any order: the maximum of three Exp(2), mean (1/2)(1 + 1/2 + 1/3).
	near(t, "throughput a", r.Throughput["a"], 1/(1+0.5*(1+0.5+1.0/3)), 1e-10)
	near(t, "throughput b", r.Throughput["b"], 3/(1+0.5*(1+0.5+1.0/3)), 1e-10)
}

// Calibration replaces rates by measured values and keeps the rest.
func TestCalibrate(t *testing.T) {
	m := loadModel(t, "queue_db.pepa")
	var b strings.Builder
	if err := WriteCalibrated(&b, m, map[string]float64{"db": 4.2, "a": 3}, "a test"); err != nil {
		t.Fatal(err)
	}
	c, err := Parse(b.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	s, err := Check(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.rates["db"] != 4.2 || s.rates["a"] != 3 || s.rates["q"] != 100 {
		t.Errorf("rates %v", s.rates)
	}
	if !strings.Contains(b.String(), "db = 4.2") {
		t.Errorf("no db in\n%s", b.String())
	}
	if _, err := Calibrate(m, map[string]float64{"dbx": 1}); err == nil {
		t.Error("calibrating an unknown rate succeeded")
	}
	if _, err := Calibrate(m, map[string]float64{"db": -1}); err == nil {
		t.Error("calibrating with a negative rate succeeded")
	}
}

// Aggregation–disaggregation changes how fast the solver converges, not
// where: on the shared queue at critical load (a = 5, where plain
// Gauss–Seidel is slowest) both reach the same throughputs, and
// aggregation in far fewer sweeps.
func TestAggregationAcceleratesGaussSeidel(t *testing.T) {
	m := loadModel(t, "shared_queue.pepa")
	s, err := Check(m, map[string]float64{"a": 5, "n": 50})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Derive(0)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := c.Solve(context.Background(), SolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := c.Solve(context.Background(), SolveOptions{NoAggregation: true})
	if err != nil {
		t.Fatal(err)
	}
	if fast.Iterations*5 > plain.Iterations {
		t.Errorf("aggregation took %d sweeps, plain Gauss–Seidel %d", fast.Iterations, plain.Iterations)
	}
	// The same residual bound leaves plain Gauss–Seidel's throughputs less
	// consistent (athletics in and served differ by 3e-8); the aggregated
	// solution balances them to the last digits.
	f, p := fast.Measures().Throughput, plain.Measures().Throughput
	for a := range p {
		near(t, a, f[a], p[a], 1e-6)
	}
	near(t, "athletics − serve1", f["athletics"]-f["serve1"], 0, 1e-9)
}
