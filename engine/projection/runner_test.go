package projection_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/projection"
)

func TestRunnerCatchesUpThenFollowsLive(t *testing.T) {
	st := openStore(t)
	ctx := ctxTimeout(t)
	fill(t, st, 13, 3000, nil)

	view := newTallyView()
	r := projection.NewRunner(st, view, projection.Options{Name: "tally"})
	running(t, r)
	if err := r.WaitCaughtUp(ctx); err != nil {
		t.Fatalf("catch up: %v", err)
	}
	got, pos := snapshotOf(view)
	if pos != 3000 || !maps.Equal(got, expected(t, st, all, "")) {
		t.Fatalf("after catch-up at %d: %v, want %v at 3000", pos, got, expected(t, st, all, ""))
	}

	// Live: every append becomes visible through WaitFor.
	for i := range 50 {
		res := appendValues(t, st, "live", nil, i, i+1)
		if err := r.WaitFor(ctx, res.LastPosition); err != nil {
			t.Fatalf("wait for %d: %v", res.LastPosition, err)
		}
		got, pos := snapshotOf(view)
		if pos < res.LastPosition || got["live"].Count != 2*(i+1) {
			t.Fatalf("after live append %d at %d: view at %d with %+v", i, res.LastPosition, pos, got["live"])
		}
	}
	if got, _ := snapshotOf(view); !maps.Equal(got, expected(t, st, all, "")) {
		t.Fatalf("after live appends: %v, want %v", got, expected(t, st, all, ""))
	}
	if lag, err := r.Lag(ctx); err != nil || lag != (projection.Lag{}) {
		t.Fatalf("lag of a caught-up view: %+v, %v", lag, err)
	}
}

// recording wraps a view and remembers the first position of each batch.
type recording struct {
	projection.View
	mu     sync.Mutex
	firsts []uint64
	sizes  []int
}

func (r *recording) Apply(ctx context.Context, batch []eventstore.Event) error {
	r.mu.Lock()
	r.firsts = append(r.firsts, batch[0].Position)
	r.sizes = append(r.sizes, len(batch))
	r.mu.Unlock()
	return r.View.Apply(ctx, batch)
}

// pebbleTally is a durable tally: one key per stream holding count and sum.
func openPebbleTally(t *testing.T, dir string) *projection.PebbleView {
	t.Helper()
	v, err := projection.OpenPebbleView(dir, projection.PebbleOptions{}, updateTally)
	if err != nil {
		t.Fatalf("open view: %v", err)
	}
	return v
}

func updateTally(b *pebble.Batch, events []eventstore.Event) error {
	for _, ev := range events {
		if err := addToKey(b, "t/"+ev.Stream, ev); err != nil {
			return err
		}
	}
	return nil
}

func readPebbleTally(t *testing.T, v *projection.PebbleView) (tally, uint64) {
	t.Helper()
	out := tally{}
	var at uint64
	err := v.Read(func(r pebble.Reader, pos uint64) error {
		at = pos
		iter, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte("t/"), UpperBound: []byte("t0")})
		if err != nil {
			return err
		}
		for ok := iter.First(); ok; ok = iter.Next() {
			a, err := decodeAgg(iter.Value())
			if err != nil {
				return err
			}
			out[string(iter.Key()[2:])] = a
		}
		return iter.Close()
	})
	if err != nil {
		t.Fatalf("read view: %v", err)
	}
	return out, at
}

func TestRunnerResumesFromCheckpoint(t *testing.T) {
	st := openStore(t)
	ctx := ctxTimeout(t)
	dir := t.TempDir()
	fill(t, st, 5, 2500, nil)

	view := openPebbleTally(t, dir)
	rec := &recording{View: view}
	r := projection.NewRunner(st, rec, projection.Options{Name: "tally", MaxBatch: 700})
	stop := running(t, r)
	if err := r.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, n := range rec.sizes {
		if n > 700 {
			t.Errorf("batch of %d events, MaxBatch 700", n)
		}
	}
	if err := view.Close(); err != nil {
		t.Fatal(err)
	}

	fill(t, st, 5, 400, nil)
	view = openPebbleTally(t, dir)
	defer view.Close()
	if cp, _ := view.Checkpoint(ctx); cp != 2500 {
		t.Fatalf("checkpoint after reopen %d, want 2500", cp)
	}
	rec = &recording{View: view}
	r = projection.NewRunner(st, rec, projection.Options{Name: "tally"})
	running(t, r)
	if err := r.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if len(rec.firsts) == 0 || rec.firsts[0] != 2501 {
		t.Fatalf("restarted runner's batches start at %v, want 2501", rec.firsts)
	}
	got, pos := readPebbleTally(t, view)
	if want := expected(t, st, all, ""); pos != 2900 || !maps.Equal(got, want) {
		t.Fatalf("view at %d: %v, want %v at 2900", pos, got, want)
	}
}

func TestPebbleViewAtomicBatch(t *testing.T) {
	st := openStore(t)
	ctx := ctxTimeout(t)
	dir := t.TempDir()
	fill(t, st, 3, 100, nil)
	evs, err := st.ReadAll(ctx, 1, 0)
	if err != nil {
		t.Fatal(err)
	}

	fail := errors.New("boom")
	failAt := uint64(0)
	view, err := projection.OpenPebbleView(dir, projection.PebbleOptions{Sync: true}, func(b *pebble.Batch, events []eventstore.Event) error {
		for _, ev := range events {
			if ev.Position == failAt {
				return fail // after writing the events before it to the batch
			}
			if err := addToKey(b, "t/"+ev.Stream, ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := view.Apply(ctx, evs[:40]); err != nil {
		t.Fatal(err)
	}
	failAt = 70
	if err := view.Apply(ctx, evs[40:]); !errors.Is(err, fail) {
		t.Fatalf("apply: %v, want %v", err, fail)
	}
	// Nothing of the failed batch: neither state nor checkpoint.
	if cp, _ := view.Checkpoint(ctx); cp != 40 {
		t.Fatalf("checkpoint %d after a failed batch, want 40", cp)
	}
	got, pos := readPebbleTally(t, view)
	if want := expected(t, st, 40, ""); pos != 40 || !maps.Equal(got, want) {
		t.Fatalf("view at %d: %v, want %v at 40", pos, got, want)
	}
	if err := view.Close(); err != nil {
		t.Fatal(err)
	}

	// The same after reopening, and a runner completes it exactly.
	view = openPebbleTally(t, dir)
	defer view.Close()
	if cp, _ := view.Checkpoint(ctx); cp != 40 {
		t.Fatalf("checkpoint %d after reopen, want 40", cp)
	}
	r := projection.NewRunner(st, view, projection.Options{})
	running(t, r)
	if err := r.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got, pos := readPebbleTally(t, view); pos != 100 || !maps.Equal(got, expected(t, st, all, "")) {
		t.Fatalf("view at %d: %v", pos, got)
	}

	// A directory that is not a view is refused.
	if _, err := projection.OpenPebbleView(t.TempDir()+"/x", projection.PebbleOptions{}, updateTally); err != nil {
		t.Fatalf("open a new directory: %v", err)
	}
}

func TestRunnerStopsOnApplyError(t *testing.T) {
	st := openStore(t)
	ctx := ctxTimeout(t)
	appendValues(t, st, "a", nil, 1, 2)
	res := appendValues(t, st, "a", nil, 3)
	bad := errors.New("cannot apply")
	view := projection.NewMemory(tally{}, func(s *tally, ev eventstore.Event) error {
		if ev.Position == 3 {
			return bad
		}
		return s.add(ev)
	})
	r := projection.NewRunner(st, view, projection.Options{Name: "broken"})
	stop := running(t, r)
	err := r.WaitFor(ctx, res.LastPosition)
	if !errors.Is(err, projection.ErrStopped) || !errors.Is(err, bad) {
		t.Fatalf("wait for a position the view cannot apply: %v", err)
	}
	if err := stop(); !errors.Is(err, bad) {
		t.Fatalf("run: %v, want %v", err, bad)
	}
	// Memory kept the prefix it applied, and says so.
	got, pos := snapshotOf(view)
	if pos != 2 || got["a"] != (agg{Count: 2, Sum: 3}) {
		t.Fatalf("after the failure: %v at %d", got, pos)
	}
	if err := r.Run(ctx); err == nil {
		t.Fatal("a runner ran twice")
	}
}

func TestRunnerTagFilter(t *testing.T) {
	st := openStore(t)
	ctx := ctxTimeout(t)
	for i := range 20 {
		tags := []string{"odd"}
		if i%2 == 0 {
			tags = nil
		}
		appendValues(t, st, "s", tags, i)
	}
	view := newTallyView()
	r := projection.NewRunner(st, view, projection.Options{Filter: eventstore.Tagged("odd")})
	running(t, r)
	if err := r.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := snapshotOf(view); !maps.Equal(got, expected(t, st, all, "odd")) {
		t.Fatalf("tag view %v, want %v", got, expected(t, st, all, "odd"))
	}
	// An untagged event the view never sees is still reached.
	res := appendValues(t, st, "s", nil, 100)
	if err := r.WaitFor(ctx, res.LastPosition); err != nil {
		t.Fatalf("wait for an untagged position: %v", err)
	}
	if _, pos := snapshotOf(view); pos != res.LastPosition-1 {
		t.Fatalf("tag view at %d, want %d", pos, res.LastPosition-1)
	}
	if lag, err := r.Lag(ctx); err != nil || lag != (projection.Lag{}) {
		t.Fatalf("lag of a tag view with nothing to apply: %+v, %v", lag, err)
	}
	// A position not yet written: WaitFor returns once it is.
	head, _ := st.Head(ctx)
	waited := make(chan error, 1)
	go func() { waited <- r.WaitFor(ctx, head+2) }()
	time.Sleep(10 * time.Millisecond)
	appendValues(t, st, "s", nil, 1)
	select {
	case err := <-waited:
		t.Fatalf("WaitFor(%d) returned at head %d: %v", head+2, head+1, err)
	case <-time.After(10 * time.Millisecond):
	}
	appendValues(t, st, "s", nil, 1)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}

	if err := projection.NewRunner(st, view, projection.Options{Filter: eventstore.OfStream("s")}).Run(ctx); err == nil {
		t.Fatal("a runner accepted a stream filter")
	}
}

func TestMemoryKeepsPrefixOnError(t *testing.T) {
	bad := errors.New("bad")
	m := projection.NewMemory(0, func(s *int, ev eventstore.Event) error {
		if ev.Position == 3 {
			return bad
		}
		*s++
		return nil
	})
	batch := []eventstore.Event{{Position: 1}, {Position: 2}, {Position: 3}, {Position: 4}}
	if err := m.Apply(context.Background(), batch); !errors.Is(err, bad) {
		t.Fatalf("apply: %v", err)
	}
	m.Read(func(s *int, pos uint64) {
		if *s != 2 || pos != 2 {
			t.Fatalf("state %d at %d, want 2 at 2", *s, pos)
		}
	})
}

func TestReplicasSideBySide(t *testing.T) {
	st := openStore(t)
	ctx := ctxTimeout(t)
	reg := prometheus.NewRegistry()
	fill(t, st, 7, 500, nil)

	// Two replicas, one starting before the writers, one in the middle.
	views := []*projection.Memory[tally]{newTallyView(), newTallyView()}
	runners := []*projection.Runner{
		projection.NewRunner(st, views[0], projection.Options{Name: "tally-1", Registerer: reg}),
		projection.NewRunner(st, views[1], projection.Options{Name: "tally-2", Registerer: reg, MaxBatch: 3}),
	}
	running(t, runners[0])
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				appendValues(t, st, []string{"a", "b", "c"}[(w+i)%3], nil, w*1000+i)
			}
		}()
	}
	time.Sleep(5 * time.Millisecond)
	running(t, runners[1])
	wg.Wait()
	head, _ := st.Head(ctx)
	for i, r := range runners {
		if err := r.WaitFor(ctx, head); err != nil {
			t.Fatalf("replica %d: %v", i+1, err)
		}
	}
	a, posA := snapshotOf(views[0])
	b, posB := snapshotOf(views[1])
	if posA != head || posB != head || !maps.Equal(a, b) || !maps.Equal(a, expected(t, st, all, "")) {
		t.Fatalf("replicas differ: %v at %d, %v at %d; log %v at %d", a, posA, b, posB, expected(t, st, all, ""), head)
	}
	for _, name := range []string{"tally-1", "tally-2"} {
		if v, ok := gauge(t, reg, "logbook_projection_position", name); !ok || v != float64(head) {
			t.Errorf("position gauge of %s: %v, %v; want %d", name, v, ok, head)
		}
	}
	// Two replicas with one name on one registry would hide each other.
	dup := projection.NewRunner(st, newTallyView(), projection.Options{Name: "tally-1", Registerer: reg})
	if err := dup.Run(ctx); err == nil {
		t.Fatal("a second view named tally-1 reported to the same registry")
	}
}

func TestLagMetrics(t *testing.T) {
	st := openStore(t)
	ctx := ctxTimeout(t)
	reg := prometheus.NewRegistry()
	fill(t, st, 3, 100, nil)
	time.Sleep(20 * time.Millisecond) // so that the oldest event is visibly old

	gate := make(chan struct{})
	var open sync.Once
	release := func() { open.Do(func() { close(gate) }) }
	defer release() // else a failing test leaves the runner stuck
	view := projection.NewMemory(tally{}, func(s *tally, ev eventstore.Event) error {
		<-gate
		return s.add(ev)
	})
	r := projection.NewRunner(st, view, projection.Options{Name: "slow", Registerer: reg})
	running(t, r)
	deadline := time.Now().Add(5 * time.Second)
	for {
		events, ok := gauge(t, reg, "logbook_projection_lag_events", "slow")
		seconds, _ := gauge(t, reg, "logbook_projection_lag_seconds", "slow")
		if ok && events == 100 && seconds >= 0.02 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lag while stuck: %v events (registered %v), %v s; want 100 events, >= 0.02 s", events, ok, seconds)
		}
		time.Sleep(time.Millisecond)
	}
	release()
	if err := r.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	events, _ := gauge(t, reg, "logbook_projection_lag_events", "slow")
	seconds, _ := gauge(t, reg, "logbook_projection_lag_seconds", "slow")
	pos, _ := gauge(t, reg, "logbook_projection_position", "slow")
	if events != 0 || seconds != 0 || pos != 100 {
		t.Fatalf("after catching up: lag %v events, %v s, position %v", events, seconds, pos)
	}
}

// A view whose apply panics on a stored event stops its runner with an
// error that names the positions; the process goes on.
func TestRunnerStopsOnApplyPanic(t *testing.T) {
	st := openStore(t)
	ctx := ctxTimeout(t)
	res := appendValues(t, st, "a", nil, 1, 2, 3)
	view := projection.NewMemory(tally{}, func(s *tally, ev eventstore.Event) error {
		if ev.Position == 2 {
			panic("poison event")
		}
		return s.add(ev)
	})
	r := projection.NewRunner(st, view, projection.Options{Name: "poisoned"})
	stop := running(t, r)
	err := r.WaitFor(ctx, res.LastPosition)
	if !errors.Is(err, projection.ErrStopped) || !errors.Is(err, projection.ErrPanic) {
		t.Fatalf("wait past a poison event: %v", err)
	}
	if err := stop(); !errors.Is(err, projection.ErrPanic) || !strings.Contains(err.Error(), "poisoned") {
		t.Fatalf("run: %v", err)
	}
}

// Events removed from the log (a deleted stream at its end) leave a hole
// the runner never applies: waiting for the head still returns, and the
// view holds the effect of the events still in the log.
func TestWaitForPastRemovedEvents(t *testing.T) {
	st := openStore(t)
	ctx := ctxTimeout(t)
	fill(t, st, 5, 200, nil)
	appendValues(t, st, "gone", nil, 1, 2, 3)
	if err := st.DeleteStream(ctx, "gone", eventstore.DeleteSoft); err != nil {
		t.Fatal(err)
	}
	view := newTallyView()
	r := projection.NewRunner(st, view, projection.Options{Name: "tally"})
	running(t, r)
	start := time.Now()
	if err := r.WaitCaughtUp(ctx); err != nil {
		t.Fatalf("catch up to a head whose events were removed: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("catching up took %v", d)
	}
	got, _ := snapshotOf(view)
	if _, ok := got["gone"]; ok || !maps.Equal(got, expected(t, st, all, "")) {
		t.Fatalf("view %v, want %v (without the removed stream)", got, expected(t, st, all, ""))
	}
}
