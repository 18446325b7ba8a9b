package flights

import (
	"sort"
	"time"
)

// CheckCounts are the three validations counted over a whole schedule, as
// `flights check` reports them.
type CheckCounts struct {
	Legs                int `json:"legs"`
	Rotations           int `json:"rotations"`
	Continuity          int `json:"continuity"`           // consecutive pairs that break continuity
	MinGroundTime       int `json:"min_ground_time"`      // consecutive pairs with too short a ground time
	DuplicateDesignator int `json:"duplicate_designator"` // legs whose designator another leg shares
}

// CheckSchedule counts violations from scratch: the definition the
// incremental view must agree with, used by the generator to report what
// it injected and by tests as the reference. rotations map an id to its
// legs (any order); airportMGT holds the airports whose minimum differs
// from DefaultAirportMinGroundTime; planeMGT holds, per rotation, the
// minimum of the airplane assigned to it.
func CheckSchedule(rotations map[string][]Leg, airportMGT map[string]int, planeMGT map[string]int) CheckCounts {
	c := CheckCounts{Rotations: len(rotations)}
	designators := make(map[Designator]int)
	for id, legs := range rotations {
		sorted := append([]Leg(nil), legs...)
		sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Departure.Before(sorted[j].Departure) })
		c.Legs += len(sorted)
		for i := range sorted {
			designators[sorted[i].Designator()]++
			if i == 0 {
				continue
			}
			a, b := &sorted[i-1], &sorted[i]
			if a.Destination != b.Origin {
				c.Continuity++
			}
			need, ok := airportMGT[a.Destination]
			if !ok {
				need = DefaultAirportMinGroundTime
			}
			if p := planeMGT[id]; p > need {
				need = p
			}
			if b.Departure.Sub(a.Arrival) < time.Duration(need)*time.Minute {
				c.MinGroundTime++
			}
		}
	}
	for _, n := range designators {
		if n > 1 {
			c.DuplicateDesignator += n
		}
	}
	return c
}
