package loadtest

import (
	"fmt"

	"github.com/logbook/logbook/internal/plot"
)

// timelineFigure draws a run second by second: throughput over the
// latency percentiles of the requests that ended in each second, as
// load-testing tools chart a run (Gatling's response-time and
// requests-per-second charts). extra adds lines to the throughput panel.
// The run ends within its last second, whose rate would read low: that
// second is left out.
func timelineFigure(title, rateLabel string, tl []Second, extra ...plot.Series) plot.Figure {
	if len(tl) > 1 {
		tl = tl[:len(tl)-1]
	}
	x := make([]float64, len(tl))
	rate := make([]float64, len(tl))
	p50, p95, p99 := make([]float64, len(tl)), make([]float64, len(tl)), make([]float64, len(tl))
	for i, s := range tl {
		x[i] = s.Start.Seconds() + 0.5 // the middle of its second
		rate[i] = s.Rate
		p50[i], p95[i], p99[i] = s.P50, s.P95, s.P99
	}
	return plot.Figure{
		Title:  title,
		XLabel: "seconds since the start",
		Panels: []plot.Panel{
			{YLabel: rateLabel, Series: append([]plot.Series{{Name: "answered", X: x, Y: rate}}, extra...)},
			{YLabel: "latency ms", Series: []plot.Series{
				{Name: "p50", X: x, Y: p50}, {Name: "p95", X: x, Y: p95}, {Name: "p99", X: x, Y: p99},
			}},
		},
	}
}

// Figure is the read run second by second: requests answered per second
// against the target rate (ramp, then hold), and latency percentiles.
func (r ReadResult) Figure() plot.Figure {
	var tx, ty []float64
	if n := len(r.Timeline); n > 0 {
		end := r.Timeline[n-1].Start.Seconds()
		tx = []float64{0, r.RampSeconds, max(end, r.RampSeconds)}
		ty = []float64{1, r.TargetRate, r.TargetRate}
	}
	title := fmt.Sprintf("loadtest read: %.0f req/s target, %.0fs ramp, %.0fs hold", r.TargetRate, r.RampSeconds, r.HoldSeconds)
	return timelineFigure(title, "requests/s", r.Timeline, plot.Series{Name: "target", X: tx, Y: ty, Dashed: true})
}

// Figure is the write run second by second: commands answered per second
// and latency percentiles.
func (r WriteResult) Figure() plot.Figure {
	title := fmt.Sprintf("loadtest write: %d planners, %d legs each", r.Users, r.LegsPerUser)
	return timelineFigure(title, "commands/s", r.Timeline)
}
