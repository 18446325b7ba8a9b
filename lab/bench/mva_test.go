package bench

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

// TestMVATextbook checks exact MVA against two hand solutions: a network
// of two stations with demands 1 s and 2 s (N = 1: X = 1/3; N = 2:
// residence times 4/3 and 10/3, X = 3/7), and the balanced network's
// closed form X(N) = N ÷ (D × (N + K − 1)) for K stations of demand D.
func TestMVATextbook(t *testing.T) {
	two := []Station{{Name: "a", Demand: 1, CPUs: 1}, {Name: "b", Demand: 2, CPUs: 1}}
	r, err := MVA(two, 0, 1)
	if err != nil || !near(r.Throughput, 1.0/3) {
		t.Errorf("N=1: X = %v (%v), want 1/3", r.Throughput, err)
	}
	r, _ = MVA(two, 0, 2)
	if !near(r.Throughput, 3.0/7) || !near(r.Response, 14.0/3) || !near(r.Queue[0], 4.0/7) || !near(r.Queue[1], 10.0/7) {
		t.Errorf("N=2: %+v, want X 3/7, R 14/3, queues 4/7 and 10/7", r)
	}
	// The 2 s station is the bottleneck: X → 1/2 as N grows.
	r, _ = MVA(two, 0, 200)
	if math.Abs(r.Throughput-0.5) > 1e-3 || math.Abs(r.Util[1]-1) > 2e-3 {
		t.Errorf("N=200: X %v, U %v; want the bottleneck's 1/2 and 1", r.Throughput, r.Util)
	}
	// Balanced: K = 3 stations of 0.1 s.
	bal := []Station{{Demand: 0.1, CPUs: 1}, {Demand: 0.1, CPUs: 1}, {Demand: 0.1, CPUs: 1}}
	for _, n := range []int{1, 5, 40} {
		r, _ := MVA(bal, 0, n)
		if want := float64(n) / (0.1 * float64(n+2)); !near(r.Throughput, want) {
			t.Errorf("balanced N=%d: X %v, want %v", n, r.Throughput, want)
		}
	}
	// A quota of 0.5 CPUs doubles the service time.
	r, _ = MVA([]Station{{Demand: 1, CPUs: 0.5}}, 2, 1)
	if !near(r.Throughput, 1.0/4) {
		t.Errorf("half a CPU and 2 s think: X %v, want 1/4", r.Throughput)
	}
	if _, err := MVA(two, 0, 0); err == nil {
		t.Error("no customers accepted")
	}
}

func TestOpenUtilisationLaw(t *testing.T) {
	st := []Station{{Name: "node", Demand: 0.002, CPUs: 0.5}, {Name: "proxy", Demand: 0.0005, CPUs: 0.5}}
	// node: 4 ms per request at half a CPU → capacity 250/s.
	p := Open(st, 100)
	if !near(p.Throughput, 100) || p.Bottleneck != "node" || !near(p.MaxUtil, 0.4) {
		t.Errorf("at 100/s: %+v", p)
	}
	if want := (0.004/0.6 + 0.001/0.9) * math.Log(100); !near(p.P99, want) {
		t.Errorf("p99 %v, want %v", p.P99, want)
	}
	p = Open(st, 500)
	if !near(p.Throughput, 250) || !math.IsInf(p.P99, 1) {
		t.Errorf("past saturation: %+v", p)
	}
}
