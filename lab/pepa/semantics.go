package pepa

import (
	"fmt"
	"math"
)

// The semantics: given the state vector x — for every group, how many of
// its copies are in each local state — a node lists the transitions it
// can make. One function serves all three analyses: the Markov chain
// (x holds integers), the fluid approximation (x holds real numbers) and
// simulation.

// move is one copy of a group changing local state: the count at index
// from goes down by one and the count at index to goes up by one.
type move struct{ from, to int32 }

// trans is a transition: an action at a rate, moving some copies.
type trans struct {
	action int
	rate   rate
	moves  []move
}

type node interface {
	gen(x []float64, g *generator, out []trans) ([]trans, error)
	alphabet() map[int]bool
}

// generator holds the scratch space of one analysis, so that deriving a
// large state space does not allocate per transition.
type generator struct {
	moves []move
	bufs  [][]trans
	// top, when positive, makes a passive side with less than 1/top of a
	// copy (of weight) enabling an action slow its active partner in
	// proportion, instead of following it fully down to zero copies. The
	// implicit fluid solver uses it to make the right-hand side
	// continuous (see FluidImplicit).
	top float64
}

func (g *generator) reset() { g.moves = g.moves[:0] }

func (g *generator) buf() []trans {
	if n := len(g.bufs); n > 0 {
		b := g.bufs[n-1]
		g.bufs = g.bufs[:n-1]
		return b[:0]
	}
	return nil
}

func (g *generator) give(b []trans) { g.bufs = append(g.bufs, b) }

func (g *generator) addMoves(ms ...[]move) []move {
	start := len(g.moves)
	for _, m := range ms {
		g.moves = append(g.moves, m...)
	}
	return g.moves[start:len(g.moves):len(g.moves)]
}

func alphabet(n node) map[int]bool { return n.alphabet() }

// A group of copies of one sequential component: each copy in local state
// i offers i's activities, so with n copies there the activity's rate is
// n times its own (for a passive activity, its weight n times).
func (gr *group) gen(x []float64, g *generator, out []trans) ([]trans, error) {
	for i, acts := range gr.seq.acts {
		n := x[gr.offset+i]
		if n <= 0 {
			continue
		}
		for _, a := range acts {
			m := g.addMoves([]move{{int32(gr.offset + i), int32(gr.offset + a.to)}})
			out = append(out, trans{a.action, rate{n * a.rate.v, a.rate.passive}, m})
		}
	}
	return out, nil
}

func (gr *group) alphabet() map[int]bool { return gr.seq.alpha }

// coopNode is L <set> R. Actions outside the set interleave. For an action
// a in the set, each a-transition of L pairs with each of R; by the
// apparent-rate rule (Hillston 1996, §3.3) the pair's rate is
//
//	(rl / Ral) · (rr / Rar) · min(Ral, Rar)
//
// where Ral and Rar are the sides' apparent rates for a (the sums of
// their a-rates): the slower side sets the pace and each side's choice
// among its own a-activities keeps its proportions. ⊤ is slower than no
// rate, so a passive side follows its partner; two passive sides stay
// passive.
type coopNode struct {
	l, r node
	set  []bool // indexed by action
	list []int
}

func (c *coopNode) gen(x []float64, g *generator, out []trans) ([]trans, error) {
	lt, err := c.l.gen(x, g, g.buf())
	if err != nil {
		return out, err
	}
	rt, err := c.r.gen(x, g, g.buf())
	if err != nil {
		return out, err
	}
	for _, t := range lt {
		if !has(c.set, t.action) {
			out = append(out, t)
		}
	}
	for _, t := range rt {
		if !has(c.set, t.action) {
			out = append(out, t)
		}
	}
	for _, a := range c.list {
		ral, okl, err := apparent(lt, a)
		if err != nil {
			return out, err
		}
		rar, okr, err := apparent(rt, a)
		if err != nil {
			return out, err
		}
		if !okl || !okr {
			continue
		}
		m := minRate(ral, rar)
		if g.top > 0 && !m.passive {
			// Smoothed: the active rate scaled by how fully the passive
			// side is there, the same factor for every action it
			// enables — as in the chain, where a passive side present
			// a fraction p of the time lets each partner through for
			// that fraction.
			switch {
			case ral.passive:
				m.v *= math.Min(1, ral.v*g.top)
			case rar.passive:
				m.v *= math.Min(1, rar.v*g.top)
			}
		}
		for _, l := range lt {
			if l.action != a {
				continue
			}
			for _, r := range rt {
				if r.action != a {
					continue
				}
				v := l.rate.v / ral.v * (r.rate.v / rar.v) * m.v
				out = append(out, trans{a, rate{v, m.passive}, g.addMoves(l.moves, r.moves)})
			}
		}
	}
	g.give(lt)
	g.give(rt)
	return out, nil
}

func (c *coopNode) alphabet() map[int]bool {
	u := map[int]bool{}
	for a := range c.l.alphabet() {
		u[a] = true
	}
	for a := range c.r.alphabet() {
		u[a] = true
	}
	return u
}

// mixedRates is the error of a cooperation side that offers one action
// both actively and passively.
type mixedRates struct{ action int }

func (e mixedRates) Error() string { return fmt.Sprintf("action %d", e.action) }

// apparent sums the rates of action a among ts. Active and passive rates
// of one action cannot be summed: PEPA gives that no meaning.
func apparent(ts []trans, a int) (rate, bool, error) {
	var sum rate
	found := false
	for _, t := range ts {
		if t.action != a {
			continue
		}
		if found && sum.passive != t.rate.passive {
			return rate{}, false, mixedRates{a}
		}
		sum.v += t.rate.v
		sum.passive = t.rate.passive
		found = true
	}
	return sum, found && sum.v > 0, nil
}

func minRate(a, b rate) rate {
	switch {
	case a.passive && b.passive:
		return rate{math.Min(a.v, b.v), true}
	case a.passive:
		return b
	case b.passive:
		return a
	}
	return rate{math.Min(a.v, b.v), false}
}

// hideNode is P / {set}: the hidden actions become tau, which no
// cooperation can synchronise on.
type hideNode struct {
	child node
	set   []bool // indexed by action
}

func (h *hideNode) gen(x []float64, g *generator, out []trans) ([]trans, error) {
	start := len(out)
	out, err := h.child.gen(x, g, out)
	for i := start; i < len(out); i++ {
		if has(h.set, out[i].action) {
			out[i].action = 0
		}
	}
	return out, err
}

func (h *hideNode) alphabet() map[int]bool {
	u := map[int]bool{}
	for a := range h.child.alphabet() {
		if a < len(h.set) && h.set[a] {
			a = 0
		}
		u[a] = true
	}
	return u
}

// initial is the state vector at time zero: every copy of every group in
// its first local state.
func (s *System) initial() []float64 {
	x := make([]float64, s.width)
	for _, gr := range s.groups {
		x[gr.offset] = float64(gr.size)
	}
	return x
}

// transitions lists the system's transitions in state x. A transition
// still passive at the top level has no rate: the model is incomplete.
func (s *System) transitions(x []float64, g *generator, out []trans) ([]trans, error) {
	g.reset()
	out, err := s.root.gen(x, g, out[:0])
	if m, ok := err.(mixedRates); ok {
		return nil, fmt.Errorf("action %s is offered both actively and passively by one side of a cooperation (in state %s)", s.actions[m.action], s.describe(x))
	}
	if err != nil {
		return nil, err
	}
	for _, t := range out {
		if t.rate.passive {
			return nil, fmt.Errorf("action %s is passive in every component that performs it: nothing gives it a rate (in state %s)", s.actions[t.action], s.describe(x))
		}
	}
	return out, nil
}

// describe prints a state as its groups' local states, e.g.
// (Arrival, Q_0:3 Q_A:7, Service).
func (s *System) describe(x []float64) string {
	out := "("
	for gi, gr := range s.groups {
		if gi > 0 {
			out += ", "
		}
		first := true
		for i, name := range gr.seq.names {
			n := x[gr.offset+i]
			if n == 0 {
				continue
			}
			if !first {
				out += " "
			}
			first = false
			if gr.size == 1 && n == 1 {
				out += name
			} else {
				out += fmt.Sprintf("%s:%g", name, n)
			}
		}
	}
	return out + ")"
}

// Actions lists the model's visible actions in order of first use.
func (s *System) Actions() []string {
	var as []string
	alpha := s.root.alphabet()
	for i, a := range s.actions {
		if i == 0 && !alpha[0] {
			continue
		}
		if alpha[i] {
			as = append(as, a)
		}
	}
	return as
}
