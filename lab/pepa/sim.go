package pepa

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"gonum.org/v1/gonum/stat/distuv"
)

// SimOptions tune the stochastic simulation.
type SimOptions struct {
	Seed    uint64  // the random stream; the same seed gives the same run
	Warmup  float64 // model time discarded first (default: Time / 10)
	Time    float64 // model time measured after the warm-up (default 10000)
	Batches int     // batches for the confidence interval (default 20)
}

// Estimate is a simulated mean with the half-width of its 95 %
// confidence interval.
type Estimate struct {
	Mean      float64 `json:"mean"`
	HalfWidth float64 `json:"half_width"`
}

// SimResult is the outcome of a simulation.
type SimResult struct {
	Events     int                 `json:"events"`
	Seconds    float64             `json:"seconds"`
	Throughput map[string]Estimate `json:"throughput"`
}

// Simulate runs Gillespie's stochastic simulation algorithm (Gillespie,
// "Exact stochastic simulation of coupled chemical reactions", 1977) on
// the model's Markov chain without deriving it: in each state it lists
// the transitions, waits an exponential time with their total rate, and
// fires one with probability proportional to its rate. After the warm-up,
// the measured time is cut into batches; each batch's throughput per
// action (firings over batch time) is one sample, and the confidence
// interval is the batch means' mean ± t(0.975, B−1) · s / √B (the method
// of batch means).
func (s *System) Simulate(ctx context.Context, opt SimOptions) (*SimResult, error) {
	t0 := time.Now()
	if opt.Time <= 0 {
		opt.Time = 10000
	}
	if opt.Warmup <= 0 {
		opt.Warmup = opt.Time / 10
	}
	if opt.Batches <= 1 {
		opt.Batches = 20
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	x := s.initial()
	var g generator
	var ts []trans
	counts := make([][]float64, opt.Batches)
	for i := range counts {
		counts[i] = make([]float64, len(s.actions))
	}
	batchLen := opt.Time / float64(opt.Batches)
	end := opt.Warmup + opt.Time
	res := &SimResult{}
	for t := 0.0; ; {
		var err error
		ts, err = s.transitions(x, &g, ts)
		if err != nil {
			return nil, err
		}
		total := 0.0
		for _, tr := range ts {
			total += tr.rate.v
		}
		if total == 0 {
			return nil, fmt.Errorf("deadlock at time %g in state %s", t, s.describe(x))
		}
		t += rng.ExpFloat64() / total
		if t >= end {
			break
		}
		u := rng.Float64() * total
		k := 0
		for k < len(ts)-1 && u >= ts[k].rate.v {
			u -= ts[k].rate.v
			k++
		}
		for _, m := range ts[k].moves {
			x[m.from]--
			x[m.to]++
		}
		if t >= opt.Warmup {
			b := int((t - opt.Warmup) / batchLen)
			if b >= opt.Batches {
				b = opt.Batches - 1
			}
			counts[b][ts[k].action]++
		}
		res.Events++
		if res.Events%65536 == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("simulation stopped at time %g: %w", t, ctx.Err())
		}
	}
	res.Throughput = map[string]Estimate{}
	// The t quantile comes from gonum's Student's t distribution.
	tq := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(opt.Batches - 1)}.Quantile(0.975)
	for _, a := range s.Actions() {
		i := s.actIdx[a]
		var sum, sq float64
		for _, c := range counts {
			v := c[i] / batchLen
			sum += v
			sq += v * v
		}
		b := float64(opt.Batches)
		mean := sum / b
		variance := math.Max(0, (sq-b*mean*mean)/(b-1))
		res.Throughput[a] = Estimate{mean, tq * math.Sqrt(variance/b)}
	}
	res.Seconds = time.Since(t0).Seconds()
	return res, nil
}
