package pepa

import (
	"context"
	"math"
	"strings"
	"testing"
)

func closureText(t *testing.T, src string, set map[string]float64) *FluidResult {
	t.Helper()
	m, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Check(m, set)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Closure(context.Background(), FluidOptions{Tolerance: 1e-8})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Converged || r.Method != "closure" {
		t.Fatalf("%v: converged %v (change %g), method %s", set, r.Converged, r.Change, r.Method)
	}
	for c, vs := range r.Variances {
		for ls, v := range vs {
			if !(v >= 0) {
				t.Errorf("%v: variance of %s %s is %g", set, c, ls, v)
			}
		}
	}
	return r
}

// With rates linear in the counts the moment equations are closed
// exactly: N independent copies alternating between two states at rates
// r and q have a binomial count, mean N p and variance N p (1 − p) with
// p = q/(r+q) the fraction thinking, and the two counts have covariance
// −N p (1 − p) (they sum to N).
func TestClosureExactForLinearRates(t *testing.T) {
	const model = `
r = 2; q = 3; n = 30;
Think = (think, r).Work;
Work = (work, q).Think;
Think[n]
`
	r := closureText(t, model, nil)
	const n, p = 30.0, 3.0 / 5
	near(t, "mean thinking", r.Populations["Think"]["Think"], n*p, 1e-6)
	near(t, "variance thinking", r.Variances["Think"]["Think"], n*p*(1-p), 1e-6)
	near(t, "variance working", r.Variances["Think"]["Work"], n*p*(1-p), 1e-6)
	near(t, "think throughput", r.Throughput["think"], n*p*2, 1e-6)
}

// The M/M/1/K queue of TestMM1KAgainstFormula with K places: the closure's
// throughput against the closed form λ(1 − P(K)), P(n) ∝ ρ^n. The mean
// field loses nothing below capacity and is 1/(K+1) off at ρ = 1; the
// closure keeps the variance of the queue, and with it the blocking.
// (Its mean queue length is poor at light load — the normal stand-in for
// a count near zero — and the throughputs are what it is asserted on.)
func TestClosureMM1K(t *testing.T) {
	const model = `
lambda = 2; mu = 3; k = 7;
Arrivals = (arrive, lambda).Arrivals;
Server = (serve, mu).Server;
Place = (arrive, T).Full;
Full = (serve, T).Place;
Arrivals <arrive> Place[k] <serve> Server
`
	for _, tc := range []struct{ k, tol float64 }{{10, 0.02}, {20, 0.01}} {
		for _, lambda := range []float64{1, 2, 3, 4.5, 6} {
			const mu = 3.0
			r := closureText(t, model, map[string]float64{"lambda": lambda, "k": tc.k})
			rho := lambda / mu
			k := int(tc.k)
			var z float64
			for n := 0; n <= k; n++ {
				z += math.Pow(rho, float64(n))
			}
			want := lambda * (1 - math.Pow(rho, tc.k)/z)
			for _, act := range []string{"arrive", "serve"} {
				if got := r.Throughput[act]; math.Abs(got-want) > tc.tol*want {
					t.Errorf("K=%g λ=%g: %s %.5f, closed form %.5f (%.2f %%)", tc.k, lambda, act, got, want, 100*(got-want)/want)
				}
			}
		}
	}
}

// Models outside the class are refused, naming the action and why.
func TestClosureRefuses(t *testing.T) {
	for _, tc := range []struct{ model, want string }{
		{`r = 1; s = 2;
P = (a, r).P1; P1 = (b, r).P;
Q = (a, s).Q1; Q1 = (b, s).Q;
P[3] <a> Q[2]
`, "action a's rate is the minimum of two active sides' rates"},
		{`r = 1;
P = (a, T).P1; P1 = (b, r).P;
Q = (a, T).Q; R = (a, r).R;
(P[3] <a> Q[2]) <a> R
`, "action a's rate is the minimum of two passive sides' weights"},
		{`r = 1; s = 2;
A = (a, r).A;
P = (a, T).P1; P1 = (a, T).P2; P2 = (b, s).P;
A <a> P[4]
`, "action a's rate depends on a passive side whose enabling copies are in several local states"},
		{`r = 1; s = 2;
A = (a, r).A;
P = (a, T).P1; P1 = (b, s).P;
Q = (a, T).Q1; Q1 = (c, s).Q;
(A <a> P[4]) <a> Q[3]
`, "action a's rate needs two passive partners present"},
	} {
		m, err := Parse(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Check(m, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Closure(context.Background(), FluidOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "the normal closure supports") {
			t.Errorf("%s: error %v, want %q", tc.model, err, tc.want)
		}
	}
}
