package projection_test

import (
	"context"
	"errors"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/projection"
)

// flakyStore fails reads while down is set, as a shared store's database
// does while it restarts.
type flakyStore struct {
	eventstore.Store
	down     atomic.Bool
	failures atomic.Int64
}

var errDown = errors.New("database restarting")

func (s *flakyStore) Subscribe(ctx context.Context, f eventstore.Filter, from uint64) (eventstore.Subscription, error) {
	if s.down.Load() {
		s.failures.Add(1)
		return nil, errDown
	}
	sub, err := s.Store.Subscribe(ctx, f, from)
	return &flakySub{Subscription: sub, s: s}, err
}

type flakySub struct {
	eventstore.Subscription
	s *flakyStore
}

func (f *flakySub) Next(ctx context.Context) ([]eventstore.Event, error) {
	if f.s.down.Load() {
		f.s.failures.Add(1)
		return nil, errDown
	}
	return f.Subscription.Next(ctx)
}

// TestRunnerRetriesFailedReads: a view whose store fails for a while
// resumes where it was, with nothing lost or applied twice, instead of
// stopping for good; a closed store still ends it.
func TestRunnerRetriesFailedReads(t *testing.T) {
	inner := openStore(t)
	st := &flakyStore{Store: inner}
	ctx := ctxTimeout(t)
	fill(t, st, 5, 500, nil)
	view := newTallyView()
	r := projection.NewRunner(st, view, projection.Options{Name: "tally"})
	stop := running(t, r)
	if err := r.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	st.down.Store(true)
	res := fill(t, inner, 5, 300, nil) // written while the view cannot read
	for st.failures.Load() < 3 {
		if err := ctx.Err(); err != nil {
			t.Fatal("the runner never tried to read again")
		}
		if r.Err() != nil {
			t.Fatalf("the runner stopped on a read failure: %v", r.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	st.down.Store(false)
	if err := r.WaitFor(ctx, res.LastPosition); err != nil {
		t.Fatalf("after the store came back: %v", err)
	}
	if got, _ := snapshotOf(view); !maps.Equal(got, expected(t, inner, all, "")) {
		t.Fatalf("view %v, want %v", got, expected(t, inner, all, ""))
	}
	// A closed store is not a failure to wait out.
	inner.Close()
	for r.Err() == nil {
		if ctx.Err() != nil {
			t.Fatal("the runner kept retrying a closed store")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !errors.Is(r.Err(), eventstore.ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", r.Err())
	}
	_ = stop()
}
