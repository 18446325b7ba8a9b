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

// predict calibrates the model from one-node rows (service demand law:
// CPU-seconds of each kind ÷ requests served) and predicts every
// measured row and, if asked, the paper configurations.
//
// Reads: from the one-node row with the most work done below the knee;
// a replica's demand does not depend on the load.
//
// Writes: a node's demand per command, and PostgreSQL's, depend on how
// many commands each appending transaction carries, and that on how
// many planners the node serves: a node batches the commands that
// arrive while its previous batch commits. So the n-node row is
// calibrated from one node serving the planners ÷ n that each of the n
// serves (the result's Calibration rows, run with Calibrate), and
// PostgreSQL's demand per command with it; nothing is taken from the
// n-node row itself. Without such a row the n-node row falls back to the
// one-node row of its scenario (the whole planners).
func predict(res *ScalingResult, cfg ScalingConfig) {
	nodeKind := "replica"
	if cfg.Mode == "write" {
		nodeKind = "node"
	}
	demands := func(r ScalingRow) map[string]float64 {
		d := map[string]float64{}
		for k, c := range r.CPU {
			d[k] = c.Cores / r.AchievedPerSec
		}
		return d
	}
	calib := map[string]map[string]float64{}         // scenario → one node's demands
	share := map[string]map[int]map[string]float64{} // write: scenario → n → one node's demands at n's share
	for _, r := range res.Rows {
		if r.Nodes != 1 || r.AchievedPerSec <= 0 {
			continue
		}
		if cfg.Mode == "capacity" && res.KneePerSec > 0 && r.OfferedPerSec > res.KneePerSec {
			continue
		}
		calib[r.Scenario] = demands(r)
	}
	for _, r := range res.Calibration {
		if r.AchievedPerSec <= 0 {
			continue
		}
		if share[r.Scenario] == nil {
			share[r.Scenario] = map[int]map[string]float64{}
		}
		share[r.Scenario][r.CalibratesNodes] = demands(r)
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
		if ds, ok := share[r.Scenario][r.Nodes]; ok {
			d = ds
		}
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
