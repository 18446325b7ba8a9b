package loadtest

import (
	"fmt"
	"maps"
	"slices"

	"github.com/logbook/logbook/lab/plot"
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

// Figure is the skewed-demand experiment as its tables read: each sport's
// requests served per second (and control's) against the hot sport's
// multiplier, each store node's completions, and each sport's p99.
func (r TicketsResult) Figure() plot.Figure {
	x := make([]float64, len(r.Steps))
	for i, s := range r.Steps {
		x[i] = s.Multiplier
	}
	series := func(pick func(TicketsStep) map[string]float64, names []string) []plot.Series {
		var out []plot.Series
		for _, n := range names {
			s := plot.Series{Name: n, X: x, Y: make([]float64, len(r.Steps))}
			for i, st := range r.Steps {
				s.Y[i] = pick(st)[n]
			}
			out = append(out, s)
		}
		return out
	}
	// At most a dozen lines a panel: with many sports, the hot one and
	// the first cold ones stand for the rest.
	sports := r.Sports
	if len(sports) > 12 {
		sports = append([]string{r.Hot}, sports[:11]...)
		if slices.Contains(sports[1:], r.Hot) {
			sports = r.Sports[:12]
		}
	}
	var nodes []string
	if len(r.Steps) > 0 {
		nodes = slices.Sorted(maps.Keys(r.Steps[len(r.Steps)-1].Nodes))
		if len(nodes) > 12 {
			nodes = nodes[:12]
		}
	}
	panels := []plot.Panel{
		{YLabel: "served per second", Series: series(func(s TicketsStep) map[string]float64 { return s.Throughput }, append(slices.Clone(sports), "control"))},
	}
	if len(nodes) > 0 {
		panels = append(panels, plot.Panel{YLabel: "node completions per second", Series: series(func(s TicketsStep) map[string]float64 { return s.Nodes }, nodes)})
	}
	panels = append(panels, plot.Panel{YLabel: "p99 ms", Series: series(func(s TicketsStep) map[string]float64 { return s.P99 }, sports)})
	return plot.Figure{
		Title:  fmt.Sprintf("tickets, %s architecture: %s in hot demand", r.Arch, r.Hot),
		XLabel: fmt.Sprintf("%s's demand, in multiples of a cold sport's %g/s", r.Hot, r.ColdRate),
		Panels: panels,
	}
}
