package aggregate_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/eventstore"
)

// gateStore holds appends to streams containing "slow" while hold is set.
type gateStore struct {
	eventstore.Store
	hold    atomic.Bool
	entered chan struct{}
	gate    chan struct{}
	appends atomic.Int64
}

func (g *gateStore) Append(ctx context.Context, stream string, exp eventstore.ExpectedVersion, evs []eventstore.NewEvent) (eventstore.AppendResult, error) {
	if g.hold.Load() && strings.Contains(stream, "slow") {
		g.entered <- struct{}{}
		<-g.gate
	}
	g.appends.Add(1)
	return g.Store.Append(ctx, stream, exp, evs)
}

// With the shard's cache full of busy aggregates, get() evicts the entry it
// has just loaded and returns it: the aggregate then has several live
// entries, each its own writer, and concurrent commands of one runtime fail
// with "changed concurrently".
func TestLoadDoesNotEvictWhatItLoaded(t *testing.T) {
	ctx := context.Background()
	g := &gateStore{Store: openStore(t), entered: make(chan struct{}, 1), gate: make(chan struct{})}
	rt := newRuntime(t, g, definition(), aggregate.Options{Shards: 1, CacheSize: 1})
	mustExec(t, rt, "slow", open{Owner: "o"})
	mustExec(t, rt, "hot", open{Owner: "o"})
	g.hold.Store(true)
	slowDone := make(chan error, 1)
	go func() { _, err := rt.Execute(ctx, "slow", deposit{Amount: 1}); slowDone <- err }()
	<-g.entered // "slow" is busy and its entry pinned in the 1-entry cache

	const n = 64
	var wg sync.WaitGroup
	var failed atomic.Int64
	var first error
	var once sync.Once
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := rt.Execute(ctx, "hot", deposit{Amount: 1}); err != nil {
				failed.Add(1)
				once.Do(func() { first = err })
			}
		}()
	}
	wg.Wait()
	close(g.gate)
	if err := <-slowDone; err != nil {
		t.Fatal(err)
	}
	st, _, _ := rt.State(ctx, "hot")
	if failed.Load() != 0 {
		t.Fatalf("%d of %d deposits failed in a single runtime (first: %v); balance %d", failed.Load(), n, first, st.Balance)
	}
}

type padded struct{ Pad string }

// Commands queued behind a busy aggregate are decided into one append; when
// their sum exceeds the store's append limit every one of them fails (and
// with an "unknown outcome" error), although each alone is valid.
func TestBatchStaysWithinAppendLimit(t *testing.T) {
	ctx := context.Background()
	g := &gateStore{Store: openStore(t), entered: make(chan struct{}, 1), gate: make(chan struct{})}
	def := aggregate.Definition[int, int, any]{
		Kind: "slowpad",
		Decide: func(s int, n int) ([]any, error) {
			return []any{padded{Pad: strings.Repeat("x", n)}}, nil
		},
		Evolve: func(s int, _ any) int { return s + 1 },
		Events: aggregate.NewJSONCodec[any]().Register("Padded", 1, padded{}),
	}
	rt, err := aggregate.New(g, def, aggregate.Options{Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	g.hold.Store(true)
	first := make(chan error, 1)
	go func() { _, err := rt.Execute(ctx, "a", 10); first <- err }()
	<-g.entered
	g.hold.Store(false)
	// 20 commands of 900 KB each: each fits the 1 MiB event and 16 MiB
	// append limits; together they do not. Plus one tiny command.
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	for i := range 21 {
		wg.Add(1)
		n := 900 << 10
		if i == 20 {
			n = 1
		}
		go func() {
			defer wg.Done()
			if _, err := rt.Execute(ctx, "a", n); err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		}()
	}
	// let them queue
	for {
		time.Sleep(20 * time.Millisecond)
		break
	}
	close(g.gate)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if failed.Load() > 0 {
		t.Fatalf("%d of 21 individually valid commands failed: %v", failed.Load(), firstErr.Load())
	}
}
