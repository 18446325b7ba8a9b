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

// ExpectedBusiest is the expected number of customers on the busiest of
// n nodes when each of users customers lands on one of them at random,
// evenly (the expected maximum of a multinomial). A write planner's
// commands all go to the node its rotation hashes to, so with 375
// planners on four nodes the busiest has about 104 (not 94), and a run
// in which each node serves its planners at the same rate takes that
// much longer than an even split would: an efficiency of about 0.90 at
// four nodes and 0.82 at eight, at the same CPU per command. It assumes
// the nodes take even shares of nginx's hash ring.
//
// E[max] = Σ_{m≥0} P(max > m), and P(max ≤ m) comes from dealing the
// customers out one node at a time: the next node takes a binomial
// share of those left (probability 1 ÷ the nodes left), at most m.
func ExpectedBusiest(users, n int) float64 {
	if n <= 1 || users <= 0 {
		return float64(max(users, 0))
	}
	lf := make([]float64, users+1) // ln k!
	for k := 1; k <= users; k++ {
		lf[k] = lf[k-1] + math.Log(float64(k))
	}
	// Below the even share the busiest always holds more: P(max > m) = 1.
	even := (users + n - 1) / n
	e := float64(even)
	for m := even; m < users; m++ {
		// f[r]: probability that the nodes dealt so far each hold at
		// most m and r customers are left.
		f := make([]float64, users+1)
		f[users] = 1
		for i := range n - 1 {
			p := 1 / float64(n-i)
			lp, lq := math.Log(p), math.Log1p(-p)
			g := make([]float64, users+1)
			for r, pr := range f {
				if pr == 0 {
					continue
				}
				for k := 0; k <= min(m, r); k++ {
					g[r-k] += pr * math.Exp(lf[r]-lf[k]-lf[r-k]+float64(k)*lp+float64(r-k)*lq)
				}
			}
			f = g
		}
		// The last node takes the rest.
		var atMost float64
		for r := 0; r <= m; r++ {
			atMost += f[r]
		}
		e += 1 - atMost
		if atMost > 1-1e-12 {
			break
		}
	}
	return e
}

// predict calibrates the model from the one-node rows (service demand
// law: CPU-seconds of each kind ÷ requests served) and predicts every
// measured row and, if asked, the paper configurations: reads from the
// one-node row with the most work done below the knee, writes from each
// scenario's one-node row, with the busiest node's share of the
// planners (ExpectedBusiest). A demand per request is taken as fixed,
// though a write node among several can pay more per command than a
// node alone (docs/benchmarks.md, "One request per connection, and the
// busiest write node").
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
			// A planner's commands all go to its rotation's node, and
			// the run lasts until the busiest node has served its
			// planners, the others idle at the end: the busiest
			// node's share of the commands, at most its quota's worth
			// a second, bounds the whole.
			if d[nodeKind] > 0 {
				busiest := ExpectedBusiest(users, r.Nodes) / float64(users)
				x = min(x, q(cfg.Budget.Node)/d[nodeKind]/busiest)
			}
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
