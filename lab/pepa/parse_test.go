package pepa

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Every construct of the syntax, to check that Format's output parses
// back to the same model.
const everything = `
// line comment
/* block
   comment */
r = 1.5;
s = 2 * r - (r - 1) / 4;
neg = -(1 - 3);
n = 4;
P = (a, r).P1 + (b, s).(c, T).P;
P1 = (d, 2 * T).P + (a, infty).P1;
Q = (a, s).Q + (d, 1e-3).Q + (b, neg).Q;
R = (c, r).R;
Sys = P <a, d> Q[n] || R;
(Sys <b> Q[2][a]) / {c} <> R
`

func TestParseRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("models/*.pepa")
	if len(files) < 6 {
		t.Fatalf("found %d models", len(files))
	}
	srcs := map[string]string{"everything": everything}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs[f] = string(b)
	}
	for name, src := range srcs {
		m1, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		text := m1.Format()
		m2, err := Parse(text)
		if err != nil {
			t.Fatalf("%s: the formatted model does not parse: %v\n%s", name, err, text)
		}
		if !reflect.DeepEqual(strip(m1), strip(m2)) {
			t.Errorf("%s: the formatted model parses to a different model:\n%s", name, text)
		}
		if again := m2.Format(); again != text {
			t.Errorf("%s: Format is not stable:\n%s\n---\n%s", name, text, again)
		}
	}
	m, _ := Parse(everything)
	want := "(Sys <b> Q[2][a])/{c} || R"
	if got := FormatProc(m.System); got != want {
		t.Errorf("system equation %q, want %q", got, want)
	}
	if got := FormatExpr(m.Rates[1].Value); got != "2 * r - (r - 1) / 4" {
		t.Errorf("rate s formats as %q", got)
	}
}

// strip zeroes positions, which differ between a text and its formatting.
func strip(m *Model) string {
	var b strings.Builder
	for _, r := range m.Rates {
		b.WriteString(r.Name + "=" + FormatExpr(r.Value) + ";")
	}
	for _, p := range m.Procs {
		b.WriteString(p.Name + "=" + FormatProc(p.Body) + ";")
	}
	b.WriteString(FormatProc(m.System))
	return b.String()
}

func TestParseAssociativityAndPrecedence(t *testing.T) {
	m, err := Parse("P = (a, 1).P + (b, 1).P; A <a> B <b> C / {x} || D")
	if err != nil {
		t.Fatal(err)
	}
	c, ok := m.System.(*Coop)
	if !ok || len(c.Actions) != 0 {
		t.Fatalf("top is %T, want the || of the left-associated chain", m.System)
	}
	inner := c.L.(*Coop)
	if inner.Actions[0] != "b" {
		t.Errorf("want (A <a> B) <b> (C/{x}), got %s", FormatProc(m.System))
	}
	if _, ok := inner.R.(*Hide); !ok {
		t.Errorf("hiding should bind tighter than cooperation: %s", FormatProc(m.System))
	}
	if _, ok := m.Procs[0].Body.(*Choice); !ok {
		t.Errorf("prefix should bind tighter than choice")
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{"r = 1\nP = (a, r).P;\nP", "2:1: expected ';' after the definition of r, found process name P"},
		{"P = (a, 1).P;\nP <a Q", "2:6: expected ',' or '>' in the action set, found process name Q"},
		{"P = (a, 1;\nP", "1:10: expected ')' to close the activity (a, rate), found ';'"},
		{"P = (a, 1) P;\nP", "1:12: expected '.' after the activity (a, …), found process name P"},
		{"P = (a, ).P;\nP", "1:9: expected a rate (a number, a rate name, T or '('), found ')'"},
		{"P = (a, 1).P;", "1:14: expected a system equation"},
		{"P = (a, 1).P;\nP Q", "2:3: expected end of file after the system equation, found process name Q"},
		{"/* open\nP", "1:1: comment not closed"},
		{"P = (a, 1).P;\nP | P", "2:3: unexpected '|': expected '||'"},
		{"P = (a, 1).p;\nP", "1:12: expected a process, found name p"},
		{"P = (a, 1).P;\nP / a", "2:5: expected '{' after '/'"},
		{"P = (a, 1).P;\nP[3", "2:4: expected ']' after the array size, found end of file"},
		{"P = (a, 1).P;\nP # P", "2:3: unexpected character '#'"},
	}
	for _, c := range cases {
		_, err := Parse(c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want %q", c.src, err, c.want)
		}
	}
}

func TestCheckErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{"P = (a, 1).Q;\nP", "1:12: process Q is not defined (used in P)"},
		{"P = (a, 1).P;\nP || R", "2:6: process R is not defined"},
		{"r = 2 * s;\ns = 1;\nP = (a, r).P;\nP", "1:9: rate s is used before its definition at 2:1"},
		{"P = (a, r).P;\nP", "1:9: rate r is not defined"},
		{"P = (a, 1).P;\nQ = (b, 1).Q;\nP <c> Q", "3:3: cooperation on c, which neither side performs"},
		{"r = 1 - 3;\nP = (a, r).P;\nP", "1:1: rate r is -2: rates must be positive and finite"},
		{"P = (a, -1).P;\nP", "1:5: activity (a, -1) has rate -1: rates must be positive"},
		{"r = 0;\nP = (a, r).P;\nP", "1:1: rate r is 0: rates must be positive"},
		{"P = (a, 1).P;\nP[2.5]", "2:1: P[2.5]: the number of copies must be a positive integer"},
		{"P = (a, 1).P;\nP = (b, 1).P;\nP", "2:1: process P is defined twice"},
		{"P = Q;\nQ = P;\nP", "process P is defined in terms of itself without an activity first"},
		{"P = (a, 1).P;\nP / {b}", "2:3: hiding b, which the hidden process does not perform"},
		{"P = (a, T).P;\nP", "action a is passive in every component that performs it"},
		{"r = T;\nP = (a, r).P;\nP", "1:1: rate r: a rate definition cannot be passive"},
	}
	for _, c := range cases {
		m, err := Parse(c.src)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.src, err)
			continue
		}
		s, err := Check(m, nil)
		if err == nil {
			_, err = s.Solve(context.Background(), SolveOptions{})
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.src, err, c.want)
		}
	}
	m, _ := Parse("a = 1;\nP = (x, a).P;\nP")
	if _, err := Check(m, map[string]float64{"b": 2}); err == nil || !strings.Contains(err.Error(), `no rate named "b"`) {
		t.Errorf("setting an unknown rate: %v", err)
	}
	// Cooperation on an action only one side performs is legal but blocks
	// it: a warning.
	m, _ = Parse("P = (a, 1).P + (b, 1).P;\nQ = (c, 1).Q;\nP <a> Q")
	s, err := Check(m, nil)
	if err != nil || len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "only one side performs") {
		t.Errorf("warnings %v, err %v", s.Warnings, err)
	}
}

func TestMixedActiveAndPassive(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"P = (a, 1).P + (a, T).P;\nQ = (a, 1).Q;\nP <a> Q", "local state P of P offers a both actively and passively"},
		{"P = (a, 1).P;\nR = (a, T).R;\nQ = (a, 1).Q;\n(P || R) <a> Q", "action a is offered both actively and passively by one side of a cooperation"},
	} {
		m, err := Parse(c.src)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Check(m, nil)
		if err == nil {
			_, err = s.Solve(context.Background(), SolveOptions{})
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.src, err, c.want)
		}
	}
}
