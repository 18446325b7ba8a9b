package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/projection"
)

// DeletionOption adjusts what RunDeletion expects of a store.
type DeletionOption func(*deletionConfig)

type deletionConfig struct {
	background bool
}

// BackgroundSweep tells RunDeletion that the store runs its own sweep
// beside the tests' calls to Sweep. The events the tests' sweeps report
// removed (SweepStats.Removed) are then at most, not exactly, the events
// removed, since the background pass may have reclaimed some first.
func BackgroundSweep() DeletionOption {
	return func(c *deletionConfig) { c.background = true }
}

// sweepCounts checks SweepStats: a sweep reports the streams its
// retention rules truncated and exactly the events it reclaimed, once —
// a second sweep with nothing new finds nothing.
func sweepCounts(cfg deletionConfig) func(t *testing.T, s eventstore.Store, d eventstore.Deleter, _ *Clock) {
	return func(t *testing.T, s eventstore.Store, d eventstore.Deleter, _ *Clock) {
		ctx := t.Context()
		mustAppend(t, s, "a", eventstore.NoStream, evs("A", 10)...)
		mustAppend(t, s, "b", eventstore.NoStream, evs("B", 5)...)
		mustAppend(t, s, "c", eventstore.NoStream, evs("C", 4)...)
		mustAppend(t, s, "d", eventstore.NoStream, evs("D", 3)...)
		if err := d.DeleteStream(ctx, "a", eventstore.DeleteSoft); err != nil {
			t.Fatal(err)
		}
		if err := d.TruncateStream(ctx, "b", 3); err != nil {
			t.Fatal(err)
		}
		if err := d.SetRetention(ctx, eventstore.Retention{Stream: "c", MaxCount: 1}); err != nil {
			t.Fatal(err)
		}
		const removed = 10 + 2 + 3
		st := sweep(t, d)
		checkSweep(t, cfg, "the first sweep", st, 1, removed)
		if st.Pending != 0 {
			t.Fatalf("the first sweep left %d streams pending", st.Pending)
		}
		if again := sweep(t, d); again != (eventstore.SweepStats{}) {
			t.Fatalf("a second sweep with nothing new reports %+v, want nothing", again)
		}
		if got := len(readAll(t, s)); got != 3+1+3 {
			t.Fatalf("ReadAll after the sweeps: %d events, want 7", got)
		}
	}
}

// checkSweep compares what sweeps reported with the truncations and
// removals they had to do: exactly, or at most with a background sweep.
func checkSweep(t *testing.T, cfg deletionConfig, what string, st eventstore.SweepStats, truncated, removed int) {
	t.Helper()
	if cfg.background {
		if st.Truncated > truncated || st.Removed > removed {
			t.Fatalf("%s reports %d streams truncated and %d events removed, want at most %d and %d", what, st.Truncated, st.Removed, truncated, removed)
		}
		return
	}
	if st.Truncated != truncated || st.Removed != removed {
		t.Fatalf("%s reports %d streams truncated and %d events removed, want %d and %d", what, st.Truncated, st.Removed, truncated, removed)
	}
}

// viewEvent is what the views of viewsAcrossRemovals keep of an event.
type viewEvent struct {
	Seq, Position uint64
}

// viewState is a projection's state: each stream's events as applied,
// and whether positions ever failed to increase.
type viewState struct {
	streams map[string][]viewEvent
	last    uint64
}

func newStreamView() *projection.Memory[viewState] {
	return projection.NewMemory(viewState{streams: map[string][]viewEvent{}}, func(st *viewState, ev eventstore.Event) error {
		if ev.Position <= st.last {
			return fmt.Errorf("position %d applied after %d", ev.Position, st.last)
		}
		st.last = ev.Position
		st.streams[ev.Stream] = append(st.streams[ev.Stream], viewEvent{ev.Seq, ev.Position})
		return nil
	})
}

// startRunner runs a projection.Runner of view over s until the returned
// stop is called; stop returns what Run returned.
func startRunner(t *testing.T, s eventstore.Store, view projection.View, name string) (*projection.Runner, func() error) {
	r := projection.NewRunner(s, view, projection.Options{Name: name, MaxBatch: 17})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return r, stop
}

// viewsAcrossRemovals runs a real projection (projection.Runner over a
// Memory view) from the start of the log while writers append to many
// streams, retention rules by age and by count are set and applied,
// streams are deleted and truncated, and the clock moves on. Once all is
// done and swept:
//
//   - the sweeps reported exactly the events removed (appended less what
//     the log still holds), or at most that with a background sweep;
//   - the retention rules hold: no stream under the count rule keeps more
//     than its newest 5 events, none under the age rule starts with an
//     expired one;
//   - the live view waited for the head — a removed event — without a
//     stall, applied positions in increasing order, holds every event the
//     log still holds, and of the rest only events that were removed
//     after it applied them;
//   - a view rebuilt from the log equals the log's content exactly.
func viewsAcrossRemovals(cfg deletionConfig) func(t *testing.T, s eventstore.Store, d eventstore.Deleter, clock *Clock) {
	return func(t *testing.T, s eventstore.Store, d eventstore.Deleter, clock *Clock) {
		ctx := t.Context()
		const writers, perWriter, streams = 4, 120, 12
		const maxAge, maxCount = 20 * time.Minute, 5
		// Streams 0-3 fall under the age rule, 4-7 under the count rule,
		// 8-11 are deleted or truncated by hand.
		name := func(i int) string {
			switch {
			case i < 4:
				return fmt.Sprintf("r-age-%02d", i)
			case i < 8:
				return fmt.Sprintf("r-cnt-%02d", i)
			default:
				return fmt.Sprintf("r-del-%02d", i)
			}
		}

		live := newStreamView()
		liveRunner, stopLive := startRunner(t, s, live, "live")

		var appended atomic.Int64
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 11))
				for i := range perWriter {
					batch := evs("R", 1+rng.IntN(3), "r")
					_, err := s.Append(ctx, name(rng.IntN(streams)), eventstore.Any, batch)
					switch {
					case err == nil:
						appended.Add(int64(len(batch)))
					case !errors.Is(err, eventstore.ErrStreamTombstoned):
						t.Errorf("append: %v", err)
						return
					}
					if i%10 == 9 {
						clock.Advance(time.Minute)
					}
				}
			}()
		}
		var swept eventstore.SweepStats
		add := func(st eventstore.SweepStats) {
			swept.Truncated += st.Truncated
			swept.Removed += st.Removed
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(5, 11))
			for i := range 36 {
				time.Sleep(time.Duration(1+rng.IntN(3)) * time.Millisecond)
				var err error
				switch {
				case i == 4:
					err = d.SetRetention(ctx, eventstore.Retention{Prefix: "r-age-", MaxAge: maxAge})
				case i == 8:
					err = d.SetRetention(ctx, eventstore.Retention{Prefix: "r-cnt-", MaxCount: maxCount})
				case i == 12:
					err = d.DeleteStream(ctx, name(8), eventstore.DeleteHard)
				case i%5 == 0:
					err = d.DeleteStream(ctx, name(9), eventstore.DeleteSoft)
				case i%6 == 0:
					var st eventstore.SweepStats
					st, err = d.Sweep(ctx)
					add(st)
				default:
					st := name(10 + i%2)
					v, verr := s.StreamVersion(ctx, st)
					if verr != nil {
						err = verr
						break
					}
					err = d.TruncateStream(ctx, st, v/2+1)
				}
				if err != nil {
					t.Errorf("removal step %d: %v", i, err)
					return
				}
			}
		}()
		wg.Wait()
		if t.Failed() {
			return
		}
		sweepAll := func() {
			for {
				st := sweep(t, d)
				add(st)
				if st.Pending == 0 {
					return
				}
			}
		}
		// The retention rules applied and everything reclaimed, more
		// removals are left unreclaimed: what readers see must not depend
		// on whether the sweep has run yet. The head of the log is then a
		// removed event, which no view may wait for forever.
		sweepAll()
		if v := streamVersion(t, s, name(11)); v > 1 {
			if err := d.TruncateStream(ctx, name(11), v); err != nil {
				t.Fatal(err)
			}
		}
		mustAppend(t, s, "r-tail", eventstore.NoStream, evs("T", 3, "r")...)
		appended.Add(3)
		if err := d.DeleteStream(ctx, "r-tail", eventstore.DeleteHard); err != nil {
			t.Fatal(err)
		}
		h := head(t, s)

		// What the log holds, stream by stream, and where each stream now
		// starts: its first seq held, version+1 if it holds none, past
		// everything if deleted.
		held := func() (want map[string][]viewEvent, first map[string]uint64, visible int) {
			want, first = map[string][]viewEvent{}, map[string]uint64{}
			for i := range streams + 1 {
				st := "r-tail"
				if i < streams {
					st = name(i)
				}
				got, err := readStreamE(ctx, s, st, 1)
				if errors.Is(err, eventstore.ErrStreamDeleted) || errors.Is(err, eventstore.ErrStreamTombstoned) {
					first[st] = ^uint64(0)
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				v := streamVersion(t, s, st)
				first[st] = v + 1
				if len(got) == 0 {
					continue
				}
				wantSeqs(t, st, got, got[0].Seq, v)
				first[st] = got[0].Seq
				for _, e := range got {
					want[st] = append(want[st], viewEvent{e.Seq, e.Position})
				}
				visible += len(got)
			}
			return want, first, visible
		}
		want, first, visible := held()
		// ReadAll, and a view rebuilt from the log, hold exactly that,
		// before the sweep reclaims the removals and after.
		check := func(when string) {
			fromAll := map[string][]viewEvent{}
			for _, e := range readAll(t, s) {
				fromAll[e.Stream] = append(fromAll[e.Stream], viewEvent{e.Seq, e.Position})
			}
			if fmt.Sprint(fromAll) != fmt.Sprint(want) {
				t.Fatalf("%s: ReadAll disagrees with the stream reads:\n got %v\nwant %v", when, fromAll, want)
			}
			rebuilt := newStreamView()
			r, stop := startRunner(t, s, rebuilt, "rebuilt")
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := r.WaitFor(wctx, h); err != nil {
				t.Fatalf("%s: the rebuilt view waiting for the head %d: %v", when, h, err)
			}
			if err := stop(); err != nil {
				t.Fatalf("%s: the rebuilt view stopped: %v", when, err)
			}
			rebuilt.Read(func(st *viewState, _ uint64) {
				if fmt.Sprint(st.streams) != fmt.Sprint(want) {
					t.Fatalf("%s: the view rebuilt after the removals:\n got %v\nwant %v", when, st.streams, want)
				}
			})
		}
		check("before the sweep")
		sweepAll()
		if again, _, _ := held(); fmt.Sprint(again) != fmt.Sprint(want) {
			t.Fatalf("the stream reads changed with the sweep:\n got %v\nwant %v", again, want)
		}
		check("after the sweep")

		// Every removed event was reclaimed, and counted once.
		removed := int(appended.Load()) - visible
		t.Logf("%d events appended, %d held, %d removed; the sweeps truncated %d streams and removed %d events", appended.Load(), visible, removed, swept.Truncated, swept.Removed)
		if swept.Removed > removed || !cfg.background && swept.Removed != removed {
			t.Fatalf("the sweeps report %d events removed; %d were appended and the log holds %d, so %d were removed", swept.Removed, appended.Load(), visible, removed)
		}
		if !cfg.background && swept.Truncated == 0 {
			t.Fatal("the retention rules truncated no stream: the test removed nothing by them")
		}

		// The retention rules hold at the clock's time.
		cutoff := clock.Now().Add(-maxAge)
		expired := false
		for i := range 8 {
			st := name(i)
			if i >= 4 {
				if v := streamVersion(t, s, st); len(want[st]) != int(min(v, maxCount)) {
					t.Fatalf("%s, version %d under a rule of %d: the log holds %d events", st, v, maxCount, len(want[st]))
				}
				continue
			}
			if len(want[st]) == 0 {
				expired = true
				continue
			}
			if first[st] > 1 {
				expired = true
			}
			evs := must[[]eventstore.Event](t)(s.ReadStream(ctx, st, first[st], 1))
			if evs[0].Time.Before(cutoff) {
				t.Fatalf("%s starts with seq %d committed at %v, older than the rule's cutoff %v", st, evs[0].Seq, evs[0].Time, cutoff)
			}
		}
		if !expired {
			t.Fatal("no stream under the age rule lost an event: the test expired nothing")
		}

		// The live view reaches the head, a removed event, and holds the
		// log less only what was removed after it applied it.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := liveRunner.WaitFor(wctx, h); err != nil {
			t.Fatalf("the live view waiting for the head %d (a removed event) at %d: %v", h, liveRunner.Position(), err)
		}
		if err := stopLive(); err != nil {
			t.Fatalf("the live view stopped: %v", err)
		}
		live.Read(func(st *viewState, _ uint64) {
			applied := 0
			for _, seen := range st.streams {
				applied += len(seen)
			}
			t.Logf("the live view applied %d events, %d of them removed since", applied, applied-visible)
			for stream, seen := range st.streams {
				for j, e := range seen {
					if j > 0 && e.Seq <= seen[j-1].Seq {
						t.Fatalf("the live view applied %s seq %d after seq %d", stream, e.Seq, seen[j-1].Seq)
					}
				}
				kept := 0
				for _, e := range seen {
					if e.Seq >= first[stream] {
						kept++
					}
				}
				if kept != len(want[stream]) {
					t.Fatalf("the live view holds %d of %s's events from seq %d on, the log %d", kept, stream, first[stream], len(want[stream]))
				}
				if tail := seen[len(seen)-kept:]; fmt.Sprint(tail) != fmt.Sprint(want[stream]) {
					t.Fatalf("the live view's %s ends with %v, the log holds %v", stream, tail, want[stream])
				}
			}
			for stream, evs := range want {
				if len(st.streams[stream]) == 0 {
					t.Fatalf("the live view holds nothing of %s, the log holds %d events", stream, len(evs))
				}
			}
		})
	}
}
