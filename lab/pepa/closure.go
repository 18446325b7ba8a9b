package pepa

import (
	"context"
	"fmt"
	"math"
	"time"
)

// The second-order moment closure (Hayden and Bradley, "A fluid analysis
// framework for a Markovian process algebra", Theoretical Computer
// Science 411, 2010): instead of the counts alone, integrate their means
// and covariances, closing the expectations of the rate functions by
// assuming the counts jointly normal.
//
// The class of models it supports is the one where every transition's
// rate, as the apparent-rate rule gives it, is a product
//
//	k · X · 1{Z > 0}
//
// of a constant k, optionally one count X (the copies of an active
// component in the local state doing the activity) and optionally the
// indicator that one count Z is positive (a passive component, all of
// whose copies enabling the action sit in one local state, following an
// active partner). Groups of one copy count as counts in {0, 1}, so a
// single active component cooperating with a replicated passive one — a
// server and its queue — is in the class. Out of it: two active sides
// cooperating (a minimum of two rates), two passive sides cooperating, a
// passive side whose enabling copies are spread over several local states
// (a ratio of counts) and an action that needs two passive partners
// present (a product of two indicators).

// closureTerm is one transition in symbolic form: rate k · x[count] ·
// 1{x[ind] > 0}, where count or ind is −1 when the factor is absent.
type closureTerm struct {
	action  int
	k       float64
	passive bool
	count   int
	ind     int
	moves   []move
}

// closureRefusal is the error of a model outside the closure's class.
type closureRefusal struct {
	action int
	why    string
}

func (e closureRefusal) Error() string { return e.why }

// symbolic lists the model's transitions in symbolic form.
func (s *System) symbolic() ([]closureTerm, error) {
	ts, err := symTerms(s.root)
	if err != nil {
		if r, ok := err.(closureRefusal); ok {
			return nil, fmt.Errorf("the normal closure supports rates of the form constant × (a count) × 1{a count > 0} (see ARCHITECTURE.md); action %s's rate %s", s.actions[r.action], r.why)
		}
		if m, ok := err.(mixedRates); ok {
			return nil, fmt.Errorf("action %s is offered both actively and passively by one side of a cooperation", s.actions[m.action])
		}
		return nil, err
	}
	for _, t := range ts {
		if t.passive {
			return nil, fmt.Errorf("action %s is passive in every component that performs it: nothing gives it a rate", s.actions[t.action])
		}
	}
	return ts, nil
}

func symTerms(n node) ([]closureTerm, error) {
	switch n := n.(type) {
	case *group:
		var out []closureTerm
		for i, acts := range n.seq.acts {
			for _, a := range acts {
				out = append(out, closureTerm{
					action: a.action, k: a.rate.v, passive: a.rate.passive,
					count: n.offset + i, ind: -1,
					moves: []move{{int32(n.offset + i), int32(n.offset + a.to)}},
				})
			}
		}
		return out, nil
	case *hideNode:
		ts, err := symTerms(n.child)
		for i := range ts {
			if has(n.set, ts[i].action) {
				ts[i].action = 0
			}
		}
		return ts, err
	case *coopNode:
		lt, err := symTerms(n.l)
		if err != nil {
			return nil, err
		}
		rt, err := symTerms(n.r)
		if err != nil {
			return nil, err
		}
		var out []closureTerm
		for _, t := range lt {
			if !has(n.set, t.action) {
				out = append(out, t)
			}
		}
		for _, t := range rt {
			if !has(n.set, t.action) {
				out = append(out, t)
			}
		}
		for _, a := range n.list {
			var la, ra []closureTerm
			for _, t := range lt {
				if t.action == a {
					la = append(la, t)
				}
			}
			for _, t := range rt {
				if t.action == a {
					ra = append(ra, t)
				}
			}
			if len(la) == 0 || len(ra) == 0 {
				continue // blocked: Check has warned
			}
			lp, rp := la[0].passive, ra[0].passive
			for _, t := range la {
				if t.passive != lp {
					return nil, mixedRates{a}
				}
			}
			for _, t := range ra {
				if t.passive != rp {
					return nil, mixedRates{a}
				}
			}
			switch {
			case !lp && !rp:
				return nil, closureRefusal{a, "is the minimum of two active sides' rates"}
			case lp && rp:
				return nil, closureRefusal{a, "is the minimum of two passive sides' weights"}
			}
			act, pas := la, ra
			if lp {
				act, pas = ra, la
			}
			// The passive side's share of the pair: its weight over its
			// apparent weight, which is w/Σw · 1{x > 0} when every copy
			// enabling a is in one local state.
			c := pas[0].count
			sum := 0.0
			for _, p := range pas {
				if p.count != c || p.ind >= 0 {
					return nil, closureRefusal{a, "depends on a passive side whose enabling copies are in several local states (a ratio of counts)"}
				}
				sum += p.k
			}
			for _, t := range act {
				if t.ind >= 0 {
					return nil, closureRefusal{a, "needs two passive partners present (a product of two indicators)"}
				}
				for _, p := range pas {
					moves := append(append([]move(nil), t.moves...), p.moves...)
					out = append(out, closureTerm{action: a, k: t.k * p.k / sum, count: t.count, ind: c, moves: moves})
				}
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown node %T", n)
}

// Gaussian helpers.
func normCDF(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }
func normPDF(z float64) float64 { return math.Exp(-z*z/2) / math.Sqrt(2*math.Pi) }

// closureThreshold is the continuity correction: a count is positive
// when its normal stand-in exceeds one half.
const closureThreshold = 0.5

// Closure integrates the second-order moment-closure ODE of the model to
// steady state: the means and covariances of all counts of every group,
// with the expectation of each rate k · X · 1{Z > 0} taken as if the
// counts were jointly normal (Hayden and Bradley 2010) and 1{Z > 0} read
// as 1{Z > 0.5} (a continuity correction). With μ the means and C the
// covariances, for each transition with change Δ (a vector of ±1 and 0)
// and rate f,
//
//	dμ_i/dt  = Σ Δ_i E[f]
//	dC_ij/dt = Σ Δ_i Cov(x_j, f) + Δ_j Cov(x_i, f) + Δ_i Δ_j E[f]
//
// where for Z normal with w = (μ_Z − 0.5)/σ_Z,
//
//	E[X 1{Z>½}]     = μ_X Φ(w) + C_XZ φ(w)/σ_Z
//	Cov(x_j, X 1{Z>½}) = C_jX Φ(w) + μ_X C_jZ φ(w)/σ_Z − C_jZ C_XZ w φ(w)/σ_Z²
//
// (linear rates need no closure: their moment equations are exact). It
// is a second-order approximation: where the mean-field limit of Fluid
// has no queue at critical load, the closure's variances keep the
// probability of an empty or full queue, and with it the blocking a
// finite population shows. Integration is by fourth-order Runge–Kutta
// (step default 0.25 over the largest total exit rate of a local state);
// variances are clamped at zero. Steady when, over a window of steps
// (1000, doubling), every mean moves by at most Tolerance times its
// group's size, every variance by Tolerance times its square and every
// throughput by Tolerance relative.
//
// Models outside the class (see closureTerm) are refused with an error
// naming the action and why.
func (s *System) Closure(ctx context.Context, opt FluidOptions) (*FluidResult, error) {
	t0 := time.Now()
	terms, err := s.symbolic()
	if err != nil {
		return nil, err
	}
	if opt.Tolerance <= 0 {
		opt.Tolerance = 1e-5
	}
	if opt.MaxTime <= 0 {
		opt.MaxTime = 1e7
	}
	if opt.Step <= 0 {
		exit := s.largestExitRate()
		if exit == 0 {
			return nil, fmt.Errorf("the model has no active rate")
		}
		opt.Step = 0.25 / exit
	}
	cl := s.newClosure(terms)
	n := cl.n
	y := make([]float64, cl.dim)
	copy(y, s.initial())
	prev := make([]float64, cl.dim)
	prevThr := make([]float64, len(s.actions))
	h := opt.Step
	res := &FluidResult{Step: h, Method: "closure"}
	window := 1000
	for w := 0; ; w++ {
		for step := 0; step < window; step++ {
			cl.step(y, h)
		}
		res.Steps += window
		res.Time += float64(window) * h
		for _, v := range y {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("the moment closure diverged at t = %g: try a smaller step", res.Time)
			}
		}
		if w > 0 {
			res.Change = cl.change(y, prev, prevThr)
			if res.Change <= opt.Tolerance {
				res.Converged = true
				break
			}
		}
		copy(prev, y)
		copy(prevThr, cl.thr)
		if window < 1_000_000 {
			window *= 2
		}
		if res.Time >= opt.MaxTime || ctx.Err() != nil {
			break
		}
	}
	res.Measures = s.measures(cl.thr, y[:n])
	res.Variances = s.variances(y)
	res.Seconds = time.Since(t0).Seconds()
	return res, nil
}

// largestExitRate is the largest total active exit rate of a local state.
func (s *System) largestExitRate() float64 {
	exit := 0.0
	for _, sp := range s.seqs {
		for _, acts := range sp.acts {
			sum := 0.0
			for _, a := range acts {
				if !a.rate.passive {
					sum += a.rate.v
				}
			}
			exit = math.Max(exit, sum)
		}
	}
	return exit
}

// variances reads each local state's variance from the closure's state y,
// by group.
func (s *System) variances(y []float64) map[string]map[string]float64 {
	n := s.width
	out := map[string]map[string]float64{}
	for _, gr := range s.groups {
		v := map[string]float64{}
		for i, name := range gr.seq.names {
			k := gr.offset + i
			v[name] = y[n+k*n+k]
		}
		out[gr.name] = v
	}
	return out
}

// closure is the moment-closure ODE of a model: its terms, each term's
// change of the counts, and the scratch of its integration. Its state is
// n means, then the n×n covariance matrix (kept full and symmetric for
// simple indexing).
type closure struct {
	terms  []closureTerm
	deltas []closureDelta
	n, dim int
	scale  []float64 // each count's group size
	// thr accumulates each action's throughput over one step's stages.
	thr []float64
	cov []float64 // Cov(x_j, f) of one term

	k1, k2, k3, k4, tmp []float64
}

// closureDelta is a term's net change of the counts, sparse.
type closureDelta struct {
	idx []int
	d   []float64
}

func (s *System) newClosure(terms []closureTerm) *closure {
	n := s.width
	dim := n + n*n
	cl := &closure{
		terms: terms, deltas: make([]closureDelta, len(terms)), n: n, dim: dim,
		scale: make([]float64, n),
		thr:   make([]float64, len(s.actions)),
		cov:   make([]float64, n),
		k1:    make([]float64, dim), k2: make([]float64, dim), k3: make([]float64, dim), k4: make([]float64, dim), tmp: make([]float64, dim),
	}
	for ti, t := range terms {
		dv := map[int]float64{}
		for _, m := range t.moves {
			dv[int(m.from)]--
			dv[int(m.to)]++
		}
		var d closureDelta
		for i := 0; i < n; i++ {
			if v := dv[i]; v != 0 {
				d.idx = append(d.idx, i)
				d.d = append(d.d, v)
			}
		}
		cl.deltas[ti] = d
	}
	for _, gr := range s.groups {
		for i := range gr.seq.names {
			cl.scale[gr.offset+i] = float64(gr.size)
		}
	}
	return cl
}

// step takes one fourth-order Runge–Kutta step of length h from y, in
// place, with the variances clamped at zero; thr is left holding the
// step's throughputs.
func (cl *closure) step(y []float64, h float64) {
	n, tmp := cl.n, cl.tmp
	clear(cl.thr)
	cl.deriv(y, cl.k1, 1.0/6)
	for i := range y {
		tmp[i] = y[i] + h/2*cl.k1[i]
	}
	cl.deriv(tmp, cl.k2, 2.0/6)
	for i := range y {
		tmp[i] = y[i] + h/2*cl.k2[i]
	}
	cl.deriv(tmp, cl.k3, 2.0/6)
	for i := range y {
		tmp[i] = y[i] + h*cl.k3[i]
	}
	cl.deriv(tmp, cl.k4, 1.0/6)
	for i := range y {
		y[i] += h / 6 * (cl.k1[i] + 2*cl.k2[i] + 2*cl.k3[i] + cl.k4[i])
	}
	for i := 0; i < n; i++ {
		if v := &y[n+i*n+i]; *v < 0 {
			*v = 0
		}
	}
}

// deriv sets dy to the time derivative of the means and covariances y,
// and adds weight times each term's expected rate to its action's
// throughput.
func (cl *closure) deriv(y, dy []float64, weight float64) {
	n, cov := cl.n, cl.cov
	clear(dy)
	dmu, dc := dy[:n], dy[n:]
	for ti := range cl.terms {
		t := &cl.terms[ti]
		ef := cl.moments(t, y)
		cl.thr[t.action] += weight * ef
		d := cl.deltas[ti]
		for a, i := range d.idx {
			di := d.d[a]
			dmu[i] += di * ef
			for j := 0; j < n; j++ {
				v := di * cov[j]
				dc[i*n+j] += v
				dc[j*n+i] += v
			}
			for b, j := range d.idx {
				dc[i*n+j] += di * d.d[b] * ef
			}
		}
	}
}

// moments returns E[f] of term t's rate f at the means and covariances y,
// and sets cov to Cov(x_j, f) for every j.
func (cl *closure) moments(t *closureTerm, y []float64) float64 {
	n, cov := cl.n, cl.cov
	mu, c := y[:n], y[n:]
	switch {
	case t.ind < 0 && t.count < 0:
		clear(cov)
		return t.k
	case t.ind < 0:
		for j := 0; j < n; j++ {
			cov[j] = t.k * c[j*n+t.count]
		}
		return t.k * mu[t.count]
	}
	z := t.ind
	vz := math.Max(c[z*n+z], 0)
	sz := math.Sqrt(vz)
	var p, phiS, wphiS2 float64 // Φ(w), φ(w)/σ, w φ(w)/σ²
	if sz < 1e-9 {
		if mu[z] > closureThreshold {
			p = 1
		}
	} else {
		w := (mu[z] - closureThreshold) / sz
		p = normCDF(w)
		ph := normPDF(w)
		phiS = ph / sz
		wphiS2 = w * ph / vz
	}
	if t.count < 0 {
		for j := 0; j < n; j++ {
			cov[j] = t.k * c[j*n+z] * phiS
		}
		return t.k * p
	}
	x := t.count
	cxz := c[x*n+z]
	for j := 0; j < n; j++ {
		cjz := c[j*n+z]
		cov[j] = t.k * (c[j*n+x]*p + mu[x]*cjz*phiS - cjz*cxz*wphiS2)
	}
	return t.k * (mu[x]*p + cxz*phiS)
}

// change is how far the state moved since prev, and the throughputs since
// prevThr: the largest move of a mean in units of its group's size, of a
// covariance in units of the product of the sizes, of a throughput
// relative to itself.
func (cl *closure) change(y, prev, prevThr []float64) float64 {
	n, scale := cl.n, cl.scale
	change := 0.0
	for i := 0; i < n; i++ {
		change = math.Max(change, math.Abs(y[i]-prev[i])/scale[i])
		for j := 0; j < n; j++ {
			k := n + i*n + j
			change = math.Max(change, math.Abs(y[k]-prev[k])/(scale[i]*scale[j]))
		}
	}
	for i := range cl.thr {
		change = math.Max(change, math.Abs(cl.thr[i]-prevThr[i])/math.Max(math.Abs(cl.thr[i]), 1e-300))
	}
	return change
}
