package pepa

import (
	"context"
	"fmt"
	"math"
	"time"
)

// FluidImplicit finds the fluid approximation's steady state by implicit
// (backward) Euler steps that grow as the solution settles, for models the
// explicit integration of Fluid cannot finish: a large population whose
// queues fill slowly (model time in proportion to N) behind fast
// activities that bound an explicit step (thousands of times smaller).
// Backward Euler is stable at any step, so once the fast activities have
// settled the step grows geometrically and the slow filling takes a few
// dozen steps instead of 10^9.
//
// Each step solves y = x + h·f(y) by Newton's method, with the Jacobian
// of f by finite differences (the models have a few dozen local states).
// The passive rates' discontinuity — a passive side follows its partner
// while it has any copies enabling the action, none at zero — would stall
// Newton, so here a passive side with fewer than 1/Top of a copy enabling
// an action lets its partner through in proportion (default Top 10^4:
// the results differ from the discontinuous semantics by about that). The
// factor is the same for every action the passive side enables, as in
// the Markov chain, where a queue that is full a fraction of the time
// turns every arrival stream away for that fraction: a full queue then
// admits each stream in proportion to its rate. The right-hand side is
// continuous and piecewise smooth, which Newton handles.
//
// The result is a state where every count's net flow is at most
// Tolerance of the flows through it and a step at least as long as any
// count's turnover time (its group's size over the flows through it)
// moved no count by more than Tolerance of its group — so a queue filling
// slowly near critical load is followed to where it is going; throughput
// is the flow of each action there. Like any search for a fixed point it
// finds an equilibrium, stable or not: where the fluid limit oscillates
// (a limit cycle), Fluid's window means are the answer.
func (s *System) FluidImplicit(ctx context.Context, opt FluidOptions) (*FluidResult, error) {
	t0 := time.Now()
	if opt.Tolerance <= 0 {
		opt.Tolerance = 1e-5
	}
	if opt.MaxTime <= 0 {
		opt.MaxTime = 1e12
	}
	if opt.Top <= 0 {
		opt.Top = 1e4
	}
	fastest, err := s.fastestRate()
	if err != nil {
		return nil, err
	}
	h := opt.Step
	if h <= 0 {
		h = 0.5 / fastest
	}
	n := s.width
	g := generator{top: opt.Top}
	var ts []trans
	thr := make([]float64, len(s.actions))
	gross := make([]float64, n) // each count's flows in and out, from f
	f := func(x, dx []float64) error {
		var err error
		ts, err = s.transitions(x, &g, ts)
		if err != nil {
			return err
		}
		clear(dx)
		clear(thr)
		clear(gross)
		for _, t := range ts {
			for _, m := range t.moves {
				dx[m.from] -= t.rate.v
				dx[m.to] += t.rate.v
				gross[m.from] += t.rate.v
				gross[m.to] += t.rate.v
			}
			thr[t.action] += t.rate.v
		}
		return nil
	}
	scale := make([]float64, n)
	for _, gr := range s.groups {
		for i := range gr.seq.names {
			scale[gr.offset+i] = float64(gr.size)
		}
	}
	x := s.initial()
	y, fy, res, delta := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	jac := make([][]float64, n)
	for i := range jac {
		jac[i] = make([]float64, n+1) // the last column holds the right-hand side
	}
	yp, fp := make([]float64, n), make([]float64, n)
	out := &FluidResult{}
	// residual sets res = y − x − h f(y) and returns its largest entry in
	// units of what rounding leaves of it: 1e-12 of the count's group,
	// plus 1e-14 of the step's flows through the count (h·f(y) cannot be
	// computed closer than that when h is long). At most 1 is converged.
	residual := func(y []float64) (float64, error) {
		if err := f(y, fy); err != nil {
			return 0, err
		}
		norm := 0.0
		for i := range res {
			res[i] = y[i] - x[i] - h*fy[i]
			norm = math.Max(norm, math.Abs(res[i])/(1e-12*scale[i]+1e-14*h*gross[i]))
		}
		return norm, nil
	}
	// newton solves y = x + h f(y) from y = x, with a backtracking line
	// search on the residual (the right-hand side has kinks, where plain
	// Newton steps can cycle); it reports whether it converged and in how
	// many iterations.
	newton := func() (bool, int, error) {
		copy(y, x)
		norm, err := residual(y)
		if err != nil {
			return false, 0, err
		}
		for it := 1; it <= 50; it++ {
			if norm <= 1 {
				return true, it, nil
			}
			// J = I − h·∂f/∂y, column by column; fy holds f(y).
			base := append([]float64(nil), fy...)
			for j := 0; j < n; j++ {
				// A step relative to the count itself, not its group:
				// near zero the rates have kinks (a passive side at
				// 1/Top of a copy), which a larger step would cross.
				d := 1e-7 * math.Max(math.Abs(y[j]), 1e-3)
				copy(yp, y)
				yp[j] += d
				if err := f(yp, fp); err != nil {
					return false, it, err
				}
				for i := 0; i < n; i++ {
					v := -h * (fp[i] - base[i]) / d
					if i == j {
						v++
					}
					jac[i][j] = v
				}
			}
			for i := range res {
				jac[i][n] = -(y[i] - x[i] - h*base[i])
			}
			if !gauss(jac, delta) {
				return false, it, nil
			}
			accepted := false
			for lambda := 1.0; lambda > 1e-4; lambda /= 2 {
				for i := range y {
					yp[i] = math.Max(y[i]+lambda*delta[i], 0)
				}
				next, err := residual(yp)
				if err != nil {
					return false, it, err
				}
				if next < norm*(1-1e-4*lambda) || next <= 1 {
					copy(y, yp)
					norm, accepted = next, true
					break
				}
			}
			if !accepted {
				return false, it, nil
			}
			// With a long step the residual y − x − h·f(y) cannot get
			// below h times f's rounding error; a Newton step that no
			// longer moves y is as converged as it gets.
			moved := 0.0
			for i := range delta {
				moved = math.Max(moved, math.Abs(delta[i])/scale[i])
			}
			if moved <= 1e-12 {
				return true, it, nil
			}
		}
		return norm <= 1e3, 50, nil
	}
	for out.Time < opt.MaxTime {
		if err := ctx.Err(); err != nil {
			break
		}
		ok, iters, err := newton()
		if err != nil {
			return nil, err
		}
		if !ok {
			h /= 4
			if h < 1e-12/fastest {
				return nil, fmt.Errorf("the implicit fluid solver could not take a step at t = %g", out.Time)
			}
			continue
		}
		moved := 0.0
		for i := range x {
			moved = math.Max(moved, math.Abs(y[i]-x[i])/scale[i])
		}
		copy(x, y)
		out.Time += h
		out.Steps++
		out.Step = h
		if err := f(x, fy); err != nil {
			return nil, err
		}
		// Steady: every count's net flow is a small part of the flows
		// through it (a queue still filling is not, however large its
		// group), and the step moved nothing.
		drift := 0.0
		for i := range fy {
			drift = math.Max(drift, math.Abs(fy[i])/math.Max(gross[i], 1e-9*fastest))
		}
		out.Change = math.Max(drift, moved)
		// A queue filling at a tiny net rate passes both tests while the
		// step is short (near critical load the net flow is a
		// hundred-thousandth of the gross). So the step must also be long
		// enough to see such a flow: at least the time each count takes
		// to turn its group over at the flows through it. Backward Euler
		// steps that long follow a filling queue to where it is going.
		// Counts whose flows are below Tolerance of the largest flow in
		// the model do not matter at this tolerance.
		largest, turnover := 0.0, 0.0
		for _, g := range gross {
			largest = math.Max(largest, g)
		}
		for i := range gross {
			if gross[i] > opt.Tolerance*largest {
				turnover = math.Max(turnover, scale[i]/gross[i])
			}
		}
		if drift <= opt.Tolerance && moved <= opt.Tolerance && out.Steps > 1 && h >= turnover {
			out.Converged = true
			break
		}
		if iters <= 8 {
			h *= 4
		}
	}
	if err := f(x, fy); err != nil {
		return nil, err
	}
	out.Measures = s.measures(thr, x)
	out.Method = "implicit"
	out.Seconds = time.Since(t0).Seconds()
	return out, nil
}

// gauss solves the n×(n+1) augmented system a in place by Gaussian
// elimination with partial pivoting, into x. It reports false for a
// singular matrix.
func gauss(a [][]float64, x []float64) bool {
	n := len(a)
	for c := 0; c < n; c++ {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		if a[p][c] == 0 {
			return false
		}
		a[c], a[p] = a[p], a[c]
		for r := c + 1; r < n; r++ {
			k := a[r][c] / a[c][c]
			if k == 0 {
				continue
			}
			for j := c; j <= n; j++ {
				a[r][j] -= k * a[c][j]
			}
		}
	}
	for r := n - 1; r >= 0; r-- {
		v := a[r][n]
		for j := r + 1; j < n; j++ {
			v -= a[r][j] * x[j]
		}
		x[r] = v / a[r][r]
	}
	return true
}
