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
	// a follows nothing (no one waits for new events there): its next
	// append finds the log grown by a stretch not its own.
	if _, err := a.Append(t.Context(), "probe", eventstore.NoStream, []eventstore.NewEvent{{Type: "x", Data: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	if a.following.Load() {
		t.Fatal("a process that only appends follows the log")
	}
	if !a.shared() {
		t.Fatal("the other process's append was not heard of at the next append")
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
	// The probe's batch answers its append before its appender counts it
	// landed: wait for that, or the burst's first batch would count it
	// still in flight (a failure seen under a loaded CI run).
	for a.inFlight.Load() != 0 {
		time.Sleep(time.Millisecond)
	}
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
	if want := 2*16*8 + 2 + uint64(others.Load()); head != want {
		t.Fatalf("head %d, want %d", head, want)
	}
}

// TestAppendingProcessesDoNotFollow: processes that only append — a
// cluster's write nodes — do not LISTEN for each other's commits. Each
// learns of the other's stretches from the log's growth under its own
// appends, publishes them without waiting for a follower that is not
// there, and a subscription started later on either still reads
// everything both wrote, and wakes for what comes after.
func TestAppendingProcessesDoNotFollow(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	opts := Options{Schema: schema, MaxConns: 4, Poll: time.Hour}
	a, b := openProcess(t, url, opts), openProcess(t, url, opts)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const rounds = 20
	for i := range rounds {
		for _, s := range []*Store{a, b} {
			if _, err := s.Append(ctx, fmt.Sprintf("s-%p", s), eventstore.Exactly(uint64(i)), evs(1, "t")); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range []*Store{a, b} {
		if s.following.Load() {
			t.Fatal("a process that only appends follows the log")
		}
		if n := s.waitedOut.Load(); n != 0 {
			t.Errorf("%d appends waited out announceWait for a follower that does not run", n)
		}
		if !s.shared() {
			t.Error("the other process's appends were not heard of")
		}
		if k := s.knownHead(); k != 2*rounds && k != 2*rounds-1 {
			t.Errorf("the process has published up to %d of %d", k, 2*rounds)
		}
	}
	sub, err := a.Subscribe(ctx, eventstore.All(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for seen := 0; seen < 2*rounds; {
		batch, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after %d of %d events: %v", seen, 2*rounds, err)
		}
		seen += len(batch)
	}
	// Caught up, the subscription waits, which starts a's follower; once
	// it LISTENs (it then publishes the head, which b moved last), b's
	// next append wakes the subscription — by its NOTIFY, as a polls
	// hourly and appends nothing itself.
	nexts := nextLater(ctx, sub)
	for a.knownHead() < 2*rounds {
		if ctx.Err() != nil {
			t.Fatalf("a's follower never caught up: published up to %d of %d (following %v)", a.knownHead(), 2*rounds, a.following.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := b.Append(ctx, "late", eventstore.NoStream, evs(1, "t")); err != nil {
		t.Fatal(err)
	}
	got := <-nexts
	if got.err != nil || len(got.evs) != 1 || got.evs[0].Stream != "late" {
		t.Fatalf("after b's later append: %v, %v", got.evs, got.err)
	}
}

// next is what a subscription's Next returned.
type next struct {
	evs []eventstore.Event
	err error
}

// nextLater calls sub.Next in a goroutine, so that a test can act while
// it waits; its answer arrives on the channel.
func nextLater(ctx context.Context, sub eventstore.Subscription) <-chan next {
	nexts := make(chan next, 1)
	go func() {
		evs, err := sub.Next(ctx)
		nexts <- next{evs, err}
	}()
	return nexts
}
