package bench

import (
	"math"
)

// stations is the network of one request at n nodes: nginx, the n nodes
// (each request visits one, so each has 1/n of the demand), PostgreSQL.
func stations(d map[string]float64, nodeKind string, n int, nodeCPUs, storeCPUs, proxyCPUs float64) []Station {
	st := []Station{{Name: "proxy", Demand: d["proxy"], CPUs: proxyCPUs}}
	for range n {
		st = append(st, Station{Name: nodeKind, Demand: d[nodeKind] / float64(n), CPUs: nodeCPUs})
	}
	return append(st, Station{Name: "store", Demand: d["store"], CPUs: storeCPUs})
}

// predict calibrates the model from the one-node rows (service demand
// law: CPU-seconds of each kind ÷ requests served) and predicts every
// measured row and, if asked, the paper configurations: reads from the
// one-node row with the most work done below the knee, writes from each
// scenario's one-node row. A demand per request is taken as fixed: the
// model does not know that a write node among several pays more per
// command than a node alone (partly the others' commit notifications
// it handles: docs/benchmarks.md, "Fresh schemas, a cache that holds
// the scenario, and the kernel's period"), so there it over-predicts.
func predict(res *ScalingResult, cfg ScalingConfig) {
	nodeKind := "replica"
	if cfg.Mode == "write" {
		nodeKind = "node"
	}
	calib := map[string]map[string]float64{} // scenario → one node's demands
	for _, r := range res.Rows {
		if r.Nodes != 1 || r.AchievedPerSec <= 0 {
			continue
		}
		if cfg.Mode == "capacity" && res.KneePerSec > 0 && r.OfferedPerSec > res.KneePerSec {
			continue
		}
		d := map[string]float64{}
		for k, c := range r.CPU {
			d[k] = c.Cores / r.AchievedPerSec
		}
		calib[r.Scenario] = d
	}
	d0, ok := calib[""]
	if cfg.Mode == "write" {
		d0, ok = calib["lower"]
	}
	if !ok {
		return
	}
	for _, k := range []string{"proxy", nodeKind, "store"} {
		res.Demands = append(res.Demands, Demand{Kind: k, Seconds: d0[k]})
	}
	// Unset quotas: the machine's CPUs.
	q := func(x float64) float64 {
		if x <= 0 {
			return res.Machine
		}
		return x
	}
	for i, r := range res.Rows {
		d := calib[r.Scenario]
		if d == nil {
			continue
		}
		st := stations(d, nodeKind, r.Nodes, q(cfg.Budget.Node), q(cfg.Budget.Store), q(cfg.Budget.Proxy))
		var x, p99 float64
		if cfg.Mode == "write" {
			users := cfg.size(r.Scenario, scenarioUsers(r.Scenario), 1).Planners
			m, err := MVA(st, 0, users)
			if err != nil {
				continue
			}
			x = m.Throughput
			// Exponential response time: p99 = mean × ln 100.
			p99 = m.Response * math.Log(100) * 1000
		} else {
			p := Open(st, r.OfferedPerSec)
			x, p99 = p.Throughput, p.P99*1000
		}
		x, p99 = math.Round(x*10)/10, math.Round(p99*10)/10
		res.Rows[i].Predicted = &x
		if !math.IsInf(p99, 0) {
			res.Rows[i].PredictedP99 = &p99
		}
	}
	// The paper table: n nodes, nginx and PostgreSQL each on a machine of
	// this one's size, and PostgreSQL on one four times as big.
	m := res.Machine
	for _, n := range cfg.Predict {
		for _, storeCPUs := range []float64{m, 4 * m} {
			st := stations(d0, nodeKind, n, m, storeCPUs, m)
			// Capacity: the bottleneck's rate (offered far beyond it).
			p := Open(st, 1e12)
			res.Prediction = append(res.Prediction, PaperRow{Nodes: n, NodeCPUs: m, StoreCPUs: storeCPUs,
				PerSec: math.Round(p.Throughput), Bottleneck: p.Bottleneck, StoreUtil: math.Round(100*p.Throughput*d0["store"]/storeCPUs) / 100})
		}
	}
}

func scenarioUsers(name string) int {
	for _, s := range thesisScenarios {
		if s.name == name {
			return s.users
		}
	}
	return 1
}
