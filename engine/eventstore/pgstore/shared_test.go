package pgstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/internal/testenv"
)

// TestOneBatchInFlightWhileShared: alone on the log, a process keeps two
// batches in flight; once another process appends, one, and the appends
// that arrive meanwhile are committed together in the next batch rather
// than in transactions of their own. Every append is still acknowledged,
// after its commit, at its own position.
func TestOneBatchInFlightWhileShared(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	slow := func(ctx context.Context, stream string) error {
		select {
		case <-time.After(5 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	a, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 16, beforeCommit: slow})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	burst := func(round string) map[uint64]bool {
		const writers, each = 16, 8
		var wg sync.WaitGroup
		var mu sync.Mutex
		positions := make(map[uint64]bool)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					r, err := a.Append(t.Context(), fmt.Sprintf("%s-%d", round, w), eventstore.Exactly(uint64(i)),
						[]eventstore.NewEvent{{Type: "x", Data: []byte(`{}`)}})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if positions[r.FirstPosition] {
						t.Errorf("position %d acknowledged twice", r.FirstPosition)
					}
					positions[r.FirstPosition] = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(positions) != writers*each {
			t.Fatalf("%s: %d appends acknowledged of %d", round, len(positions), writers*each)
		}
		return positions
	}

	var others atomic.Int64 // the other process's appends during the shared burst
	burst("alone")
	if a.shared() {
		t.Fatal("alone on the log, the store counts it as shared")
	}
	if m := a.maxInFlight.Load(); m != 2 {
		t.Fatalf("alone: at most %d batches in flight, want 2", m)
	}

	if _, err := b.Append(t.Context(), "other", eventstore.Any, []eventstore.NewEvent{{Type: "x", Data: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !a.shared() {
		if time.Now().After(deadline) {
			t.Fatal("the other process's append was never heard of")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The other process goes on appending through the burst: a store
	// counts the log shared for a second after it last heard of another
	// process, and a burst on a loaded machine may take longer.
	stopOther := make(chan struct{})
	otherDone := make(chan struct{})
	go func() {
		defer close(otherDone)
		for {
			select {
			case <-stopOther:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := b.Append(t.Context(), "other", eventstore.Any, []eventstore.NewEvent{{Type: "x", Data: []byte(`{}`)}}); err != nil {
				t.Error(err)
				return
			}
			others.Add(1)
		}
	}()
	a.maxInFlight.Store(0)
	before := a.batches.Load()
	burst("shared")
	close(stopOther)
	<-otherDone
	if m := a.maxInFlight.Load(); m != 1 {
		t.Fatalf("shared: at most %d batches in flight, want 1", m)
	}
	if n := a.batches.Load() - before; n >= 16*8/2 {
		t.Fatalf("shared: %d batches for %d appends: not grouped", n, 16*8)
	}
	// Everything both wrote is in the log, at gap-free positions.
	head, err := a.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := 2*16*8 + 1 + uint64(others.Load()); head != want {
		t.Fatalf("head %d, want %d", head, want)
	}
}
