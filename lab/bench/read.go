package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/internal/progress"
	"github.com/logbook/logbook/lab/stats"
)

// ReadResult is what `logbook bench read` reports: a full ordered read of
// the log with ReadAll, then the same through a catch-up subscription.
type ReadResult struct {
	Events                uint64  `json:"events"`
	Batch                 int     `json:"batch"`
	Seconds               float64 `json:"seconds"`
	EventsPerSec          float64 `json:"events_per_sec"`
	SubscribeSeconds      float64 `json:"subscribe_seconds"`
	SubscribeEventsPerSec float64 `json:"subscribe_events_per_sec"`
	PayloadBytesRead      uint64  `json:"payload_bytes_read"`
	PeakRSSMB             float64 `json:"peak_rss_mb"`
}

// Rows renders the result as a two-column table.
func (r ReadResult) Rows() [][2]string {
	return [][2]string{
		{"events", fmt.Sprint(r.Events)},
		{"page size", fmt.Sprint(r.Batch)},
		{"ordered read seconds", fmt.Sprintf("%.3f", r.Seconds)},
		{"ordered read events/s", fmt.Sprintf("%.0f", r.EventsPerSec)},
		{"catch-up subscription seconds", fmt.Sprintf("%.3f", r.SubscribeSeconds)},
		{"catch-up subscription events/s", fmt.Sprintf("%.0f", r.SubscribeEventsPerSec)},
		{"payload MiB read", fmt.Sprintf("%.1f", float64(r.PayloadBytesRead)/(1<<20))},
		{"peak RSS MiB", fmt.Sprintf("%.0f", r.PeakRSSMB)},
	}
}

// ReadConfig describes a read workload.
type ReadConfig struct {
	Batch    int               // events per ReadAll call
	Progress *progress.Counter // counts the events read, if not nil
}

// RunRead reads everything in the store twice: with ReadAll pages of
// Batch events, then with a subscription from position 1 until the head.
// Both passes check that positions come back gap-free.
func RunRead(ctx context.Context, store eventstore.Store, cfg ReadConfig) (ReadResult, error) {
	if cfg.Batch <= 0 {
		return ReadResult{}, errors.New("bench read: batch must be positive")
	}
	batch := cfg.Batch
	head, err := store.Head(ctx)
	if err != nil {
		return ReadResult{}, err
	}
	r := ReadResult{Events: head, Batch: batch}
	cfg.Progress.Start("events read", int(head))
	start := time.Now()
	next := uint64(1)
	for next <= head {
		evs, err := store.ReadAll(ctx, next, batch)
		if err != nil {
			return r, fmt.Errorf("bench read: %w", err)
		}
		if len(evs) == 0 {
			return r, fmt.Errorf("bench read: log ends at %d, head is %d", next-1, head)
		}
		for i := range evs {
			if evs[i].Position != next {
				return r, fmt.Errorf("bench read: expected position %d, got %d", next, evs[i].Position)
			}
			r.PayloadBytesRead += uint64(len(evs[i].Data))
			next++
		}
		cfg.Progress.Add(len(evs))
	}
	el := time.Since(start)
	r.Seconds = stats.Round(el.Seconds(), 3)
	r.EventsPerSec = stats.Round(float64(head)/el.Seconds(), 0)

	cfg.Progress.Start("events through a subscription", int(head))
	start = time.Now()
	sub, err := store.Subscribe(ctx, eventstore.All(), 1)
	if err != nil {
		return r, fmt.Errorf("bench read: %w", err)
	}
	defer sub.Close()
	next = 1
	for next <= head {
		evs, err := sub.Next(ctx)
		if err != nil {
			return r, fmt.Errorf("bench read: subscription: %w", err)
		}
		for i := range evs {
			if evs[i].Position != next {
				return r, fmt.Errorf("bench read: subscription expected position %d, got %d", next, evs[i].Position)
			}
			next++
		}
		cfg.Progress.Add(len(evs))
	}
	el = time.Since(start)
	r.SubscribeSeconds = stats.Round(el.Seconds(), 3)
	r.SubscribeEventsPerSec = stats.Round(float64(head)/el.Seconds(), 0)
	r.PeakRSSMB = stats.Round(PeakRSSMB(), 1)
	return r, nil
}
