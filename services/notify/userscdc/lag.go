package userscdc

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/logbook/logbook/services/notify"
)

// Lag summarizes how long settings changes took to reach the preference
// check: from the start of the source transaction to the moment the
// view's lookup returned the new setting.
type Lag struct {
	N                   int
	Mean, P50, P99, Max time.Duration
}

func (l Lag) String() string {
	return fmt.Sprintf("%d changes: mean %v, p50 %v, p99 %v, max %v", l.N, l.Mean, l.P50, l.P99, l.Max)
}

// MeasureLag makes n settings changes in the source, one transaction
// each, switching notifications of type typ on push off and on again for
// users spread over the source's ids, and times each from the start of
// its transaction until v.Users shows it. The follower feeding v must be
// running.
func MeasureLag(ctx context.Context, src *Source, v *View, n int, typ string) (Lag, error) {
	var lo, hi int64
	if err := src.Pool.QueryRow(ctx, `SELECT coalesce(min(id), 0), coalesce(max(id), 0) FROM `+src.Table(tableUsers)).Scan(&lo, &hi); err != nil {
		return Lag{}, err
	}
	if hi == 0 {
		return Lag{}, fmt.Errorf("userscdc: measure lag: the source has no users")
	}
	samples := make([]time.Duration, 0, n)
	for i := range n {
		id := lo + int64(i*7919)%(hi-lo+1)
		enabled := (i/int(hi-lo+1))%2 == 1
		start := time.Now()
		lsn, err := src.Write(ctx, func(w *Writer) error {
			return w.SetSetting(id, typ, notify.Push, enabled)
		})
		if err != nil {
			return Lag{}, err
		}
		if err := v.WaitFor(ctx, lsn); err != nil {
			return Lag{}, err
		}
		us, err := v.Users(ctx, []int64{id})
		if err != nil {
			return Lag{}, err
		}
		took := time.Since(start)
		if u := us[id]; u != nil && u.Disabled[notify.Setting{Type: typ, Channel: notify.Push}] == enabled {
			return Lag{}, fmt.Errorf("userscdc: measure lag: user %d: the view reached %s but shows the old setting", id, lsn)
		}
		samples = append(samples, took)
	}
	slices.Sort(samples)
	var sum time.Duration
	for _, s := range samples {
		sum += s
	}
	rank := func(p float64) time.Duration { // nearest rank
		i := int(p*float64(len(samples))+0.999999) - 1
		return samples[max(0, min(i, len(samples)-1))]
	}
	return Lag{N: n, Mean: sum / time.Duration(n), P50: rank(0.5), P99: rank(0.99), Max: samples[len(samples)-1]}, nil
}
