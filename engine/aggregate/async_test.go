package aggregate_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/eventstore"
)

// asyncCounter counts the appends a runtime makes each way.
type asyncCounter struct {
	eventstore.Store
	async, plain atomic.Int64
}

func (s *asyncCounter) Append(ctx context.Context, stream string, expect eventstore.ExpectedVersion, events []eventstore.NewEvent) (eventstore.AppendResult, error) {
	s.plain.Add(1)
	return s.Store.Append(ctx, stream, expect, events)
}

func (s *asyncCounter) AppendAsync(stream string, expect eventstore.ExpectedVersion, events []eventstore.NewEvent, done func(eventstore.AppendResult, error)) {
	s.async.Add(1)
	eventstore.AppendAsync(s.Store, stream, expect, events, done)
}

// TestCommandsAppendAsynchronously: a runtime on a store that is an
// eventstore.AsyncAppender hands it every command's append, with no
// goroutine waiting on Append, and the commands' answers and states are
// what the store holds: many accounts at once, several commands each.
func TestCommandsAppendAsynchronously(t *testing.T) {
	store := &asyncCounter{Store: openStore(t)}
	rt := newRuntime(t, store, definition(), aggregate.Options{})
	const accounts, deposits = 40, 25
	ids := make([]string, accounts)
	for i := range ids {
		r, err := rt.Create(context.Background(), open{Owner: "o"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			for range deposits {
				if _, err := rt.Execute(context.Background(), id, deposit{Amount: 2}); err != nil {
					t.Errorf("deposit on %s: %v", id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := store.plain.Load(); n != 0 {
		t.Errorf("%d appends through Append, want none", n)
	}
	if n := store.async.Load(); n < accounts+1 {
		t.Errorf("%d appends through AppendAsync, want at least %d", n, accounts+1)
	}
	for _, id := range ids {
		st, v, err := rt.State(context.Background(), id)
		if err != nil || st.Balance != 2*deposits || v != deposits+1 {
			t.Fatalf("%s: balance %d at version %d (%v); want %d at %d", id, st.Balance, v, err, 2*deposits, deposits+1)
		}
		evs, err := store.ReadStream(context.Background(), rt.Stream(id), 1, 100)
		if err != nil || len(evs) != deposits+1 {
			t.Fatalf("%s: %d events stored (%v), want %d", id, len(evs), err, deposits+1)
		}
	}
}

// TestStateReadSeesAnsweredCommand: a command is answered as soon as its
// append is durable, before the shard has applied the events to the
// cached state; a state read sent after the answer must still see them.
// Many accounts at once, each reading its balance after every deposit.
func TestStateReadSeesAnsweredCommand(t *testing.T) {
	store := openStore(t)
	rt := newRuntime(t, store, definition(), aggregate.Options{})
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			r, err := rt.Create(ctx, open{Owner: "o"})
			if err != nil {
				t.Error(err)
				return
			}
			for i := 1; i <= 2000; i++ {
				res, err := rt.Execute(ctx, r.ID, deposit{Amount: 1})
				if err != nil {
					t.Error(err)
					return
				}
				st, v, err := rt.State(ctx, r.ID)
				if err != nil || st.Balance < i || v < res.Version {
					t.Errorf("after deposit %d (answered at version %d) the state read has balance %d at version %d (%v)", i, res.Version, st.Balance, v, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
