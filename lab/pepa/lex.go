// Package pepa is a tool for PEPA, the Performance Evaluation Process
// Algebra (Hillston, "A Compositional Approach to Performance Modelling",
// 1996): it reads models in the concrete syntax of the PEPA Eclipse
// plug-in (Tribastone, Duguid and Gilmore, "The PEPA Eclipse Plugin",
// 2009), derives their continuous-time Markov chains with aggregated
// components counted rather than enumerated, solves them for the steady
// state, and offers two cross-checks: the fluid (ODE) approximation and
// stochastic simulation.
package pepa

import (
	"fmt"
	"strings"
	"unicode"
)

// Pos is a position in a model's text, 1-based.
type Pos struct{ Line, Col int }

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Error is a problem found in a model, at a position in its text.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

func errorf(p Pos, format string, args ...any) *Error {
	return &Error{p, fmt.Sprintf(format, args...)}
}

type tokKind int

const (
	tEOF     tokKind = iota
	tProc            // a name with an upper-case initial: a process
	tName            // a name with a lower-case initial: a rate or an action
	tNumber          // 1, 2.5, 1e-3
	tPassive         // T or infty: the unspecified rate ⊤
	tPunct           // = ; ( ) , . + - * / < > [ ] { } ||
)

type token struct {
	kind tokKind
	text string
	pos  Pos
}

func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of file"
	case tProc:
		return "process name " + t.text
	case tName:
		return "name " + t.text
	case tNumber:
		return "number " + t.text
	case tPassive:
		return "passive rate " + t.text
	}
	return "'" + t.text + "'"
}

// lex splits src into tokens, skipping white space and // and /* */
// comments.
func lex(src string) ([]token, error) {
	var toks []token
	line, col := 1, 1
	rs := []rune(src)
	i := 0
	adv := func() {
		if rs[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i++
	}
	for i < len(rs) {
		r := rs[i]
		p := Pos{line, col}
		switch {
		case unicode.IsSpace(r):
			adv()
		case r == '/' && i+1 < len(rs) && rs[i+1] == '/':
			for i < len(rs) && rs[i] != '\n' {
				adv()
			}
		case r == '/' && i+1 < len(rs) && rs[i+1] == '*':
			adv()
			adv()
			for {
				if i >= len(rs) {
					return nil, errorf(p, "comment not closed: expected */ before end of file")
				}
				if rs[i] == '*' && i+1 < len(rs) && rs[i+1] == '/' {
					adv()
					adv()
					break
				}
				adv()
			}
		case unicode.IsLetter(r) || r == '_':
			start := i
			for i < len(rs) && (unicode.IsLetter(rs[i]) || unicode.IsDigit(rs[i]) || rs[i] == '_') {
				adv()
			}
			text := string(rs[start:i])
			kind := tName
			switch {
			case text == "T" || text == "infty":
				kind = tPassive
			case unicode.IsUpper(rs[start]):
				kind = tProc
			}
			toks = append(toks, token{kind, text, p})
		case unicode.IsDigit(r) || (r == '.' && i+1 < len(rs) && unicode.IsDigit(rs[i+1])):
			start := i
			for i < len(rs) && (unicode.IsDigit(rs[i]) || rs[i] == '.') {
				adv()
			}
			if i < len(rs) && (rs[i] == 'e' || rs[i] == 'E') {
				j := i + 1
				if j < len(rs) && (rs[j] == '+' || rs[j] == '-') {
					j++
				}
				if j < len(rs) && unicode.IsDigit(rs[j]) {
					for i < j {
						adv()
					}
					for i < len(rs) && unicode.IsDigit(rs[i]) {
						adv()
					}
				}
			}
			text := string(rs[start:i])
			if strings.Count(text, ".") > 1 {
				return nil, errorf(p, "malformed number %q", text)
			}
			toks = append(toks, token{tNumber, text, p})
		case r == '|':
			if i+1 < len(rs) && rs[i+1] == '|' {
				adv()
				adv()
				toks = append(toks, token{tPunct, "||", p})
			} else {
				return nil, errorf(p, "unexpected '|': expected '||'")
			}
		case strings.ContainsRune("=;(),.+-*/<>[]{}", r):
			adv()
			toks = append(toks, token{tPunct, string(r), p})
		default:
			return nil, errorf(p, "unexpected character %q", r)
		}
	}
	toks = append(toks, token{tEOF, "", Pos{line, col}})
	return toks, nil
}
