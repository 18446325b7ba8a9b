package pepa

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// rate is an evaluated rate: a positive number, or the passive rate ⊤
// with a weight (T is weight 1, 2 * T weight 2). A passive activity
// proceeds at the rate its cooperation partner sets.
type rate struct {
	v       float64
	passive bool
}

// System is a checked model ready to solve: its sequential components,
// how they are composed, and the values of its rates.
type System struct {
	model   *Model
	rates   map[string]float64
	actions []string       // action names; index 0 is tau
	actIdx  map[string]int // name → index
	seqs    map[string]*seqProc
	groups  []*group // the leaves of the composition, in text order
	root    node
	width   int // length of the state vector
	// Warnings are legal but suspicious things, such as a cooperation on an
	// action only one side performs (which blocks that action).
	Warnings []string
}

// seqProc is the derivation graph of a sequential component: the local
// states reachable from its initial process and the activities of each.
type seqProc struct {
	names []string   // local state names, initial first
	acts  [][]seqAct // activities per local state
	index map[string]int
	alpha map[int]bool // actions it performs
}

type seqAct struct {
	action int
	rate   rate
	to     int
}

// group is one leaf of the composition: Size copies of a sequential
// component, represented by how many copies are in each local state
// (Hillston's numerical vector form). A single component is a group of
// one.
type group struct {
	name   string // the component's name in results
	seq    *seqProc
	size   int
	offset int // where its counts start in the state vector
}

// Check checks m and evaluates its rates (overrides replace rate
// definitions by name, as a sweep does). It reports undefined processes
// and rates, rates used before their definition, negative or zero rates,
// arrays of non-integer size, and cooperation on an action neither side
// performs.
func Check(m *Model, overrides map[string]float64) (*System, error) {
	s := &System{model: m, rates: map[string]float64{}, actIdx: map[string]int{}, seqs: map[string]*seqProc{}}
	s.action("tau")
	for name := range overrides {
		found := false
		for _, r := range m.Rates {
			found = found || r.Name == name
		}
		if !found {
			return nil, fmt.Errorf("no rate named %q in the model (rates: %s)", name, strings.Join(m.RateNames(), ", "))
		}
	}
	for _, r := range m.Rates {
		if _, dup := s.rates[r.Name]; dup {
			return nil, errorf(r.Pos, "rate %s is defined twice", r.Name)
		}
		v, err := s.eval(r.Value)
		if err != nil {
			return nil, err
		}
		if v.passive {
			return nil, errorf(r.Pos, "rate %s: a rate definition cannot be passive (write T in the activity instead)", r.Name)
		}
		if o, ok := overrides[r.Name]; ok {
			v.v = o
		}
		if !(v.v > 0) || math.IsInf(v.v, 0) {
			return nil, errorf(r.Pos, "rate %s is %g: rates must be positive and finite", r.Name, v.v)
		}
		s.rates[r.Name] = v.v
	}
	defs := map[string]*ProcDef{}
	for i := range m.Procs {
		d := &m.Procs[i]
		if _, dup := defs[d.Name]; dup {
			return nil, errorf(d.Pos, "process %s is defined twice", d.Name)
		}
		defs[d.Name] = d
	}
	// Every process name used anywhere must be defined.
	var undefined error
	walkConsts(m.System, func(c *Const) {
		if defs[c.Name] == nil && undefined == nil {
			undefined = errorf(c.Pos, "process %s is not defined", c.Name)
		}
	})
	for _, d := range m.Procs {
		walkConsts(d.Body, func(c *Const) {
			if defs[c.Name] == nil && undefined == nil {
				undefined = errorf(c.Pos, "process %s is not defined (used in %s)", c.Name, d.Name)
			}
		})
	}
	if undefined != nil {
		return nil, undefined
	}
	if m.System == nil {
		return nil, fmt.Errorf("the model has no system equation")
	}
	root, err := s.compose(m.System, defs, nil)
	if err != nil {
		return nil, err
	}
	s.root = root
	return s, nil
}

// RateNames lists the model's rate definitions in order.
func (m *Model) RateNames() []string {
	var names []string
	for _, r := range m.Rates {
		names = append(names, r.Name)
	}
	return names
}

func walkConsts(p Proc, f func(*Const)) {
	switch p := p.(type) {
	case *Const:
		f(p)
	case *Prefix:
		walkConsts(p.Next, f)
	case *Choice:
		walkConsts(p.L, f)
		walkConsts(p.R, f)
	case *Coop:
		walkConsts(p.L, f)
		walkConsts(p.R, f)
	case *Hide:
		walkConsts(p.P, f)
	case *Array:
		f(p.P)
	}
}

func (s *System) action(name string) int {
	if i, ok := s.actIdx[name]; ok {
		return i
	}
	s.actIdx[name] = len(s.actions)
	s.actions = append(s.actions, name)
	return len(s.actions) - 1
}

func (s *System) eval(e Expr) (rate, error) {
	switch e := e.(type) {
	case *Num:
		return rate{v: e.Value}, nil
	case *Top:
		return rate{v: 1, passive: true}, nil
	case *Ref:
		v, ok := s.rates[e.Name]
		if !ok {
			for _, r := range s.model.Rates {
				if r.Name == e.Name {
					return rate{}, errorf(e.Pos, "rate %s is used before its definition at %s", e.Name, r.Pos)
				}
			}
			return rate{}, errorf(e.Pos, "rate %s is not defined", e.Name)
		}
		return rate{v: v}, nil
	case *Neg:
		x, err := s.eval(e.X)
		if err != nil {
			return rate{}, err
		}
		if x.passive {
			return rate{}, errorf(e.Pos, "the passive rate cannot be negated")
		}
		return rate{v: -x.v}, nil
	case *Binary:
		l, err := s.eval(e.L)
		if err != nil {
			return rate{}, err
		}
		r, err := s.eval(e.R)
		if err != nil {
			return rate{}, err
		}
		switch {
		case !l.passive && !r.passive:
		case e.Op == '*' && l.passive != r.passive:
			// A weighted passive rate: w * T.
			return rate{v: l.v * r.v, passive: true}, nil
		case e.Op == '/' && l.passive && !r.passive:
			return rate{v: l.v / r.v, passive: true}, nil
		default:
			return rate{}, errorf(e.Pos, "the passive rate T can only be weighted (w * T or T / w)")
		}
		switch e.Op {
		case '+':
			return rate{v: l.v + r.v}, nil
		case '-':
			return rate{v: l.v - r.v}, nil
		case '*':
			return rate{v: l.v * r.v}, nil
		default:
			if r.v == 0 {
				return rate{}, errorf(e.Pos, "division by zero")
			}
			return rate{v: l.v / r.v}, nil
		}
	}
	return rate{}, fmt.Errorf("unknown expression %T", e)
}

// compose builds the composition tree for a term of the system equation.
// A name whose definition is itself a composition (Sys = P <a> Q;) is
// expanded in place; stack guards against a composition defined in terms
// of itself.
func (s *System) compose(p Proc, defs map[string]*ProcDef, stack []string) (node, error) {
	switch p := p.(type) {
	case *Const:
		d := defs[p.Name]
		if isComposite(d.Body) {
			for _, n := range stack {
				if n == p.Name {
					return nil, errorf(p.Pos, "composition %s is defined in terms of itself", p.Name)
				}
			}
			return s.compose(d.Body, defs, append(stack, p.Name))
		}
		return s.leaf(p, 1, defs)
	case *Array:
		if isComposite(defs[p.P.Name].Body) {
			return nil, errorf(p.Pos, "%s[…]: only a sequential process can be aggregated, and %s is a composition", p.P.Name, p.P.Name)
		}
		sz, err := s.eval(p.Size)
		if err != nil {
			return nil, err
		}
		n := int(sz.v)
		if sz.passive || float64(n) != sz.v || n < 1 {
			return nil, errorf(p.Pos, "%s[%s]: the number of copies must be a positive integer", p.P.Name, FormatExpr(p.Size))
		}
		if !p.HasSet || len(p.Actions) == 0 {
			return s.leaf(p.P, n, defs)
		}
		// P[N][L] is P <L> P <L> … <L> P. Copies that synchronise with each
		// other are not interchangeable in the counting sense, so they are
		// kept as N separate components.
		var acc node
		for i := 0; i < n; i++ {
			g, err := s.leaf(p.P, 1, defs)
			if err != nil {
				return nil, err
			}
			if acc == nil {
				acc = g
				continue
			}
			acc, err = s.coop(p.Pos, acc, g, p.Actions)
			if err != nil {
				return nil, err
			}
		}
		return acc, nil
	case *Coop:
		l, err := s.compose(p.L, defs, stack)
		if err != nil {
			return nil, err
		}
		r, err := s.compose(p.R, defs, stack)
		if err != nil {
			return nil, err
		}
		return s.coop(p.Pos, l, r, p.Actions)
	case *Hide:
		x, err := s.compose(p.P, defs, stack)
		if err != nil {
			return nil, err
		}
		h := &hideNode{child: x}
		for _, a := range p.Actions {
			i := s.action(a)
			if !x.alphabet()[i] {
				return nil, errorf(p.Pos, "hiding %s, which the hidden process does not perform", a)
			}
			h.set = setBit(h.set, i)
		}
		return h, nil
	}
	return nil, errorf(p.procPos(), "a choice or prefix cannot be used in the system equation: define it as a process first")
}

func (s *System) coop(at Pos, l, r node, acts []string) (node, error) {
	c := &coopNode{l: l, r: r}
	la, ra := alphabet(l), alphabet(r)
	for _, a := range acts {
		i := s.action(a)
		if c.set != nil && i < len(c.set) && c.set[i] {
			return nil, errorf(at, "%s appears twice in the cooperation set", a)
		}
		c.set = setBit(c.set, i)
		c.list = append(c.list, i)
		switch {
		case !la[i] && !ra[i]:
			return nil, errorf(at, "cooperation on %s, which neither side performs", a)
		case !la[i] || !ra[i]:
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s: cooperation on %s, which only one side performs: it is blocked", at, a))
		}
	}
	sort.Ints(c.list)
	return c, nil
}

// setBit marks action i in a set indexed by action.
func setBit(set []bool, i int) []bool {
	for len(set) <= i {
		set = append(set, false)
	}
	set[i] = true
	return set
}

// has reports whether action i is in set.
func has(set []bool, i int) bool { return i < len(set) && set[i] }

func isComposite(p Proc) bool {
	switch p.(type) {
	case *Coop, *Hide, *Array:
		return true
	}
	return false
}

// leaf makes a group of n copies of the sequential process named by c.
func (s *System) leaf(c *Const, n int, defs map[string]*ProcDef) (node, error) {
	sp, err := s.sequential(c.Name, defs)
	if err != nil {
		return nil, err
	}
	name := c.Name
	taken := 0
	for _, g := range s.groups {
		if g.seq == sp {
			taken++
		}
	}
	if taken > 0 {
		name = fmt.Sprintf("%s#%d", c.Name, taken+1)
	}
	g := &group{name: name, seq: sp, size: n, offset: s.width}
	s.width += len(sp.names)
	s.groups = append(s.groups, g)
	return g, nil
}

// sequential derives the local states of the component that starts as
// the process named start: every process reachable from it through its
// activities. A derivative without a name of its own, such as the
// (b, r).P in P0 = (a, s).(b, r).P, is named by its text.
func (s *System) sequential(start string, defs map[string]*ProcDef) (*seqProc, error) {
	if sp := s.seqs[start]; sp != nil {
		return sp, nil
	}
	sp := &seqProc{index: map[string]int{}, alpha: map[int]bool{}}
	var terms []Proc
	key := func(p Proc) string {
		if c, ok := p.(*Const); ok {
			return c.Name
		}
		return FormatProc(p)
	}
	add := func(p Proc) int {
		k := key(p)
		if i, ok := sp.index[k]; ok {
			return i
		}
		sp.index[k] = len(sp.names)
		sp.names = append(sp.names, k)
		terms = append(terms, p)
		sp.acts = append(sp.acts, nil)
		return len(sp.names) - 1
	}
	add(&Const{Name: start})
	for i := 0; i < len(terms); i++ {
		var acts []seqAct
		var visit func(p Proc, seen []string) error
		visit = func(p Proc, seen []string) error {
			switch p := p.(type) {
			case *Prefix:
				r, err := s.eval(p.Rate)
				if err != nil {
					return err
				}
				if !(r.v > 0) {
					return errorf(p.Pos, "activity (%s, %s) has rate %g: rates must be positive", p.Action, FormatExpr(p.Rate), r.v)
				}
				a := s.action(p.Action)
				sp.alpha[a] = true
				acts = append(acts, seqAct{action: a, rate: r, to: add(p.Next)})
			case *Choice:
				if err := visit(p.L, seen); err != nil {
					return err
				}
				return visit(p.R, seen)
			case *Const:
				for _, n := range seen {
					if n == p.Name {
						return errorf(p.Pos, "process %s is defined in terms of itself without an activity first", p.Name)
					}
				}
				body := defs[p.Name].Body
				if isComposite(body) {
					return errorf(p.Pos, "%s is a composition and cannot be a state of the sequential component %s", p.Name, start)
				}
				return visit(body, append(seen, p.Name))
			default:
				return errorf(p.procPos(), "a cooperation, hiding or array cannot appear inside the sequential component %s", start)
			}
			return nil
		}
		if err := visit(terms[i], nil); err != nil {
			return nil, err
		}
		sp.acts[i] = acts
	}
	// Mixing active and passive rates for one action in one state has no
	// meaning in PEPA.
	for i, acts := range sp.acts {
		kind := map[int]bool{}
		for _, a := range acts {
			if k, ok := kind[a.action]; ok && k != a.rate.passive {
				return nil, fmt.Errorf("local state %s of %s offers %s both actively and passively", sp.names[i], start, s.actions[a.action])
			}
			kind[a.action] = a.rate.passive
		}
	}
	s.seqs[start] = sp
	return sp, nil
}
