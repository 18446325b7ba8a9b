package pepa

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"time"
)

// Chain is the continuous-time Markov chain of a model: its reachable
// states and their transitions, labelled by action.
type Chain struct {
	sys    *System
	width  int
	states []int32 // state k is states[k*width : (k+1)*width]
	// Transitions leaving state k are out[start[k]:start[k+1]].
	start []int32
	to    []int32
	rate  []float64
	act   []int32
	// level[k] is state k's breadth-first distance from the initial state.
	level []int32
}

// States is the number of reachable states.
func (c *Chain) States() int { return len(c.start) - 1 }

// Transitions is the number of transitions (a state's transitions to the
// same target by different actions count separately).
func (c *Chain) Transitions() int { return len(c.to) }

func (c *Chain) state(k int) []int32 { return c.states[k*c.width : (k+1)*c.width] }

// ErrTooManyStates is returned when a derivation passes its limit.
type ErrTooManyStates struct{ Limit int }

func (e ErrTooManyStates) Error() string {
	return fmt.Sprintf("the state space has more than %d states", e.Limit)
}

// Derive explores the states reachable from the initial state, breadth
// first. Aggregated components are counted (Hillston, Gilmore and Ribaudo,
// "Exploiting structure in solution: Decomposing compositional models"
// call this the numerical vector form): Q[1000] with three local states
// has about half a million states, not 3^1000. maxStates bounds the
// exploration (0 means 50 million).
func (s *System) Derive(maxStates int) (*Chain, error) {
	if maxStates <= 0 {
		maxStates = 50_000_000
	}
	c := &Chain{sys: s, width: s.width, start: []int32{0}}
	index := map[string]int32{}
	key := make([]byte, 4*s.width)
	keyOf := func(v []int32) []byte {
		for i, n := range v {
			binary.LittleEndian.PutUint32(key[4*i:], uint32(n))
		}
		return key
	}
	x0 := s.initial()
	v0 := make([]int32, s.width)
	for i, f := range x0 {
		v0[i] = int32(f)
	}
	c.states = append(c.states, v0...)
	c.level = append(c.level, 0)
	index[string(keyOf(v0))] = 0
	var g generator
	var ts []trans
	x := make([]float64, s.width)
	next := make([]int32, s.width)
	for k := 0; k < len(index); k++ {
		cur := c.state(k)
		for i, n := range cur {
			x[i] = float64(n)
		}
		var err error
		ts, err = s.transitions(x, &g, ts)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			copy(next, c.state(k))
			for _, m := range t.moves {
				next[m.from]--
				next[m.to]++
			}
			id, ok := index[string(keyOf(next))]
			if !ok {
				id = int32(len(index))
				if int(id) >= maxStates {
					return nil, ErrTooManyStates{maxStates}
				}
				index[string(key)] = id
				c.states = append(c.states, next...)
				c.level = append(c.level, c.level[k]+1)
			}
			c.to = append(c.to, id)
			c.rate = append(c.rate, t.rate.v)
			c.act = append(c.act, int32(t.action))
		}
		c.start = append(c.start, int32(len(c.to)))
	}
	return c, nil
}

// SolveOptions tune the steady-state solver.
type SolveOptions struct {
	Tolerance     float64 // stop when the residual is at most this (default 1e-10)
	MaxIterations int     // default 100000
	// Omega is the over-relaxation factor of SOR, in (0, 2); 1 is plain
	// Gauss–Seidel. Default 1.
	Omega float64
	// NoAggregation turns off the aggregation–disaggregation step.
	NoAggregation bool
}

// Steady is the steady-state distribution of a chain.
type Steady struct {
	Chain      *Chain
	Pi         []float64
	Residual   float64 // max over states of |(πQ)_j|, π summing to 1
	Iterations int
}

// Solve finds the steady-state distribution π (πQ = 0, Σπ = 1) by
// Gauss–Seidel iteration on the generator's columns: each sweep sets
//
//	π_j = Σ_{i≠j} π_i q_ij / q_j
//
// using the values already updated in this sweep (Stewart, "Introduction
// to the Numerical Solution of Markov Chains", 1994, ch. 3). States are
// swept in the order derivation found them (breadth first from the
// initial state), alternately forwards and backwards (symmetric
// Gauss–Seidel), which suits chains whose probability mass flows both
// along and against that order. The residual max_j |(πQ)_j| is reported.
func (c *Chain) Solve(ctx context.Context, opt SolveOptions) (*Steady, error) {
	if opt.Tolerance <= 0 {
		opt.Tolerance = 1e-10
	}
	if opt.MaxIterations <= 0 {
		opt.MaxIterations = 100000
	}
	n := c.States()
	// The generator by column: for each state j, the states i that reach
	// it and the total rate of i → j; and q_j, j's total exit rate.
	diag := make([]float64, n)
	inStart := make([]int32, n+1)
	for i := 0; i < n; i++ {
		for e := c.start[i]; e < c.start[i+1]; e++ {
			if j := c.to[e]; int(j) != i {
				inStart[j+1]++
				diag[i] += c.rate[e]
			}
		}
	}
	for j := 0; j < n; j++ {
		inStart[j+1] += inStart[j]
	}
	inFrom := make([]int32, inStart[n])
	inRate := make([]float64, inStart[n])
	fill := append([]int32(nil), inStart[:n]...)
	for i := 0; i < n; i++ {
		for e := c.start[i]; e < c.start[i+1]; e++ {
			if j := c.to[e]; int(j) != i {
				inFrom[fill[j]] = int32(i)
				inRate[fill[j]] = c.rate[e]
				fill[j]++
			}
		}
	}
	for j := 0; j < n; j++ {
		if diag[j] == 0 && n > 1 {
			return nil, fmt.Errorf("state %s is a deadlock: no transition leaves it", c.sys.describe(c.floatState(j)))
		}
	}
	omega := opt.Omega
	if omega == 0 {
		omega = 1
	}
	if !(omega > 0 && omega < 2) {
		return nil, fmt.Errorf("the relaxation factor must be in (0, 2), not %g", omega)
	}
	pi := make([]float64, n)
	for j := range pi {
		pi[j] = 1 / float64(n)
	}
	update := func(j int) {
		var sum float64
		for e := inStart[j]; e < inStart[j+1]; e++ {
			sum += pi[inFrom[e]] * inRate[e]
		}
		pi[j] = (1-omega)*pi[j] + omega*sum/diag[j]
	}
	residual := func() float64 {
		var total float64
		for _, p := range pi {
			total += p
		}
		for j := range pi {
			pi[j] /= total
		}
		var worst float64
		for j := 0; j < n; j++ {
			var sum float64
			for e := inStart[j]; e < inStart[j+1]; e++ {
				sum += pi[inFrom[e]] * inRate[e]
			}
			worst = math.Max(worst, math.Abs(sum-pi[j]*diag[j]))
		}
		return worst
	}
	aggs := c.aggregations()
	st := &Steady{Chain: c, Pi: pi}
	if n == 1 {
		pi[0] = 1
		return st, nil
	}
	for it := 1; it <= opt.MaxIterations; it++ {
		if it%2 == 1 {
			for j := 0; j < n; j++ {
				update(j)
			}
		} else {
			for j := n - 1; j >= 0; j-- {
				update(j)
			}
		}
		if len(aggs) > 0 && !opt.NoAggregation && it%2 == 0 {
			aggs[(it/2)%len(aggs)].correct(pi)
		}
		st.Iterations = it
		if it%10 == 0 || it == opt.MaxIterations {
			st.Residual = residual()
			if st.Residual <= opt.Tolerance {
				return st, nil
			}
			if err := ctx.Err(); err != nil {
				return st, fmt.Errorf("stopped after %d iterations at residual %g: %w", it, st.Residual, err)
			}
		}
	}
	return st, fmt.Errorf("the solver did not reach residual %g in %d iterations (residual %g)", opt.Tolerance, opt.MaxIterations, st.Residual)
}

func (c *Chain) floatState(k int) []float64 {
	x := make([]float64, c.width)
	for i, n := range c.state(k) {
		x[i] = float64(n)
	}
	return x
}

// Measures are the steady-state results of a model.
type Measures struct {
	// Throughput of each action: Σ_states π(s) · the action's rate in s.
	Throughput map[string]float64 `json:"throughput"`
	// Utilisation of each local state of each component: the probability
	// that a single component is in it, or for an aggregated component
	// P[N], the mean fraction of its N copies that are.
	Utilisation map[string]map[string]float64 `json:"utilisation"`
	// Populations of aggregated components: the mean number of copies in
	// each local state.
	Populations map[string]map[string]float64 `json:"populations,omitempty"`
}

// Measures computes throughputs, utilisations and populations from π.
func (st *Steady) Measures() Measures {
	c := st.Chain
	s := c.sys
	thr := make([]float64, len(s.actions))
	for i, p := range st.Pi {
		for e := c.start[i]; e < c.start[i+1]; e++ {
			thr[c.act[e]] += p * c.rate[e]
		}
	}
	mean := make([]float64, c.width)
	for k, p := range st.Pi {
		for i, n := range c.state(k) {
			mean[i] += p * float64(n)
		}
	}
	return s.measures(thr, mean)
}

// measures assembles results from per-action throughputs and mean counts.
func (s *System) measures(thr, mean []float64) Measures {
	m := Measures{Throughput: map[string]float64{}, Utilisation: map[string]map[string]float64{}}
	for _, a := range s.Actions() {
		m.Throughput[a] = thr[s.actIdx[a]]
	}
	for _, gr := range s.groups {
		u := map[string]float64{}
		for i, name := range gr.seq.names {
			u[name] = mean[gr.offset+i] / float64(gr.size)
		}
		m.Utilisation[gr.name] = u
		if gr.size > 1 {
			if m.Populations == nil {
				m.Populations = map[string]map[string]float64{}
			}
			p := map[string]float64{}
			for i, name := range gr.seq.names {
				p[name] = mean[gr.offset+i]
			}
			m.Populations[gr.name] = p
		}
	}
	return m
}

// Result is the outcome of solving a model.
type Result struct {
	States      int     `json:"states"`
	Transitions int     `json:"transitions"`
	Residual    float64 `json:"residual"`
	Iterations  int     `json:"iterations"`
	Seconds     float64 `json:"seconds"`
	Measures
}

// Solve derives and solves the system's chain.
func (s *System) Solve(ctx context.Context, opt SolveOptions) (*Result, error) {
	t0 := time.Now()
	c, err := s.Derive(0)
	if err != nil {
		return nil, err
	}
	st, err := c.Solve(ctx, opt)
	if err != nil {
		return nil, err
	}
	return &Result{
		States: c.States(), Transitions: c.Transitions(),
		Residual: st.Residual, Iterations: st.Iterations,
		Seconds: time.Since(t0).Seconds(), Measures: st.Measures(),
	}, nil
}

// aggregations prepares the aggregation–disaggregation steps of Solve.
// Gauss–Seidel is slow where probability must travel far through the
// chain — a long queue near critical load — and fast at settling it
// locally. So every other sweep the states are lumped into blocks along
// one "axis" of the chain — the breadth-first level, or the count of one
// local state of an aggregated component — chosen such that every
// transition moves at most one block up or down. The lumped chain is then
// a birth–death chain, whose up and down rates are the current π's
// conditional rates between neighbouring blocks; it is solved exactly
// (product form, in logarithms, so that a thousand blocks of geometric
// decay neither underflow nor overflow) and each block's probabilities
// are rescaled to its solution. The axes take turns. This is iterative
// aggregation–disaggregation (Koury, McAllister and Stewart, "Iterative
// methods for computing stationary distributions of nearly completely
// decomposable Markov chains", 1984) with these blocks as partitions;
// the convergence test is still the residual of the full chain.
func (c *Chain) aggregations() []*levels {
	n := c.States()
	var out []*levels
	try := func(block func(i int) int32) {
		lo, hi := int32(math.MaxInt32), int32(math.MinInt32)
		for i := 0; i < n; i++ {
			b := block(i)
			lo, hi = min(lo, b), max(hi, b)
			for e := c.start[i]; e < c.start[i+1]; e++ {
				if d := block(int(c.to[e])) - b; d > 1 || d < -1 {
					return
				}
			}
		}
		if hi-lo < 2 {
			return
		}
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = block(i) - lo
		}
		out = append(out, &levels{c: c, m: int(hi-lo) + 1, block: ids})
	}
	try(func(i int) int32 { return c.level[i] })
	for j := 0; j < c.width; j++ {
		try(func(i int) int32 { return c.states[i*c.width+j] })
	}
	return out
}

// levels is one partition of the states into blocks 0 … m−1.
type levels struct {
	c     *Chain
	m     int
	block []int32
}

func (l *levels) correct(pi []float64) {
	c := l.c
	mass := make([]float64, l.m)
	up := make([]float64, l.m)
	down := make([]float64, l.m)
	for i, p := range pi {
		li := l.block[i]
		mass[li] += p
		for e := c.start[i]; e < c.start[i+1]; e++ {
			switch l.block[c.to[e]] - li {
			case 1:
				up[li] += p * c.rate[e]
			case -1:
				down[li] += p * c.rate[e]
			}
		}
	}
	// Levels past one whose probability has underflowed to zero (or that
	// cannot be left) keep their values: they hold next to nothing.
	logXi := make([]float64, 1, l.m)
	if mass[0] <= 0 {
		return
	}
	for L := 0; L+1 < l.m; L++ {
		if mass[L+1] <= 0 || up[L] <= 0 || down[L+1] <= 0 {
			break
		}
		// Balance across the cut between L and L+1:
		// ξ_L · up_L/mass_L = ξ_{L+1} · down_{L+1}/mass_{L+1}.
		logXi = append(logXi, logXi[L]+math.Log(up[L]/mass[L])-math.Log(down[L+1]/mass[L+1]))
	}
	hi := math.Inf(-1)
	var kept float64
	for L, v := range logXi {
		hi = math.Max(hi, v)
		kept += mass[L]
	}
	var z float64
	for _, v := range logXi {
		z += math.Exp(v - hi)
	}
	// The rescaled levels keep their total mass.
	scale := make([]float64, l.m)
	for L := range scale {
		scale[L] = 1
	}
	for L, v := range logXi {
		scale[L] = kept * math.Exp(v-hi) / z / mass[L]
	}
	for i := range pi {
		pi[i] *= scale[l.block[i]]
	}
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
