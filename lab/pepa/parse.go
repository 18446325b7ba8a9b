package pepa

import (
	"strconv"
)

// Parse reads a model in the PEPA Eclipse plug-in's syntax:
//
//	r = 2.0;                         rate definitions, with + - * / and ( )
//	P = (a, r).Q + (b, T).P;         process definitions: prefix, choice
//	Q = (c, 2 * r).P;                T or infty is the passive rate ⊤
//	P <a, b> Q[10] || R / {c}        the system equation, last
//
// Names with an upper-case initial are processes, others rates and
// actions. Cooperation and || associate to the left; hiding binds tighter
// than cooperation, choice tighter than hiding, prefix tightest. Errors
// name the line and column and what was expected. Parse checks syntax
// only; Check finds undefined names and other mistakes.
func Parse(src string) (*Model, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	m, err := p.model()
	if err != nil {
		return nil, err
	}
	return m, nil
}

type parser struct {
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) peekAt(k int) token {
	if p.i+k < len(p.toks) {
		return p.toks[p.i+k]
	}
	return p.toks[len(p.toks)-1]
}
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}
func (p *parser) is(text string) bool { t := p.peek(); return t.kind == tPunct && t.text == text }

func (p *parser) expect(text, what string) (token, error) {
	t := p.peek()
	if t.kind != tPunct || t.text != text {
		return t, errorf(t.pos, "expected %s, found %s", what, t.describe())
	}
	return p.next(), nil
}

func (p *parser) model() (*Model, error) {
	m := &Model{}
	for {
		t := p.peek()
		if t.kind == tEOF {
			return nil, errorf(t.pos, "expected a system equation (a process such as P <a> Q) at the end of the model, found end of file")
		}
		// A definition is a name followed by '='; anything else starts
		// the system equation.
		if (t.kind == tName || t.kind == tProc) && p.peekAt(1).kind == tPunct && p.peekAt(1).text == "=" {
			p.next()
			p.next()
			if t.kind == tName {
				e, err := p.expr()
				if err != nil {
					return nil, err
				}
				m.Rates = append(m.Rates, RateDef{t.pos, t.text, e})
			} else {
				body, err := p.proc()
				if err != nil {
					return nil, err
				}
				m.Procs = append(m.Procs, ProcDef{t.pos, t.text, body})
			}
			if _, err := p.expect(";", "';' after the definition of "+t.text); err != nil {
				return nil, err
			}
			continue
		}
		if t.kind == tPassive {
			return nil, errorf(t.pos, "%s is the passive rate and cannot be defined or used as a process", t.text)
		}
		sys, err := p.proc()
		if err != nil {
			return nil, err
		}
		if p.is(";") {
			p.next()
		}
		if t := p.peek(); t.kind != tEOF {
			return nil, errorf(t.pos, "expected end of file after the system equation, found %s", t.describe())
		}
		m.System = sys
		return m, nil
	}
}

// proc parses cooperations: hide { ('<' actions '>' | '||') hide }.
func (p *parser) proc() (Proc, error) {
	l, err := p.hide()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		var acts []string
		switch {
		case p.is("||"):
			p.next()
		case p.is("<"):
			p.next()
			if acts, err = p.actions(">"); err != nil {
				return nil, err
			}
		default:
			return l, nil
		}
		r, err := p.hide()
		if err != nil {
			return nil, err
		}
		l = &Coop{t.pos, l, r, acts}
	}
}

// actions parses a, b, c up to the closing token (which it consumes); the
// list may be empty.
func (p *parser) actions(close string) ([]string, error) {
	var acts []string
	if p.is(close) {
		p.next()
		return acts, nil
	}
	for {
		t := p.next()
		if t.kind != tName {
			return nil, errorf(t.pos, "expected an action name (lower-case initial), found %s", t.describe())
		}
		acts = append(acts, t.text)
		if p.is(",") {
			p.next()
			continue
		}
		if _, err := p.expect(close, "',' or '"+close+"' in the action set"); err != nil {
			return nil, err
		}
		return acts, nil
	}
}

// hide parses choice { '/' '{' actions '}' }.
func (p *parser) hide() (Proc, error) {
	x, err := p.choice()
	if err != nil {
		return nil, err
	}
	for p.is("/") {
		t := p.next()
		if _, err := p.expect("{", "'{' after '/' (hiding is P / {a, b})"); err != nil {
			return nil, err
		}
		acts, err := p.actions("}")
		if err != nil {
			return nil, err
		}
		x = &Hide{t.pos, x, acts}
	}
	return x, nil
}

// choice parses prefixTerm { '+' prefixTerm }.
func (p *parser) choice() (Proc, error) {
	l, err := p.prefix()
	if err != nil {
		return nil, err
	}
	for p.is("+") {
		t := p.next()
		r, err := p.prefix()
		if err != nil {
			return nil, err
		}
		l = &Choice{t.pos, l, r}
	}
	return l, nil
}

// prefix parses '(' action ',' rate ')' '.' prefix | primary.
func (p *parser) prefix() (Proc, error) {
	t := p.peek()
	if p.is("(") && p.peekAt(1).kind == tName && p.peekAt(2).kind == tPunct && p.peekAt(2).text == "," {
		p.next()
		act := p.next()
		p.next()
		rate, err := p.expr()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(")", "')' to close the activity ("+act.text+", rate)"); err != nil {
			return nil, err
		}
		if _, err := p.expect(".", "'.' after the activity ("+act.text+", …)"); err != nil {
			return nil, err
		}
		next, err := p.prefix()
		if err != nil {
			return nil, err
		}
		return &Prefix{t.pos, act.text, rate, next}, nil
	}
	return p.primary()
}

// primary parses Name [ '[' expr ']' [ '[' actions ']' ] ] | '(' proc ')'.
func (p *parser) primary() (Proc, error) {
	t := p.next()
	switch {
	case t.kind == tProc:
		c := &Const{t.pos, t.text}
		if !p.is("[") {
			return c, nil
		}
		p.next()
		size, err := p.expr()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect("]", "']' after the array size"); err != nil {
			return nil, err
		}
		a := &Array{Pos: t.pos, P: c, Size: size}
		if p.is("[") {
			p.next()
			if a.Actions, err = p.actions("]"); err != nil {
				return nil, err
			}
			a.HasSet = true
		}
		return a, nil
	case t.kind == tPunct && t.text == "(":
		x, err := p.proc()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(")", "')'"); err != nil {
			return nil, err
		}
		return x, nil
	case t.kind == tName:
		return nil, errorf(t.pos, "expected a process, found %s (process names start with an upper-case letter; activities are written (%s, rate).P)", t.describe(), t.text)
	}
	return nil, errorf(t.pos, "expected a process (a name, an activity (a, r).P or '('), found %s", t.describe())
}

// expr parses term { ('+'|'-') term }.
func (p *parser) expr() (Expr, error) {
	l, err := p.term()
	if err != nil {
		return nil, err
	}
	for p.is("+") || p.is("-") {
		t := p.next()
		r, err := p.term()
		if err != nil {
			return nil, err
		}
		l = &Binary{t.pos, t.text[0], l, r}
	}
	return l, nil
}

func (p *parser) term() (Expr, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for p.is("*") || p.is("/") {
		t := p.next()
		r, err := p.unary()
		if err != nil {
			return nil, err
		}
		l = &Binary{t.pos, t.text[0], l, r}
	}
	return l, nil
}

func (p *parser) unary() (Expr, error) {
	t := p.next()
	switch {
	case t.kind == tPunct && t.text == "-":
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &Neg{t.pos, x}, nil
	case t.kind == tNumber:
		v, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return nil, errorf(t.pos, "malformed number %q", t.text)
		}
		return &Num{t.pos, v}, nil
	case t.kind == tName:
		return &Ref{t.pos, t.text}, nil
	case t.kind == tPassive:
		return &Top{t.pos}, nil
	case t.kind == tPunct && t.text == "(":
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(")", "')' in the rate expression"); err != nil {
			return nil, err
		}
		return x, nil
	}
	return nil, errorf(t.pos, "expected a rate (a number, a rate name, T or '('), found %s", t.describe())
}
