package pepa

import (
	"context"
	"fmt"
	"math"
	"time"
)

// FluidOptions tune the fluid approximation.
type FluidOptions struct {
	// Step is the integration step; default 0.5 divided by the fastest
	// rate of any activity in the model.
	Step float64
	// Tolerance: steady when, between two consecutive windows, every
	// window-mean count moves by at most Tolerance times its group's size
	// and every window-mean throughput by at most Tolerance relative.
	// Windows start at 1000 steps and double, up to a million, so that
	// chattering (see Fluid) averages out. Default 1e-5.
	Tolerance float64
	// MaxTime bounds the integration (model time). Default 1e7 (1e12
	// for FluidImplicit).
	MaxTime float64
	// Top: under FluidImplicit a passive side with fewer than 1/Top
	// copies enabling an action lets its partner through in proportion
	// (default 10^4).
	Top float64
}

// FluidResult is the fluid approximation's steady state.
type FluidResult struct {
	Time      float64 `json:"time"`  // model time integrated
	Steps     int     `json:"steps"` // integration steps
	Step      float64 `json:"step"`
	Converged bool    `json:"converged"`
	Method    string  `json:"method"` // rk4 (Fluid), implicit (FluidImplicit) or closure (Closure)
	Change    float64 `json:"change"` // the last window's relative change
	Seconds   float64 `json:"seconds"`
	Measures
	// Variances, under Closure only: the variance of the count of copies
	// in each local state of each component.
	Variances map[string]map[string]float64 `json:"variances,omitempty"`
}

// Fluid integrates the fluid (ODE) approximation of the model to steady
// state (Hillston, "Fluid flow approximation of PEPA models", QEST 2005):
// the counts of the numerical vector form become real numbers, and each
// count changes at the rates of the transitions that bring copies in
// minus those that take them out,
//
//	dx/dt = Σ_transitions rate(x) · (e_to − e_from),
//
// with the same apparent-rate rule as the Markov chain, so a cooperation
// proceeds at the minimum of the two sides' total rates. A passive side
// follows its partner while it has any copies in the enabling state, which
// makes the right-hand side discontinuous where a count reaches zero; the
// explicit fourth-order Runge–Kutta steps then chatter about that
// boundary, and averaging over windows recovers the sliding motion. The
// results are window means: throughput per action, utilisation and mean
// population per local state. For a model of N copies the fluid limit is
// accurate as N grows (Kurtz's theorem); for small N it is an
// approximation.
//
// Integration stops at steady state, at MaxTime, or when ctx ends; the
// result says whether it converged.
func (s *System) Fluid(ctx context.Context, opt FluidOptions) (*FluidResult, error) {
	t0 := time.Now()
	if opt.Tolerance <= 0 {
		opt.Tolerance = 1e-5
	}
	if opt.MaxTime <= 0 {
		opt.MaxTime = 1e7
	}
	if opt.Step <= 0 {
		fastest, err := s.fastestRate()
		if err != nil {
			return nil, err
		}
		opt.Step = 0.5 / fastest
	}
	h := opt.Step
	n := s.width
	var g generator
	var ts []trans
	thr := make([]float64, len(s.actions))
	// deriv sets dx = f(x) and adds weight × each transition's rate to
	// thr: with the Runge–Kutta weights, the throughputs are then exactly
	// the flows that moved the counts in the step.
	deriv := func(x, dx []float64, weight float64) error {
		var err error
		ts, err = s.transitions(x, &g, ts)
		if err != nil {
			return err
		}
		for i := range dx {
			dx[i] = 0
		}
		for _, t := range ts {
			for _, m := range t.moves {
				dx[m.from] -= t.rate.v
				dx[m.to] += t.rate.v
			}
			thr[t.action] += weight * t.rate.v
		}
		return nil
	}
	x := s.initial()
	k1, k2, k3, k4, tmp := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	window := 1000
	meanX, prevX := make([]float64, n), make([]float64, n)
	prevThr := make([]float64, len(s.actions))
	res := &FluidResult{Step: h}
	scale := make([]float64, n)
	for _, gr := range s.groups {
		for i := range gr.seq.names {
			scale[gr.offset+i] = float64(gr.size)
		}
	}
	for w := 0; ; w++ {
		for i := range thr {
			thr[i] = 0
		}
		for i := range meanX {
			meanX[i] = 0
		}
		for step := 0; step < window; step++ {
			for i := range x {
				meanX[i] += x[i]
			}
			if err := deriv(x, k1, 1.0/6); err != nil {
				return nil, err
			}
			for i := range x {
				tmp[i] = x[i] + h/2*k1[i]
			}
			if err := deriv(tmp, k2, 2.0/6); err != nil {
				return nil, err
			}
			for i := range x {
				tmp[i] = x[i] + h/2*k2[i]
			}
			if err := deriv(tmp, k3, 2.0/6); err != nil {
				return nil, err
			}
			for i := range x {
				tmp[i] = x[i] + h*k3[i]
			}
			if err := deriv(tmp, k4, 1.0/6); err != nil {
				return nil, err
			}
			for i := range x {
				x[i] += h / 6 * (k1[i] + 2*k2[i] + 2*k3[i] + k4[i])
			}
		}
		res.Steps += window
		res.Time += float64(window) * h
		for i := range meanX {
			meanX[i] /= float64(window)
		}
		for i := range thr {
			thr[i] /= float64(window)
		}
		if w > 0 {
			change := 0.0
			for i := range meanX {
				change = math.Max(change, math.Abs(meanX[i]-prevX[i])/scale[i])
			}
			for i := range thr {
				change = math.Max(change, math.Abs(thr[i]-prevThr[i])/math.Max(math.Abs(thr[i]), 1e-300))
			}
			res.Change = change
			if change <= opt.Tolerance {
				res.Converged = true
				break
			}
		}
		copy(prevX, meanX)
		copy(prevThr, thr)
		if window < 1_000_000 {
			window *= 2
		}
		if res.Time >= opt.MaxTime || ctx.Err() != nil {
			break
		}
	}
	res.Measures = s.measures(thr, meanX)
	res.Method = "rk4"
	res.Seconds = time.Since(t0).Seconds()
	return res, nil
}

// fastestRate is the fastest active rate of any activity of the model:
// the time scale the fluid solvers' first step is set by.
func (s *System) fastestRate() (float64, error) {
	fastest := 0.0
	for _, sp := range s.seqs {
		for _, acts := range sp.acts {
			for _, a := range acts {
				if !a.rate.passive {
					fastest = math.Max(fastest, a.rate.v)
				}
			}
		}
	}
	if fastest == 0 {
		return 0, fmt.Errorf("the model has no active rate")
	}
	return fastest, nil
}
