package backend

import (
	"context"
	"errors"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

// Retain applies a retention rule to one stream of s: it works out how
// far r lets the stream be truncated at time now — past all but the
// newest r.MaxCount events, past every event committed before now minus
// r.MaxAge — and, if that is past the stream's first visible event,
// truncates it there with truncate (the backend's TruncateStream). It
// reports whether it truncated. Deleted streams are left alone. A
// backend's sweep calls it for every stream a rule matches.
func Retain(ctx context.Context, s eventstore.Store, truncate func(ctx context.Context, stream string, before uint64) error, r eventstore.Retention, stream string, now time.Time) (bool, error) {
	first, err := s.ReadStream(ctx, stream, 1, 1)
	if errors.Is(err, eventstore.ErrStreamDeleted) || errors.Is(err, eventstore.ErrStreamTombstoned) {
		return false, nil
	}
	if err != nil || len(first) == 0 {
		return false, err
	}
	from := first[0].Seq
	version, err := s.StreamVersion(ctx, stream)
	if err != nil {
		return false, err
	}
	target := from
	if r.MaxCount > 0 && version > r.MaxCount {
		target = max(target, version-r.MaxCount+1)
	}
	if r.MaxAge > 0 {
		cutoff := now.Add(-r.MaxAge)
		at := target
	scan:
		for at <= version {
			evs, err := s.ReadStream(ctx, stream, at, 1000)
			if err != nil {
				return false, err
			}
			if len(evs) == 0 {
				break
			}
			for _, ev := range evs {
				if !ev.Time.Before(cutoff) {
					at = ev.Seq
					break scan
				}
				at = ev.Seq + 1
			}
		}
		target = max(target, at)
	}
	if target <= from {
		return false, nil
	}
	err = truncate(ctx, stream, target)
	if errors.Is(err, eventstore.ErrStreamTombstoned) {
		return false, nil // hard-deleted meanwhile
	}
	return err == nil, err
}

// SweepPause spaces a background sweep's batches: after a batch that
// removed n events it waits long enough to keep to rate events a second.
// It returns early with ctx's error, or with eventstore.ErrClosed once
// closing is closed (the store's Close).
func SweepPause(ctx context.Context, closing <-chan struct{}, n, rate int) error {
	if ctx == nil {
		ctx = context.Background()
	}
	d := time.Duration(float64(n) / float64(rate) * float64(time.Second))
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-closing:
		return eventstore.ErrClosed
	}
}
