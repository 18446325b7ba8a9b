package pepa

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Calibrate returns a copy of m in which the rate definitions named in
// measured are replaced by the measured values — for example the service
// rate of each store node of a running system, in requests per second,
// for db1, db2, …, and the offered load for the arrival rates. It is the
// seam between measurement and prediction: measure, calibrate, then solve
// or sweep the calibrated model and compare its throughputs with the
// measured ones. Every name must be a rate the model defines, and every
// value positive.
func Calibrate(m *Model, measured map[string]float64) (*Model, error) {
	out := *m
	out.Rates = append([]RateDef(nil), m.Rates...)
	names := make([]string, 0, len(measured))
	for name := range measured {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v := measured[name]
		if !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("measured rate %s = %g: rates must be positive and finite", name, v)
		}
		found := false
		for i := range out.Rates {
			if out.Rates[i].Name == name {
				out.Rates[i].Value = &Num{Pos: out.Rates[i].Pos, Value: v}
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("the model defines no rate %q (rates: %s)", name, strings.Join(m.RateNames(), ", "))
		}
	}
	if _, err := Check(&out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// WriteCalibrated writes the calibrated model as a .pepa text, headed by
// a comment saying where its rates came from.
func WriteCalibrated(w io.Writer, m *Model, measured map[string]float64, source string) error {
	c, err := Calibrate(m, measured)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("/*\n * Calibrated from " + strings.ReplaceAll(source, "*/", "* /") + ":\n")
	for _, name := range sortedKeys(measured) {
		fmt.Fprintf(&b, " *   %s = %g\n", name, measured[name])
	}
	b.WriteString(" */\n\n")
	b.WriteString(c.Format())
	_, err = io.WriteString(w, b.String())
	return err
}
