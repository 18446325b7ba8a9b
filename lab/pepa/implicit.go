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
	im := s.newImplicit(opt.Top)
	im.h = opt.Step
	if im.h <= 0 {
		im.h = 0.5 / fastest
	}
	out := &FluidResult{}
	for out.Time < opt.MaxTime {
		if err := ctx.Err(); err != nil {
			break
		}
		ok, iters, err := im.newton()
		if err != nil {
			return nil, err
		}
		if !ok {
			im.h /= 4
			if im.h < 1e-12/fastest {
				return nil, fmt.Errorf("the implicit fluid solver could not take a step at t = %g", out.Time)
			}
			continue
		}
		moved := im.advance()
		out.Time += im.h
		out.Steps++
		out.Step = im.h
		drift, err := im.drift(fastest)
		if err != nil {
			return nil, err
		}
		out.Change = math.Max(drift, moved)
		if drift <= opt.Tolerance && moved <= opt.Tolerance && out.Steps > 1 && im.h >= im.turnover(opt.Tolerance) {
			out.Converged = true
			break
		}
		if iters <= 8 {
			im.h *= 4
		}
	}
	if err := im.f(im.x, im.fy); err != nil {
		return nil, err
	}
	out.Measures = s.measures(im.thr, im.x)
	out.Method = "implicit"
	out.Seconds = time.Since(t0).Seconds()
	return out, nil
}

// implicit is the state of FluidImplicit's integration: the counts x at
// the current time, the step h, and the scratch its Newton iterations
// reuse.
type implicit struct {
	s *System
	n int // the counts
	g generator
	h float64

	ts    []trans
	thr   []float64 // each action's flow, from f
	gross []float64 // each count's flows in and out, from f
	scale []float64 // each count's group size

	x                 []float64
	y, fy, res, delta []float64
	jac               [][]float64
	yp, fp            []float64
}

func (s *System) newImplicit(top float64) *implicit {
	n := s.width
	im := &implicit{
		s: s, n: n, g: generator{top: top},
		thr:   make([]float64, len(s.actions)),
		gross: make([]float64, n),
		scale: make([]float64, n),
		x:     s.initial(),
		y:     make([]float64, n), fy: make([]float64, n), res: make([]float64, n), delta: make([]float64, n),
		jac: make([][]float64, n),
		yp:  make([]float64, n), fp: make([]float64, n),
	}
	for _, gr := range s.groups {
		for i := range gr.seq.names {
			im.scale[gr.offset+i] = float64(gr.size)
		}
	}
	for i := range im.jac {
		im.jac[i] = make([]float64, n+1) // the last column holds the right-hand side
	}
	return im
}

// f sets dx to the counts' net flows at x, and thr and gross to the
// actions' flows and the counts' flows in and out.
func (im *implicit) f(x, dx []float64) error {
	var err error
	im.ts, err = im.s.transitions(x, &im.g, im.ts)
	if err != nil {
		return err
	}
	clear(dx)
	clear(im.thr)
	clear(im.gross)
	for _, t := range im.ts {
		for _, m := range t.moves {
			dx[m.from] -= t.rate.v
			dx[m.to] += t.rate.v
			im.gross[m.from] += t.rate.v
			im.gross[m.to] += t.rate.v
		}
		im.thr[t.action] += t.rate.v
	}
	return nil
}

// residual sets res = y − x − h f(y) and returns its largest entry in
// units of what rounding leaves of it: 1e-12 of the count's group, plus
// 1e-14 of the step's flows through the count (h·f(y) cannot be computed
// closer than that when h is long). At most 1 is converged.
func (im *implicit) residual(y []float64) (float64, error) {
	if err := im.f(y, im.fy); err != nil {
		return 0, err
	}
	norm := 0.0
	for i := range im.res {
		im.res[i] = y[i] - im.x[i] - im.h*im.fy[i]
		norm = math.Max(norm, math.Abs(im.res[i])/(1e-12*im.scale[i]+1e-14*im.h*im.gross[i]))
	}
	return norm, nil
}

// newton solves y = x + h f(y) from y = x, with a backtracking line
// search on the residual (the right-hand side has kinks, where plain
// Newton steps can cycle); it reports whether it converged and in how
// many iterations.
func (im *implicit) newton() (bool, int, error) {
	copy(im.y, im.x)
	norm, err := im.residual(im.y)
	if err != nil {
		return false, 0, err
	}
	for it := 1; it <= 50; it++ {
		if norm <= 1 {
			return true, it, nil
		}
		if err := im.jacobian(); err != nil {
			return false, it, err
		}
		if !gauss(im.jac, im.delta) {
			return false, it, nil
		}
		next, accepted, err := im.lineSearch(norm)
		if err != nil {
			return false, it, err
		}
		if !accepted {
			return false, it, nil
		}
		norm = next
		// With a long step the residual y − x − h·f(y) cannot get
		// below h times f's rounding error; a Newton step that no
		// longer moves y is as converged as it gets.
		moved := 0.0
		for i := range im.delta {
			moved = math.Max(moved, math.Abs(im.delta[i])/im.scale[i])
		}
		if moved <= 1e-12 {
			return true, it, nil
		}
	}
	return norm <= 1e3, 50, nil
}

// jacobian sets jac to the Newton system at y: J = I − h·∂f/∂y, column by
// column from finite differences, and in the last column the negated
// residual. fy holds f(y) on entry.
func (im *implicit) jacobian() error {
	n, y, h := im.n, im.y, im.h
	base := append([]float64(nil), im.fy...)
	for j := 0; j < n; j++ {
		// A step relative to the count itself, not its group: near zero
		// the rates have kinks (a passive side at 1/Top of a copy), which
		// a larger step would cross.
		d := 1e-7 * math.Max(math.Abs(y[j]), 1e-3)
		copy(im.yp, y)
		im.yp[j] += d
		if err := im.f(im.yp, im.fp); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			v := -h * (im.fp[i] - base[i]) / d
			if i == j {
				v++
			}
			im.jac[i][j] = v
		}
	}
	for i := range im.res {
		im.jac[i][n] = -(y[i] - im.x[i] - h*base[i])
	}
	return nil
}

// lineSearch moves y along delta by the longest of 1, 1/2, 1/4, …
// that lowers the residual from norm enough, or to convergence; it
// returns the new residual and whether a step was accepted.
func (im *implicit) lineSearch(norm float64) (float64, bool, error) {
	for lambda := 1.0; lambda > 1e-4; lambda /= 2 {
		for i := range im.y {
			im.yp[i] = math.Max(im.y[i]+lambda*im.delta[i], 0)
		}
		next, err := im.residual(im.yp)
		if err != nil {
			return 0, false, err
		}
		if next < norm*(1-1e-4*lambda) || next <= 1 {
			copy(im.y, im.yp)
			return next, true, nil
		}
	}
	return norm, false, nil
}

// advance takes the solved step, x = y, and returns the largest move of a
// count in units of its group.
func (im *implicit) advance() float64 {
	moved := 0.0
	for i := range im.x {
		moved = math.Max(moved, math.Abs(im.y[i]-im.x[i])/im.scale[i])
	}
	copy(im.x, im.y)
	return moved
}

// drift computes the flows at x and returns the largest net flow of a
// count as a part of the flows through it. Steady: every count's net
// flow is a small part of the flows through it (a queue still filling is
// not, however large its group), and the step moved nothing.
func (im *implicit) drift(fastest float64) (float64, error) {
	if err := im.f(im.x, im.fy); err != nil {
		return 0, err
	}
	drift := 0.0
	for i := range im.fy {
		drift = math.Max(drift, math.Abs(im.fy[i])/math.Max(im.gross[i], 1e-9*fastest))
	}
	return drift, nil
}

// turnover is the time the slowest count that matters takes to turn its
// group over at the flows through it, from the flows drift computed.
//
// A queue filling at a tiny net rate passes the drift and move tests
// while the step is short (near critical load the net flow is a
// hundred-thousandth of the gross). So the step must also be long enough
// to see such a flow: at least this turnover time. Backward Euler steps
// that long follow a filling queue to where it is going. Counts whose
// flows are below tolerance of the largest flow in the model do not
// matter at this tolerance.
func (im *implicit) turnover(tolerance float64) float64 {
	largest, turnover := 0.0, 0.0
	for _, g := range im.gross {
		largest = math.Max(largest, g)
	}
	for i := range im.gross {
		if im.gross[i] > tolerance*largest {
			turnover = math.Max(turnover, im.scale[i]/im.gross[i])
		}
	}
	return turnover
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
