package notify

import (
	"context"
	"fmt"
	"sync"
)

// Users looks users up by id; an id it does not know is absent from the
// answer. It is called with at most Processor.Chunk ids at a time.
type Users interface {
	Users(ctx context.Context, ids []int64) (map[int64]*User, error)
}

// Sender delivers one batch of at most MaxBatch messages of one channel;
// an error means the batch failed for good.
type Sender func(ctx context.Context, batch []Message) error

// Counts are what one request came to. Every recipient is either
// refused (by reason) or built on one or more channels; every message
// built is either delivered or failed.
type Counts struct {
	Requested int64             `json:"requested"`
	Refused   map[Refusal]int64 `json:"refused"`
	Built     int64             `json:"built"` // messages, one per recipient and channel
	Delivered int64             `json:"delivered"`
	Failed    int64             `json:"failed"`
}

// Processor runs a request through the preference check, the build and
// delivery.
type Processor struct {
	Policy    Policy
	Templates Templates
	Chunk     int // recipients looked up at once (default 10,000)
	Senders   int // batches in flight at once (default 8)
	// OnFailed, if set, is given each batch that failed for good (to
	// keep it as a dead letter).
	OnFailed func(batch []Message, err error)
}

// Process handles request r. Delivery failures are counted, not
// returned; the error is a lookup's, a build's or the context's.
func (p *Processor) Process(ctx context.Context, r *Request, users Users, send Sender) (Counts, error) {
	chunk := p.Chunk
	if chunk <= 0 {
		chunk = 10_000
	}
	senders := p.Senders
	if senders <= 0 {
		senders = 8
	}
	counts := Counts{Requested: int64(len(r.ToUsers)), Refused: map[Refusal]int64{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	batches := make(chan []Message, senders)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for b := range batches {
				err := send(ctx, b)
				mu.Lock()
				if err != nil {
					counts.Failed += int64(len(b))
				} else {
					counts.Delivered += int64(len(b))
				}
				mu.Unlock()
				if err != nil && p.OnFailed != nil {
					p.OnFailed(b, err)
				}
			}
		})
	}
	pending := map[Channel][]Message{}
	emit := func(c Channel) bool {
		select {
		case batches <- pending[c]:
			pending[c] = make([]Message, 0, MaxBatch)
			return true
		case <-ctx.Done():
			return false
		}
	}
	seen := make(map[int64]struct{}, len(r.ToUsers))
	err := func() error {
		for start := 0; start < len(r.ToUsers); start += chunk {
			ids := r.ToUsers[start:min(start+chunk, len(r.ToUsers))]
			us, err := users.Users(ctx, ids)
			if err != nil {
				return fmt.Errorf("notify: look up users: %w", err)
			}
			for _, id := range ids {
				if _, dup := seen[id]; dup {
					counts.Refused[RefusedDuplicate]++
					continue
				}
				seen[id] = struct{}{}
				d := p.Policy.Check(us[id], r.Type)
				if d.Refused != "" {
					counts.Refused[d.Refused]++
					continue
				}
				msgs, err := p.Templates.Build(r, us[id], d)
				if err != nil {
					return err
				}
				mu.Lock()
				counts.Built += int64(len(msgs))
				mu.Unlock()
				for _, m := range msgs {
					pending[m.Channel] = append(pending[m.Channel], m)
					if len(pending[m.Channel]) == MaxBatch && !emit(m.Channel) {
						return ctx.Err()
					}
				}
			}
		}
		for _, c := range Channels {
			if len(pending[c]) > 0 && !emit(c) {
				return ctx.Err()
			}
		}
		return nil
	}()
	if err != nil {
		cancel()
	}
	close(batches)
	wg.Wait()
	return counts, err
}
