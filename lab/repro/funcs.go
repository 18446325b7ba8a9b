package repro

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"text/template"
)

// funcs are the functions an Ours template may call. Each fails on a
// value that is missing or not a number, so a renamed field in a
// command's output stops the render instead of leaving a blank cell.
var funcs = template.FuncMap{
	// f0 … f4: a number to that many decimals.
	"f0": func(v any) (string, error) { return fixed(v, 0) },
	"f1": func(v any) (string, error) { return fixed(v, 1) },
	"f2": func(v any) (string, error) { return fixed(v, 2) },
	"f3": func(v any) (string, error) { return fixed(v, 3) },
	"f4": func(v any) (string, error) { return fixed(v, 4) },
	// n: a whole number with thousands separators (1,234,567).
	"n": func(v any) (string, error) {
		f, err := number(v)
		if err != nil {
			return "", err
		}
		return thousands(int64(math.Round(f))), nil
	},
	// has: whether an object has a field that is not null — for fields
	// a command prints only sometimes ({{if has . "error"}}); a plain
	// {{.error}} on such a field fails the render.
	"has": func(v any, field string) bool {
		m, ok := v.(map[string]any)
		return ok && m[field] != nil
	},
	// get: a value by a dotted path ("a.b.0.c"), an error if absent.
	"get": get,
	// div: a / b.
	"div": func(a, b any) (float64, error) {
		x, err := number(a)
		if err != nil {
			return 0, err
		}
		y, err := number(b)
		if err != nil {
			return 0, err
		}
		if y == 0 {
			return 0, fmt.Errorf("division by zero")
		}
		return x / y, nil
	},
	// cell: the authors' value in row i, column j (0-based).
	"cell": func(v Values, i, j int) (string, error) {
		if i < 0 || i >= len(v.Rows) || j < 0 || j >= len(v.Rows[i]) {
			return "", fmt.Errorf("cell %d,%d: the authors' table has no such cell", i, j)
		}
		return v.Rows[i][j], nil
	},
	// sum: the sum over a list of each element's value at a dotted
	// path ("failures", "cells.total.mean"), an error if one is absent.
	"sum": func(list any, path string) (float64, error) {
		l, ok := list.([]any)
		if !ok {
			return 0, fmt.Errorf("sum %q: a list was expected, not %T", path, list)
		}
		total := 0.0
		for _, v := range l {
			f, err := numberAt(v, path)
			if err != nil {
				return 0, fmt.Errorf("sum: %w", err)
			}
			total += f
		}
		return total, nil
	},
	// last: the last element of a list, an error if it is empty.
	"last": func(v any) (any, error) {
		l, ok := v.([]any)
		if !ok || len(l) == 0 {
			return nil, fmt.Errorf("last: a list with an element was expected, not %T: %w", v, errMissing)
		}
		return l[len(l)-1], nil
	},
	// join: a list of strings joined by sep.
	"join": func(sep string, v []string) string { return strings.Join(v, sep) },
}

func number(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case nil:
		return 0, fmt.Errorf("a number was expected: %w", errMissing)
	}
	return 0, fmt.Errorf("a number was expected, not %T %v", v, v)
}

func fixed(v any, decimals int) (string, error) {
	f, err := number(v)
	if err != nil {
		return "", err
	}
	return strconv.FormatFloat(f, 'f', decimals, 64), nil
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func get(v any, path string) (any, error) {
	cur := v
	for _, p := range strings.Split(path, ".") {
		switch x := cur.(type) {
		case map[string]any:
			next, ok := x[p]
			if !ok {
				return nil, fmt.Errorf("get %q: no field %q: %w", path, p, errMissing)
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("get %q: no element %q of a list of %d: %w", path, p, len(x), errMissing)
			}
			cur = x[i]
		default:
			return nil, fmt.Errorf("get %q: %q of a %T: %w", path, p, cur, errMissing)
		}
	}
	if cur == nil {
		return nil, fmt.Errorf("get %q: null: %w", path, errMissing)
	}
	return cur, nil
}
