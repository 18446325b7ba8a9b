package pepa

import (
	"strconv"
	"strings"
)

// Model is a parsed PEPA model: rate definitions, process definitions and
// the system equation, in the order of the text.
type Model struct {
	Rates  []RateDef
	Procs  []ProcDef
	System Proc
}

// RateDef is `name = expression;`.
type RateDef struct {
	Pos   Pos
	Name  string
	Value Expr
}

// ProcDef is `Name = process;`.
type ProcDef struct {
	Pos  Pos
	Name string
	Body Proc
}

// Expr is a rate expression: numbers, rate names, + - * / and the
// passive rate ⊤ (written T or infty), possibly weighted (2 * T).
type Expr interface{ exprPos() Pos }

// Num is a numeric literal.
type Num struct {
	Pos   Pos
	Value float64
}

// Ref names a rate defined earlier.
type Ref struct {
	Pos  Pos
	Name string
}

// Top is the passive rate ⊤.
type Top struct{ Pos Pos }

// Binary is L Op R with Op one of + - * /.
type Binary struct {
	Pos  Pos
	Op   byte
	L, R Expr
}

// Neg is -X.
type Neg struct {
	Pos Pos
	X   Expr
}

func (e *Num) exprPos() Pos    { return e.Pos }
func (e *Ref) exprPos() Pos    { return e.Pos }
func (e *Top) exprPos() Pos    { return e.Pos }
func (e *Binary) exprPos() Pos { return e.Pos }
func (e *Neg) exprPos() Pos    { return e.Pos }

// Proc is a process term.
type Proc interface{ procPos() Pos }

// Prefix is (Action, Rate).Next.
type Prefix struct {
	Pos    Pos
	Action string
	Rate   Expr
	Next   Proc
}

// Choice is L + R.
type Choice struct {
	Pos  Pos
	L, R Proc
}

// Const names a process definition.
type Const struct {
	Pos  Pos
	Name string
}

// Coop is L <Actions> R; P || Q is a Coop with no actions.
type Coop struct {
	Pos     Pos
	L, R    Proc
	Actions []string
}

// Hide is P / {Actions}: the actions become internal (tau).
type Hide struct {
	Pos     Pos
	P       Proc
	Actions []string
}

// Array is P[Size], or P[Size][Actions]: Size copies of the sequential
// process P, in parallel, or cooperating among themselves on Actions.
type Array struct {
	Pos     Pos
	P       *Const
	Size    Expr
	Actions []string // with HasSet
	HasSet  bool
}

func (p *Prefix) procPos() Pos { return p.Pos }
func (p *Choice) procPos() Pos { return p.Pos }
func (p *Const) procPos() Pos  { return p.Pos }
func (p *Coop) procPos() Pos   { return p.Pos }
func (p *Hide) procPos() Pos   { return p.Pos }
func (p *Array) procPos() Pos  { return p.Pos }

// Format prints the model in the plug-in's syntax; parsing the result
// gives the same model.
func (m *Model) Format() string {
	var b strings.Builder
	for _, r := range m.Rates {
		b.WriteString(r.Name + " = " + FormatExpr(r.Value) + ";\n")
	}
	if len(m.Rates) > 0 {
		b.WriteString("\n")
	}
	for _, p := range m.Procs {
		b.WriteString(p.Name + " = " + FormatProc(p.Body) + ";\n")
	}
	if len(m.Procs) > 0 {
		b.WriteString("\n")
	}
	b.WriteString(FormatProc(m.System) + "\n")
	return b.String()
}

// FormatExpr prints a rate expression, parenthesised where needed.
func FormatExpr(e Expr) string { return formatExpr(e, 0) }

func prec(op byte) int {
	if op == '+' || op == '-' {
		return 1
	}
	return 2
}

func formatExpr(e Expr, outer int) string {
	switch e := e.(type) {
	case *Num:
		return strconv.FormatFloat(e.Value, 'g', -1, 64)
	case *Ref:
		return e.Name
	case *Top:
		return "T"
	case *Neg:
		return "-" + formatExpr(e.X, 3)
	case *Binary:
		p := prec(e.Op)
		// Left-associative: the right operand needs parentheses at equal
		// precedence.
		s := formatExpr(e.L, p) + " " + string(e.Op) + " " + formatExpr(e.R, p+1)
		if p < outer {
			return "(" + s + ")"
		}
		return s
	}
	return "?"
}

// FormatProc prints a process term, parenthesised where needed.
func FormatProc(p Proc) string { return formatProc(p, 0) }

// Precedence, loosest first: cooperation 1, hiding 2, choice 3, prefix 4.
func formatProc(p Proc, outer int) string {
	paren := func(level int, s string) string {
		if level < outer {
			return "(" + s + ")"
		}
		return s
	}
	switch p := p.(type) {
	case *Const:
		return p.Name
	case *Prefix:
		return paren(4, "("+p.Action+", "+FormatExpr(p.Rate)+")."+formatProc(p.Next, 4))
	case *Choice:
		return paren(3, formatProc(p.L, 3)+" + "+formatProc(p.R, 4))
	case *Hide:
		return paren(2, formatProc(p.P, 2)+"/{"+strings.Join(p.Actions, ", ")+"}")
	case *Coop:
		op := " || "
		if len(p.Actions) > 0 {
			op = " <" + strings.Join(p.Actions, ", ") + "> "
		}
		return paren(1, formatProc(p.L, 1)+op+formatProc(p.R, 2))
	case *Array:
		s := p.P.Name + "[" + FormatExpr(p.Size) + "]"
		if p.HasSet {
			s += "[" + strings.Join(p.Actions, ", ") + "]"
		}
		return s
	}
	return "?"
}
