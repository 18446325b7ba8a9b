package projection_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/projection"
)

// closingTally is an in-memory tally that can be closed, like a view with
// storage; applying to it after Close is a test failure.
type closingTally struct {
	*projection.Memory[tally]
	gen    int
	closed atomic.Bool
}

func (c *closingTally) Close() error {
	if c.closed.Swap(true) {
		return errors.New("closed twice")
	}
	return nil
}

func TestLiveRebuildSwapsOnlyAfterCatchUp(t *testing.T) {
	st := openStore(t)
	ctx := ctxTimeout(t)
	reg := prometheus.NewRegistry()
	fill(t, st, 5, 1000, nil)

	// Instances after the first wait at gate before each batch, so that
	// the test decides when the rebuild may catch up.
	gate := make(chan struct{})
	var open sync.Once
	release := func() { open.Do(func() { close(gate) }) }
	defer release()
	var builds atomic.Int32
	var appliedAfterClose atomic.Bool
	build := func(context.Context) (*closingTally, error) {
		gen := int(builds.Add(1))
		v := &closingTally{gen: gen}
		v.Memory = projection.NewMemory(tally{}, func(s *tally, ev eventstore.Event) error {
			if v.closed.Load() {
				appliedAfterClose.Store(true)
			}
			if gen > 1 {
				<-gate
			}
			return s.add(ev)
		})
		return v, nil
	}
	live, err := projection.StartLive(ctx, st, build, projection.Options{Name: "tally", Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := live.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	first := live.Current()

	rebuilt := make(chan error, 1)
	go func() { rebuilt <- live.Rebuild(ctx) }()

	// While the new instance is held back, the old one serves and follows
	// the log.
	for i := range 20 {
		res := appendValues(t, st, "during", nil, i)
		err := live.Read(ctx, res.LastPosition, func(v *closingTally) error {
			if v != first {
				t.Errorf("query %d went to instance %d before the rebuild caught up", i, v.gen)
			}
			got, pos := snapshotOf(v.Memory)
			if pos < res.LastPosition || got["during"].Count != i+1 {
				t.Errorf("old instance at %d: %+v, want position %d", pos, got["during"], res.LastPosition)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-rebuilt:
		t.Fatalf("rebuild returned before it could catch up: %v", err)
	default:
	}
	// Rebuild runs in its own goroutine, which on a busy machine may not
	// have registered its gauge by now: wait for it, boundedly.
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		if _, ok := gauge(t, reg, "logbook_projection_lag_events", "tally.rebuild"); ok {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the rebuild's lag is not reported")
		}
	}

	// A reader inside the old instance holds off its closing.
	inside, leave := make(chan struct{}), make(chan struct{})
	readDone := make(chan error, 1)
	go func() {
		readDone <- live.Read(ctx, 0, func(v *closingTally) error {
			close(inside)
			<-leave
			if v.closed.Load() {
				return errors.New("instance closed under a reader")
			}
			return nil
		})
	}()
	<-inside
	release()
	// The swap happens, but the old instance waits for its reader.
	deadline := time.Now().Add(5 * time.Second)
	for live.Current() == first {
		if time.Now().After(deadline) {
			t.Fatal("no swap after the rebuild was released")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(5 * time.Millisecond)
	if first.closed.Load() {
		t.Fatal("old instance closed while a reader was inside")
	}
	close(leave)
	if err := <-readDone; err != nil {
		t.Fatal(err)
	}
	if err := <-rebuilt; err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if !first.closed.Load() {
		t.Fatal("old instance not closed after the swap")
	}
	second := live.Current()
	if second.gen != 2 {
		t.Fatalf("serving instance %d after the rebuild", second.gen)
	}
	got, pos := snapshotOf(second.Memory)
	head, _ := st.Head(ctx)
	if pos != head || !maps.Equal(got, expected(t, st, all, "")) {
		t.Fatalf("rebuilt instance at %d (head %d): %v, want %v", pos, head, got, expected(t, st, all, ""))
	}
	if _, ok := gauge(t, reg, "logbook_projection_lag_events", "tally.rebuild"); ok {
		t.Error("the rebuild still reports after the swap")
	}

	// The new instance follows the log; the old one does not any more.
	_, oldPos := snapshotOf(first.Memory)
	res := appendValues(t, st, "after", nil, 7)
	if err := live.WaitFor(ctx, res.LastPosition); err != nil {
		t.Fatal(err)
	}
	if got, _ := snapshotOf(live.Current().Memory); got["after"].Count != 1 {
		t.Fatalf("rebuilt instance did not follow: %+v", got["after"])
	}
	if _, p := snapshotOf(first.Memory); p != oldPos || appliedAfterClose.Load() {
		t.Fatalf("old instance moved from %d to %d after the swap (applied after close: %v)", oldPos, p, appliedAfterClose.Load())
	}
	if v, ok := gauge(t, reg, "logbook_projection_position", "tally"); !ok || v != float64(res.LastPosition) {
		t.Fatalf("position gauge %v, %v; want %d", v, ok, res.LastPosition)
	}

	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	if !second.closed.Load() {
		t.Fatal("Close did not close the serving instance")
	}
	if err := live.Read(ctx, 0, func(*closingTally) error { return nil }); !errors.Is(err, projection.ErrStopped) {
		t.Fatalf("read after close: %v", err)
	}
}

func TestLiveRebuildFailureKeepsOldInstance(t *testing.T) {
	st := openStore(t)
	ctx := ctxTimeout(t)
	fill(t, st, 3, 50, nil)
	var builds atomic.Int32
	bad := errors.New("bad build")
	build := func(context.Context) (*closingTally, error) {
		gen := int(builds.Add(1))
		v := &closingTally{gen: gen}
		v.Memory = projection.NewMemory(tally{}, func(s *tally, ev eventstore.Event) error {
			if gen > 1 && ev.Position == 30 {
				return bad
			}
			return s.add(ev)
		})
		return v, nil
	}
	quiet := slog.New(slog.DiscardHandler)
	live, err := projection.StartLive(ctx, st, build, projection.Options{Name: "tally", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	first := live.Current()
	if err := live.Rebuild(ctx); !errors.Is(err, bad) {
		t.Fatalf("rebuild: %v, want %v", err, bad)
	}
	if live.Current() != first || first.closed.Load() {
		t.Fatal("a failed rebuild replaced or closed the old instance")
	}
	res := appendValues(t, st, "x", nil, 1)
	if err := live.WaitFor(ctx, res.LastPosition); err != nil {
		t.Fatalf("old instance after a failed rebuild: %v", err)
	}
}

// TestLiveReadYourWritesAcrossRebuilds has writers read their own appends
// through Live.Read while the view is rebuilt again and again: no reader
// may get an instance behind its append, or one already closed.
func TestLiveReadYourWritesAcrossRebuilds(t *testing.T) {
	st := openStore(t)
	ctx := ctxTimeout(t)
	fill(t, st, 4, 2000, nil)
	var builds atomic.Int32
	build := func(context.Context) (*closingTally, error) {
		v := &closingTally{gen: int(builds.Add(1))}
		v.Memory = newTallyView()
		return v, nil
	}
	live, err := projection.StartLive(ctx, st, build, projection.Options{Name: "tally", MaxBatch: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := []string{"w0", "w1", "w2"}[w]
			for n := 1; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				res := appendValues(t, st, stream, nil, n)
				err := live.Read(ctx, res.LastPosition, func(v *closingTally) error {
					if v.closed.Load() {
						return errors.New("read from a closed instance")
					}
					got, pos := snapshotOf(v.Memory)
					if pos < res.LastPosition || got[stream].Count < n {
						return fmt.Errorf("instance %d at %d with %d events of %s, after append %d at %d",
							v.gen, pos, got[stream].Count, stream, n, res.LastPosition)
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	for range 3 {
		if err := live.Rebuild(ctx); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if got := live.Current().gen; got != 4 {
		t.Fatalf("serving instance %d after three rebuilds", got)
	}
	t.Logf("%d reads of own writes across 3 rebuilds", reads.Load())
}
