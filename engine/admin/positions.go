package admin

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// ViewPositions is an Options.Positions that reads every view's position
// and lag from g, the registry the views of a process report to: each
// projection.Runner (and so each projection.Live view) with a
// Registerer publishes logbook_projection_position, _lag_events and
// _lag_seconds labelled with its name, so every view a service runs is
// there without a registry of its own. Gathering measures the lags then
// (each a read of the store's head).
func ViewPositions(g prometheus.Gatherer) func(context.Context) ([]Position, error) {
	return func(context.Context) ([]Position, error) {
		mfs, err := g.Gather()
		if err != nil && len(mfs) == 0 {
			return nil, fmt.Errorf("admin: gathering the views' positions: %w", err)
		}
		byName := map[string]*Position{}
		var order []string
		for _, mf := range mfs {
			set := map[string]func(*Position, float64){
				"logbook_projection_position":    func(p *Position, v float64) { p.Position = uint64(v) },
				"logbook_projection_lag_events":  func(p *Position, v float64) { p.LagEvents = uint64(v) },
				"logbook_projection_lag_seconds": func(p *Position, v float64) { p.LagSeconds = v },
			}[mf.GetName()]
			if set == nil {
				continue
			}
			for _, m := range mf.GetMetric() {
				name := ""
				for _, l := range m.GetLabel() {
					if l.GetName() == "view" {
						name = l.GetValue()
					}
				}
				if name == "" || m.GetGauge() == nil {
					continue
				}
				p, ok := byName[name]
				if !ok {
					p = &Position{Name: name}
					byName[name] = p
					order = append(order, name)
				}
				set(p, m.GetGauge().GetValue())
			}
		}
		out := make([]Position, 0, len(order))
		for _, n := range order {
			out = append(out, *byName[n])
		}
		return out, nil
	}
}
