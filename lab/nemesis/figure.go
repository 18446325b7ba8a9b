package nemesis

import (
	"cmp"
	"math"
	"slices"

	"github.com/logbook/logbook/lab/plot"
)

// Figure is the run's throughput, writes acknowledged and operations
// completed per second, over a timeline of the faults: each one's
// interval, from injection to the end of its heal, in its kind's row.
func (s *Summary) Figure() plot.Figure {
	var writes, all []float64
	if s.rec != nil {
		for _, op := range s.rec.Ops() {
			if op.Complete.IsZero() {
				continue
			}
			sec := int(op.Complete.Sub(s.rec.start).Seconds())
			for len(all) <= sec {
				all, writes = append(all, 0), append(writes, 0)
			}
			all[sec]++
			if op.Write && op.Outcome == OK {
				writes[sec]++
			}
		}
	}
	xs := make([]float64, len(all))
	for i := range xs {
		xs[i] = float64(i) + 0.5
	}
	panel := plot.Panel{YLabel: "per second", Series: []plot.Series{
		{Name: "operations completed", X: xs, Y: all},
		{Name: "writes acknowledged", X: xs, Y: writes},
	}}
	// Below, a row per kind of fault, grouped by lane (one colour per
	// lane), a bar from each injection to the end of its heal.
	faults := plot.Panel{YLabel: "faults"}
	if s.rec != nil {
		type row struct{ lane, kind string }
		var rows []row
		seen := map[row]bool{}
		for _, f := range s.Timeline {
			if r := (row{f.Lane, f.Kind}); !seen[r] {
				seen[r] = true
				rows = append(rows, r)
			}
		}
		slices.SortFunc(rows, func(a, b row) int { return cmp.Or(cmp.Compare(a.lane, b.lane), cmp.Compare(a.kind, b.kind)) })
		lanes := map[string]int{}
		for _, r := range rows {
			faults.Rows = append(faults.Rows, r.kind)
			if _, ok := lanes[r.lane]; !ok {
				lanes[r.lane] = len(lanes)
			}
		}
		for _, f := range s.Timeline {
			from := f.Start.Sub(s.rec.start).Seconds()
			faults.Spans = append(faults.Spans, plot.Span{Row: slices.Index(rows, row{f.Lane, f.Kind}), Colour: lanes[f.Lane],
				From: from, To: math.Max(f.Healed.Sub(s.rec.start).Seconds(), from+0.1)})
		}
	}
	panels := []plot.Panel{panel}
	if len(faults.Rows) > 0 {
		panels = append(panels, faults)
	}
	return plot.Figure{Title: "nemesis: throughput under faults", XLabel: "seconds", Panels: panels}
}
