package nemesis

import (
	"math"

	"github.com/logbook/logbook/lab/plot"
)

// Figure is the run's throughput: writes acknowledged and operations
// completed per second, each fault's interval, from injection to the
// end of its heal, shaded and named by its kind.
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
	if s.rec != nil {
		for _, f := range s.Timeline {
			panel.Bands = append(panel.Bands, plot.Band{Name: f.Kind,
				From: f.Start.Sub(s.rec.start).Seconds(), To: math.Max(f.Healed.Sub(s.rec.start).Seconds(), f.Start.Sub(s.rec.start).Seconds()+0.1)})
		}
	}
	return plot.Figure{Title: "nemesis: throughput under faults", XLabel: "seconds", Panels: []plot.Panel{panel}}
}
