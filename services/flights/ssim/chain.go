package ssim

import (
	"cmp"
	"slices"
	"time"
)

// ChainByOnward groups dated legs into rotations for files that come
// without a rotation file. It returns every index of legs exactly once;
// each inner slice is one rotation in flight order, and rotations are
// ordered by the index of their first leg.
//
// A leg's successor is found as follows (the rule is also in the package
// doc):
//
//   - With onward flight fields: a leg of the onward flight (airline,
//     number, suffix) that departs from this leg's destination not before
//     this leg's arrival. SSIM counts the layover L in the file's time
//     mode, often local, whose dates DatedLeg no longer carries; what holds
//     in any time zone is that the departure is more than L−1 and less than
//     L+1 days after the arrival. Among the legs in that window, the one
//     whose UTC departure date is the UTC arrival date + L is taken, else
//     the earliest (the UTC and local dates then differ).
//   - Without: the next leg of the same flight instance (airline, number,
//     suffix, day of origin) with a higher leg sequence number departing
//     from this leg's destination not before its arrival — a multi-leg
//     flight keeps its aircraft unless the file says otherwise.
//
// A leg is the successor of at most one leg: when two legs name the same
// successor, the one earlier in legs keeps it and the other ends its
// rotation. Legs without predecessor and successor form single-leg
// rotations.
func ChainByOnward(legs []DatedLeg) [][]int {
	type flightAt struct {
		airline string
		number  int
		suffix  string
		origin  string
	}
	byFlight := make(map[flightAt][]int)
	for i := range legs {
		l := &legs[i]
		k := flightAt{l.Airline, l.Number, l.Suffix, l.Origin}
		byFlight[k] = append(byFlight[k], i)
	}
	for _, c := range byFlight {
		slices.SortFunc(c, func(a, b int) int {
			return cmp.Or(legs[a].Departure.Compare(legs[b].Departure), cmp.Compare(a, b))
		})
	}

	next := make([]int, len(legs))
	hasPred := make([]bool, len(legs))
	for i := range legs {
		l := &legs[i]
		j := -1
		if o := l.Onward; !o.IsZero() {
			j = pickOnward(legs, byFlight[flightAt{o.Airline, o.Number, o.Suffix, l.Destination}], l)
		} else {
			j = pickThrough(legs, byFlight[flightAt{l.Airline, l.Number, l.Suffix, l.Destination}], l)
		}
		next[i] = -1
		if j >= 0 && j != i && !hasPred[j] {
			next[i] = j
			hasPred[j] = true
		}
	}

	flat := make([]int, 0, len(legs))
	var out [][]int
	visited := make([]bool, len(legs))
	follow := func(i int) {
		start := len(flat)
		for k := i; k >= 0 && !visited[k]; k = next[k] {
			visited[k] = true
			flat = append(flat, k)
		}
		out = append(out, flat[start:len(flat):len(flat)])
	}
	for i := range legs {
		if !hasPred[i] {
			follow(i)
		}
	}
	// Only legs whose arrival is not after their departure (never produced
	// by Read) can form a cycle; cut it at its first leg.
	for i := range legs {
		if !visited[i] {
			follow(i)
		}
	}
	return out
}

// firstFrom returns the position in cands (sorted by departure) of the first
// leg departing at or after l's arrival.
func firstFrom(legs []DatedLeg, cands []int, l *DatedLeg) int {
	p, _ := slices.BinarySearchFunc(cands, l.Arrival, func(i int, t time.Time) int {
		return legs[i].Departure.Compare(t)
	})
	return p
}

func pickOnward(legs []DatedLeg, cands []int, l *DatedLeg) int {
	// A layover of L days in local dates puts the onward departure
	// strictly between L−1 and L+1 days after the arrival, whatever the
	// station's UTC offset.
	arr := l.Arrival.Unix()
	lay := int64(l.Onward.Layover) * secondsPerDay
	want := utcDay(arr) + l.Onward.Layover
	fallback := -1
	for _, j := range cands[firstFrom(legs, cands, l):] {
		dep := legs[j].Departure.Unix()
		switch {
		case dep-arr >= lay+secondsPerDay:
			return fallback
		case dep-arr <= lay-secondsPerDay:
			continue
		case utcDay(dep) == want:
			return j
		case fallback < 0:
			fallback = j
		}
	}
	return fallback
}

func pickThrough(legs []DatedLeg, cands []int, l *DatedLeg) int {
	// Legs of one flight instance depart within the date variation range
	// (at most 9 days after the day of origin, UTC a day more), so the scan
	// stops there rather than running through the whole season.
	last := l.DayOfOrigin.days() + 10
	for _, j := range cands[firstFrom(legs, cands, l):] {
		c := &legs[j]
		if utcDay(c.Departure.Unix()) > last {
			break
		}
		if c.DayOfOrigin == l.DayOfOrigin && c.LegSeq > l.LegSeq {
			return j
		}
	}
	return -1
}

func utcDay(unix int64) int { return int(floorDivInt64(unix, secondsPerDay)) }
