package flights

import (
	"sync"
	"testing"
	"time"
)

var (
	seasonOnce sync.Once
	season     *Validation
)

// seasonView is the default generated season (about 400,000 legs) loaded
// straight into a view, without a store.
func seasonView(b *testing.B) *Validation {
	seasonOnce.Do(func() {
		g, err := GenerateSchedule(GenerateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		season = NewValidation()
		season.mu.Lock()
		for _, r := range g.Rotations {
			season.addLegs(r.ID, r.Legs)
		}
		season.mu.Unlock()
	})
	return season
}

// The board's three reads on a season: what one scroll or filter change
// costs the server.
func BenchmarkBoard(b *testing.B) {
	v := seasonView(b)
	lanes := v.BoardLanes(LaneFilter{})
	ids := make([]string, 0, 40)
	for _, l := range lanes.Lanes[100:140] {
		ids = append(ids, l.Rotation)
	}
	from := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	b.Run("lanes", func(b *testing.B) {
		for b.Loop() {
			v.BoardLanes(LaneFilter{})
		}
	})
	b.Run("lanes-airport", func(b *testing.B) {
		for b.Loop() {
			v.BoardLanes(LaneFilter{Airport: "JFK"})
		}
	})
	b.Run("window-40-lanes-9-days", func(b *testing.B) {
		for b.Loop() {
			v.BoardWindow(ids, from, from.Add(9*24*time.Hour))
		}
	})
	b.Run("meta", func(b *testing.B) {
		for b.Loop() {
			v.BoardMeta()
		}
	})
	b.ReportMetric(float64(v.nlegs), "legs")
}
