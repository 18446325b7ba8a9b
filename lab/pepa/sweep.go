package pepa

import (
	"context"
	"fmt"
	"math"
)

// SweepRow is the steady state of a model at one value of the swept rate.
type SweepRow struct {
	Value      float64
	Throughput map[string]float64
	Result     *Result
}

// Steps lists from, from+step, … up to to (inclusive, allowing for
// rounding).
func Steps(from, to, step float64) ([]float64, error) {
	if !(step > 0) || math.IsInf(step, 0) || math.IsNaN(from) || math.IsNaN(to) {
		return nil, fmt.Errorf("the step must be positive and the bounds numbers")
	}
	if to < from {
		return nil, fmt.Errorf("--to (%g) is below --from (%g)", to, from)
	}
	n := int(math.Floor((to-from)/step + 1e-9))
	if n > 100000 {
		return nil, fmt.Errorf("%d steps is too many", n+1)
	}
	vs := make([]float64, 0, n+1)
	for i := 0; i <= n; i++ {
		// Computed from the index, not accumulated, so 0.1 steps do not drift.
		vs = append(vs, math.Round((from+float64(i)*step)*1e12)/1e12)
	}
	return vs, nil
}

// Sweep solves m once for each value of the rate param, with the other
// rates as in the model or set.
func Sweep(ctx context.Context, m *Model, set map[string]float64, param string, values []float64, opt SolveOptions) ([]SweepRow, error) {
	var rows []SweepRow
	for _, v := range values {
		over := map[string]float64{}
		for k, x := range set {
			over[k] = x
		}
		over[param] = v
		s, err := Check(m, over)
		if err != nil {
			return nil, err
		}
		r, err := s.Solve(ctx, opt)
		if err != nil {
			return nil, fmt.Errorf("%s = %g: %w", param, v, err)
		}
		rows = append(rows, SweepRow{Value: v, Throughput: r.Throughput, Result: r})
	}
	return rows, nil
}
