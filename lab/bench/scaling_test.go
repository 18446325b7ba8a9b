package bench

import (
	"math"
	"strings"
	"testing"

	"github.com/logbook/logbook/lab/cluster"
)

func TestKnee(t *testing.T) {
	rows := []ScalingRow{
		{OfferedPerSec: 100, P99: 10, Requests: 1000},
		{OfferedPerSec: 200, P99: 19, Requests: 2000},
		{OfferedPerSec: 300, P99: 15, Requests: 3000, Failures: 4}, // 0.13 % failed
		{OfferedPerSec: 400, P99: 20, Requests: 4000, Failures: 4}, // 0.1 %: allowed
		{OfferedPerSec: 500, P99: 21, Requests: 5000},
	}
	if k := Knee(rows); k != 400 {
		t.Errorf("knee %v, want 400 (500's p99 is past twice 10 ms; 300 failed too often)", k)
	}
	if k := Knee(nil); k != 0 {
		t.Errorf("no rows: knee %v", k)
	}
}

// TestPredictReads calibrates from a one-node row — a replica using 0.08
// cores and nginx 0.02 at 400 requests/s: 0.2 and 0.05 ms per request —
// and predicts rows at 2 and 4 replicas of 0.1 CPUs behind a 0.1-CPU nginx:
// 2 replicas can serve 1,000/s, but nginx only 2,000/s.
func TestPredictReads(t *testing.T) {
	res := ScalingResult{Mode: "read", Machine: 2, Rows: []ScalingRow{
		{Nodes: 1, OfferedPerSec: 400, AchievedPerSec: 400, CPU: map[string]cluster.KindCPU{"replica": {Cores: 0.08}, "proxy": {Cores: 0.02}, "store": {Cores: 0.004}}},
		{Nodes: 2, OfferedPerSec: 1200},
		{Nodes: 8, OfferedPerSec: 3200},
	}}
	predict(&res, ScalingConfig{Mode: "read", Budget: Budget{Node: 0.1, Store: 0.5, Proxy: 0.1}, Predict: []int{16}})
	want := []float64{400, 1000, 2000}
	for i, w := range want {
		if res.Rows[i].Predicted == nil || math.Abs(*res.Rows[i].Predicted-w) > 0.5 {
			t.Errorf("row %d: predicted %v, want %v", i, res.Rows[i].Predicted, w)
		}
	}
	if len(res.Demands) != 3 || math.Abs(res.Demands[1].Seconds-0.0002) > 1e-9 {
		t.Errorf("demands %+v", res.Demands)
	}
	// 16 nodes of 2 CPUs behind a 2-CPU nginx: nginx's 40,000/s.
	if len(res.Prediction) != 2 || res.Prediction[0].Bottleneck != "proxy" || math.Abs(res.Prediction[0].PerSec-40000) > 1 {
		t.Errorf("paper table %+v", res.Prediction)
	}
}

// TestPredictWrites: each scenario's write rows are predicted from its
// one-node row's demands. One node: 0.05 ms of a 0.1-CPU node and
// 0.075 ms of a 0.4-CPU PostgreSQL a command. Two nodes would serve
// 4,000/s with the 1,250 planners split evenly, and serve that × 625 ÷
// the busiest node's expected planners; at four the store, at 5,333/s,
// is the bottleneck, however the planners fall. The higher scenario has
// its own one-node row (0.1 ms a command at the node): two nodes serve
// 2,000/s × 750 ÷ the busiest's planners.
func TestPredictWrites(t *testing.T) {
	cpu := func(rate, node, store float64) map[string]cluster.KindCPU {
		return map[string]cluster.KindCPU{"node": {Cores: rate * node / 1000}, "proxy": {Cores: rate * 0.001 / 1000}, "store": {Cores: rate * store / 1000}}
	}
	res := ScalingResult{Mode: "write", Machine: 2, Rows: []ScalingRow{
		{Nodes: 1, Scenario: "lower", AchievedPerSec: 2000, CPU: cpu(2000, 0.05, 0.075)},
		{Nodes: 2, Scenario: "lower"},
		{Nodes: 4, Scenario: "lower"},
		{Nodes: 1, Scenario: "higher", AchievedPerSec: 1000, CPU: cpu(1000, 0.1, 0.05)},
		{Nodes: 2, Scenario: "higher"},
	}}
	predict(&res, ScalingConfig{Mode: "write", Scale: 1, Budget: Budget{Node: 0.1, Store: 0.4, Proxy: 1}})
	lower2, higher2 := 4000*625/ExpectedBusiest(1250, 2), 2000*750/ExpectedBusiest(1500, 2)
	if lower2 > 3950 || higher2 > 1975 {
		t.Fatalf("the busiest of two nodes costs less than 1.25 %%: %.0f, %.0f", lower2, higher2)
	}
	for i, want := range []float64{2000, lower2, 5333, 1000, higher2} {
		if p := res.Rows[i].Predicted; p == nil || math.Abs(*p-want) > 0.005*want {
			t.Errorf("row %d (%s, %d nodes): predicted %v, want about %v", i, res.Rows[i].Scenario, res.Rows[i].Nodes, deref(p), want)
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestWithSearchPath: the schema is set whether the URL has a query, a
// search_path of its own (replaced, not added: PostgreSQL would take the
// first) or other parameters (kept); a bad URL's error leaves the
// password out.
func TestWithSearchPath(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u:pw@h:5432/db", "postgres://u:pw@h:5432/db?search_path=s1"},
		{"postgres://u@h/db?search_path=mine&sslmode=disable", "postgres://u@h/db?search_path=s1&sslmode=disable"},
		{"postgres://u@h/db?sslrootcert=%2Fetc%2Fca.pem", "postgres://u@h/db?search_path=s1&sslrootcert=%2Fetc%2Fca.pem"},
	} {
		got, err := withSearchPath(c.in, "s1")
		if err != nil || got != c.want {
			t.Errorf("withSearchPath(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := withSearchPath("postgres://u:secret@h:bad port/db", "s1"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("a bad URL: %v (want an error without the password)", err)
	}
}

// TestScenarioSizes: --scale scales planners and legs; with
// --planner-scale the planners take that factor and the legs --scale.
func TestScenarioSizes(t *testing.T) {
	for _, c := range []struct {
		cfg  ScalingConfig
		want ScenarioSize
	}{
		{ScalingConfig{Scale: 0.3}, ScenarioSize{"lower", 375, 225}},
		{ScalingConfig{Scale: 0.1, PlannerScale: 1}, ScenarioSize{"lower", 1250, 75}},
		{ScalingConfig{Scale: 0.0001}, ScenarioSize{"lower", 1, 1}},
	} {
		if got := c.cfg.size("lower", 1250, 750); got != c.want {
			t.Errorf("%+v: %+v, want %+v", c.cfg, got, c.want)
		}
	}
}
