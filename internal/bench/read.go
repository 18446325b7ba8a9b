package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
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

// RunRead reads everything in the store twice: with ReadAll pages of
// batch events, then with a subscription from position 1 until the head.
// Both passes check that positions come back gap-free.
func RunRead(ctx context.Context, store eventstore.Store, batch int) (ReadResult, error) {
	head, err := store.Head(ctx)
	if err != nil {
		return ReadResult{}, err
	}
	r := ReadResult{Events: head, Batch: batch}
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
	}
	el := time.Since(start)
	r.Seconds = round(el.Seconds(), 3)
	r.EventsPerSec = round(float64(head)/el.Seconds(), 0)

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
	}
	el = time.Since(start)
	r.SubscribeSeconds = round(el.Seconds(), 3)
	r.SubscribeEventsPerSec = round(float64(head)/el.Seconds(), 0)
	r.PeakRSSMB = round(PeakRSSMB(), 1)
	return r, nil
}
