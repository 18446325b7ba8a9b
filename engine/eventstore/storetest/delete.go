package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

// Clock is a settable time for the expiry tests: a backend's opener
// hands Now to its store as the store's clock (commit times and the age
// of retention rules).
type Clock struct {
	mu sync.Mutex
	t  time.Time
	// onNow, if set, is called (outside mu) by every Now: a test uses it
	// to hold a sweep, which reads the clock for each stream a retention
	// rule matches, between two streams.
	onNow func()
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	t, hook := c.t, c.onNow
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	return t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// DeleterOpener returns a fresh, empty store for one deletion test whose
// clock is clock.Now. The store must implement eventstore.Deleter; its
// background sweep should be off (or slow), since the tests call Sweep.
type DeleterOpener = func(t *testing.T, clock *Clock) eventstore.Store

// RunDeletion runs the conformance tests of eventstore.Deleter: soft and
// hard deletes, truncation, retention by count and by age, and the
// global order with holes, under concurrent appends.
//
// The tests also run a projection.Runner over the store while it removes
// events, and check what the sweeps report (SweepStats). A store whose
// background sweep runs during the tests is opened with BackgroundSweep.
func RunDeletion(t *testing.T, open DeleterOpener, opts ...DeletionOption) {
	t.Helper()
	var cfg deletionConfig
	for _, o := range opts {
		o(&cfg)
	}
	for _, tc := range deletionTests(cfg) {
		t.Run(tc.name, func(t *testing.T) {
			clock := &Clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
			s := open(t, clock)
			d, ok := s.(eventstore.Deleter)
			if !ok {
				t.Fatalf("storetest: %T does not implement eventstore.Deleter", s)
			}
			tc.fn(t, s, d, clock)
		})
	}
}

type deletionCase struct {
	name string
	fn   func(t *testing.T, s eventstore.Store, d eventstore.Deleter, clock *Clock)
}

func sweep(t *testing.T, d eventstore.Deleter) eventstore.SweepStats {
	t.Helper()
	st, err := d.Sweep(t.Context())
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	return st
}

// eachSweep runs check before the sweep and after it: a removal must look
// the same whether its space is reclaimed yet or not.
func eachSweep(t *testing.T, d eventstore.Deleter, check func(when string)) {
	t.Helper()
	check("before the sweep")
	sweep(t, d)
	check("after the sweep")
}

func streamsOf(evs []eventstore.Event) map[string][]uint64 {
	m := map[string][]uint64{}
	for _, e := range evs {
		m[e.Stream] = append(m[e.Stream], e.Seq)
	}
	return m
}

func deletionTests(cfg deletionConfig) []deletionCase {
	return []deletionCase{
		{"SoftDeleteThenRecreate", func(t *testing.T, s eventstore.Store, d eventstore.Deleter, _ *Clock) {
			ctx := t.Context()
			mustAppend(t, s, "a", eventstore.NoStream, evs("A", 3, "red")...)
			mustAppend(t, s, "b", eventstore.NoStream, evs("B", 2, "red")...)
			if err := d.DeleteStream(ctx, "a", eventstore.DeleteSoft); err != nil {
				t.Fatalf("DeleteStream soft: %v", err)
			}
			eachSweep(t, d, func(when string) {
				_, err := s.ReadStream(ctx, "a", 1, 10)
				wantErrIs(t, "ReadStream of a soft-deleted stream "+when, err, eventstore.ErrStreamDeleted)
				_, err = s.ReadStreamBackward(ctx, "a", 0, 10)
				wantErrIs(t, "ReadStreamBackward of a soft-deleted stream "+when, err, eventstore.ErrStreamDeleted)
				if v := streamVersion(t, s, "a"); v != 3 {
					t.Fatalf("%s: version of the soft-deleted stream = %d, want 3 (kept for recreation)", when, v)
				}
				all := readAll(t, s)
				if got := streamsOf(all); len(got["a"]) != 0 || !slices.Equal(got["b"], []uint64{1, 2}) {
					t.Fatalf("%s: ReadAll shows %v, want only b's 1, 2", when, got)
				}
				wantPositions(t, "ReadAll "+when, all, 4, 5)
				if tagged := readTag(t, s, "red", 1); len(tagged) != 2 || tagged[0].Stream != "b" {
					t.Fatalf("%s: ReadTag shows %d events, want b's 2", when, len(tagged))
				}
				if names := listStreams(t, s); !slices.Equal(names, []string{"b"}) {
					t.Fatalf("%s: ListStreams = %q, want [b]", when, names)
				}
				if h := head(t, s); h != 5 {
					t.Fatalf("%s: Head = %d, want 5: removing events does not move the head", when, h)
				}
			})
			_, err := s.Append(ctx, "a", eventstore.NoStream, evs("A", 1))
			wantConflict(t, "append NoStream to a soft-deleted stream", err, "a", eventstore.NoStream, 3)
			res := mustAppend(t, s, "a", eventstore.Exactly(3), evs("A2", 2)...)
			if res.FirstSeq != 4 || res.FirstPosition != 6 {
				t.Fatalf("recreating append = %+v, want seq 4 at position 6: numbering continues, positions are not reused", res)
			}
			eachSweep(t, d, func(when string) {
				got := readStream(t, s, "a")
				wantSeqs(t, "the recreated stream "+when, got, 4, 5)
				back, err := s.ReadStreamBackward(ctx, "a", 0, 10)
				if err != nil || len(back) != 2 || back[0].Seq != 5 {
					t.Fatalf("%s: ReadStreamBackward of the recreated stream = %d events, %v", when, len(back), err)
				}
				if names := listStreams(t, s); !slices.Equal(names, []string{"a", "b"}) {
					t.Fatalf("%s: ListStreams = %q, want [a b]", when, names)
				}
			})
		}},
		{"HardDeleteForbidsAppend", func(t *testing.T, s eventstore.Store, d eventstore.Deleter, _ *Clock) {
			ctx := t.Context()
			mustAppend(t, s, "a", eventstore.NoStream, evs("A", 3)...)
			if err := s.SaveSnapshot(ctx, eventstore.Snapshot{Stream: "a", Seq: 3, Data: []byte("state")}); err != nil {
				t.Fatal(err)
			}
			if err := d.DeleteStream(ctx, "a", eventstore.DeleteHard); err != nil {
				t.Fatalf("DeleteStream hard: %v", err)
			}
			eachSweep(t, d, func(when string) {
				for _, expect := range []eventstore.ExpectedVersion{eventstore.Any, eventstore.NoStream, eventstore.Exactly(3)} {
					_, err := s.Append(ctx, "a", expect, evs("A", 1))
					wantErrIs(t, fmt.Sprintf("append (%v) to a hard-deleted stream %s", expect, when), err, eventstore.ErrStreamTombstoned)
				}
				_, err := s.ReadStream(ctx, "a", 1, 10)
				wantErrIs(t, "ReadStream of a hard-deleted stream "+when, err, eventstore.ErrStreamTombstoned)
				wantErrIs(t, "soft delete of a hard-deleted stream "+when, d.DeleteStream(ctx, "a", eventstore.DeleteSoft), eventstore.ErrStreamTombstoned)
				wantErrIs(t, "truncating a hard-deleted stream "+when, d.TruncateStream(ctx, "a", 2), eventstore.ErrStreamTombstoned)
				if err := d.DeleteStream(ctx, "a", eventstore.DeleteHard); err != nil {
					t.Fatalf("%s: a second hard delete: %v", when, err)
				}
				if _, ok, err := s.LoadSnapshot(ctx, "a"); ok || err != nil {
					t.Fatalf("%s: the hard-deleted stream's snapshot is still there (%v, %v)", when, ok, err)
				}
				if len(readAll(t, s)) != 0 {
					t.Fatalf("%s: ReadAll still shows the hard-deleted stream", when)
				}
			})
			res := mustAppend(t, s, "b", eventstore.NoStream, evs("B", 1)...)
			if res.FirstPosition != 4 {
				t.Fatalf("append after the removal at position %d, want 4", res.FirstPosition)
			}
		}},
		{"Truncate", func(t *testing.T, s eventstore.Store, d eventstore.Deleter, _ *Clock) {
			ctx := t.Context()
			for i := range 5 {
				mustAppend(t, s, "a", eventstore.Exactly(uint64(i)), ev("A", fmt.Sprint(i), "t"))
				mustAppend(t, s, "b", eventstore.Exactly(uint64(i)), ev("B", fmt.Sprint(i), "t"))
			}
			if err := d.TruncateStream(ctx, "a", 3); err != nil {
				t.Fatalf("TruncateStream: %v", err)
			}
			if err := d.TruncateStream(ctx, "a", 2); err != nil {
				t.Fatalf("TruncateStream to an earlier point: %v", err)
			}
			eachSweep(t, d, func(when string) {
				wantSeqs(t, "truncated stream "+when, readStream(t, s, "a"), 3, 5)
				if got := must[[]eventstore.Event](t)(s.ReadStream(ctx, "a", 4, 10)); len(got) != 2 || got[0].Seq != 4 {
					t.Fatalf("%s: ReadStream from 4 = %d events", when, len(got))
				}
				back := must[[]eventstore.Event](t)(s.ReadStreamBackward(ctx, "a", 0, 10))
				if len(back) != 3 || back[0].Seq != 5 || back[2].Seq != 3 {
					t.Fatalf("%s: ReadStreamBackward of the truncated stream = %v", when, streamsOf(back))
				}
				want := map[string][]uint64{"a": {3, 4, 5}, "b": {1, 2, 3, 4, 5}}
				if got := streamsOf(readAll(t, s)); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s: ReadAll = %v, want %v", when, got, want)
				}
				if got := streamsOf(readTag(t, s, "t", 1)); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s: ReadTag = %v, want %v", when, got, want)
				}
				if v := streamVersion(t, s, "a"); v != 5 {
					t.Fatalf("%s: version %d, want 5", when, v)
				}
			})
			// A truncation point past the end empties the stream but does
			// not hide what is appended later; an empty stream is not a
			// deleted one.
			if err := d.TruncateStream(ctx, "a", 100); err != nil {
				t.Fatal(err)
			}
			eachSweep(t, d, func(when string) {
				if got, err := s.ReadStream(ctx, "a", 1, 10); err != nil || len(got) != 0 {
					t.Fatalf("%s: fully truncated stream reads %d events, %v; want none and no error", when, len(got), err)
				}
			})
			mustAppend(t, s, "a", eventstore.Exactly(5), ev("A", "later"))
			wantSeqs(t, "the stream appended to after a truncation past its end", readStream(t, s, "a"), 6, 6)
			wantErrIs(t, "TruncateStream with a bad stream id", d.TruncateStream(ctx, "", 1), eventstore.ErrInvalidStreamID)
			wantErrIs(t, "DeleteStream with a bad stream id", d.DeleteStream(ctx, "a\x00", eventstore.DeleteSoft), eventstore.ErrInvalidStreamID)
		}},
		{"RetentionByCount", func(t *testing.T, s eventstore.Store, d eventstore.Deleter, _ *Clock) {
			ctx := t.Context()
			mustAppend(t, s, "order-1", eventstore.NoStream, evs("O", 5)...)
			mustAppend(t, s, "order-2", eventstore.NoStream, evs("O", 1)...)
			mustAppend(t, s, "orders", eventstore.NoStream, evs("O", 5)...)
			mustAppend(t, s, "other", eventstore.NoStream, evs("X", 5)...)
			mustAppend(t, s, "kept", eventstore.NoStream, evs("K", 4)...)
			rules := []eventstore.Retention{{Prefix: "order-", MaxCount: 2}, {Stream: "kept", MaxCount: 3}}
			for _, r := range rules {
				if err := d.SetRetention(ctx, r); err != nil {
					t.Fatalf("SetRetention(%+v): %v", r, err)
				}
			}
			got, err := d.Retentions(ctx)
			if err != nil || len(got) != 2 {
				t.Fatalf("Retentions = %+v, %v; want the 2 rules set", got, err)
			}
			if n := sweep(t, d).Truncated; n > 2 {
				t.Fatalf("sweep truncated %d streams, want at most 2 (order-1, kept; the background pass may have been first)", n)
			}
			wantSeqs(t, "order-1 kept to 2", readStream(t, s, "order-1"), 4, 5)
			wantSeqs(t, "order-2 under its limit", readStream(t, s, "order-2"), 1, 1)
			wantSeqs(t, "orders, not under the prefix", readStream(t, s, "orders"), 1, 5)
			wantSeqs(t, "other", readStream(t, s, "other"), 1, 5)
			wantSeqs(t, "kept, its own rule", readStream(t, s, "kept"), 2, 4)
			// The rule goes on applying to new events.
			mustAppend(t, s, "order-1", eventstore.Exactly(5), evs("O", 2)...)
			sweep(t, d)
			wantSeqs(t, "order-1 after more appends", readStream(t, s, "order-1"), 6, 7)
			// Clearing a rule.
			if err := d.SetRetention(ctx, eventstore.Retention{Prefix: "order-"}); err != nil {
				t.Fatal(err)
			}
			if got, _ := d.Retentions(ctx); len(got) != 1 || got[0].Stream != "kept" {
				t.Fatalf("Retentions after clearing = %+v, want only kept's", got)
			}
			mustAppend(t, s, "order-1", eventstore.Exactly(7), evs("O", 2)...)
			sweep(t, d)
			wantSeqs(t, "order-1 once its rule is cleared", readStream(t, s, "order-1"), 6, 9)
			wantErrIs(t, "a rule with both stream and prefix", d.SetRetention(ctx, eventstore.Retention{Stream: "a", Prefix: "b", MaxCount: 1}), eventstore.ErrInvalidRetention)
			wantErrIs(t, "a rule with neither", d.SetRetention(ctx, eventstore.Retention{MaxCount: 1}), eventstore.ErrInvalidRetention)
			wantErrIs(t, "a negative age", d.SetRetention(ctx, eventstore.Retention{Stream: "a", MaxAge: -time.Second}), eventstore.ErrInvalidRetention)
		}},
		{"ClearedRuleStopsASweepInFlight", clearedRuleStopsASweep(cfg)},
		{"RetentionByAge", func(t *testing.T, s eventstore.Store, d eventstore.Deleter, clock *Clock) {
			ctx := t.Context()
			mustAppend(t, s, "log-a", eventstore.NoStream, evs("L", 3)...)
			mustAppend(t, s, "log-b", eventstore.NoStream, evs("L", 1)...)
			clock.Advance(90 * time.Minute)
			mustAppend(t, s, "log-a", eventstore.Exactly(3), evs("L", 2)...)
			if err := d.SetRetention(ctx, eventstore.Retention{Prefix: "log-", MaxAge: time.Hour}); err != nil {
				t.Fatal(err)
			}
			sweep(t, d)
			wantSeqs(t, "log-a: the events older than an hour expired", readStream(t, s, "log-a"), 4, 5)
			if got, err := s.ReadStream(ctx, "log-b", 1, 10); err != nil || len(got) != 0 {
				t.Fatalf("log-b, all expired: %d events, %v", len(got), err)
			}
			if v := streamVersion(t, s, "log-b"); v != 1 {
				t.Fatalf("log-b's version after expiry = %d, want 1", v)
			}
			clock.Advance(60 * time.Minute) // the newer events are an hour old, not older
			sweep(t, d)
			wantSeqs(t, "log-a at exactly the age limit", readStream(t, s, "log-a"), 4, 5)
			clock.Advance(time.Minute)
			sweep(t, d)
			if got := readAll(t, s); len(got) != 0 {
				t.Fatalf("every event has expired, ReadAll shows %d", len(got))
			}
		}},
		{"SubscriptionsSkipRemoved", func(t *testing.T, s eventstore.Store, d eventstore.Deleter, _ *Clock) {
			ctx := t.Context()
			mustAppend(t, s, "gone", eventstore.NoStream, evs("G", 10, "t")...)
			mustAppend(t, s, "stay", eventstore.NoStream, evs("S", 2, "t")...)
			mustAppend(t, s, "gone-too", eventstore.NoStream, evs("G", 10, "t")...) // the tail of the log
			if err := d.DeleteStream(ctx, "gone", eventstore.DeleteSoft); err != nil {
				t.Fatal(err)
			}
			if err := d.DeleteStream(ctx, "gone-too", eventstore.DeleteHard); err != nil {
				t.Fatal(err)
			}
			var subs []eventstore.Subscription
			for _, f := range []eventstore.Filter{eventstore.All(), eventstore.Tagged("t")} {
				sub, err := s.Subscribe(ctx, f, 1)
				if err != nil {
					t.Fatal(err)
				}
				defer sub.Close()
				got := nextWithin(t, sub, 5*time.Second)
				if len(got) != 2 || got[0].Position != 11 || got[1].Position != 12 {
					t.Fatalf("%v subscription over removed events delivered %v, want positions 11, 12", f, streamsOf(got))
				}
				subs = append(subs, sub)
			}
			// The removed tail of the log is no stall: the next event comes.
			res := mustAppend(t, s, "stay", eventstore.Any, ev("S", "new", "t"))
			if res.FirstPosition != 23 {
				t.Fatalf("append after the removed tail at position %d, want 23: positions are never reused", res.FirstPosition)
			}
			for _, sub := range subs {
				got := nextWithin(t, sub, 5*time.Second)
				if len(got) != 1 || got[0].Position != 23 {
					t.Fatalf("subscription after the removed tail delivered %v", streamsOf(got))
				}
			}
			// A stream subscription on a soft-deleted stream waits for its
			// recreation instead of failing.
			sub, err := s.Subscribe(ctx, eventstore.OfStream("gone"), 1)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			go func() {
				time.Sleep(50 * time.Millisecond)
				_, _ = s.Append(ctx, "gone", eventstore.Exactly(10), evs("G", 1))
			}()
			got := nextWithin(t, sub, 5*time.Second)
			if len(got) != 1 || got[0].Seq != 11 {
				t.Fatalf("stream subscription on the recreated stream delivered %v, want seq 11", streamsOf(got))
			}
		}},
		{"ConcurrentAppendsAndRemovals", concurrentRemovals},
		{"SweepCounts", sweepCounts(cfg)},
		{"ViewsAcrossRemovalsUnderLoad", viewsAcrossRemovals(cfg)},
	}
}

func nextWithin(t *testing.T, sub eventstore.Subscription, d time.Duration) []eventstore.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	evs, err := sub.Next(ctx)
	if err != nil {
		t.Fatalf("subscription Next: %v (a stall on removed events?)", err)
	}
	return evs
}

// concurrentRemovals appends to many streams from several writers while
// another goroutine deletes and truncates some of them, with a
// subscriber and a projection (events per stream) following the whole
// log. Once all is done: the subscriber reaches the head without a stall
// and saw positions only ever increase; a fresh read of the log, the
// projection rebuilt from it, and every stream read agree exactly with
// what was appended less what was removed.
func concurrentRemovals(t *testing.T, s eventstore.Store, d eventstore.Deleter, _ *Clock) {
	ctx := t.Context()
	const writers, perWriter, streams = 4, 150, 12
	name := func(i int) string { return fmt.Sprintf("c-%02d", i) }

	sub, err := s.Subscribe(ctx, eventstore.All(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	type seen struct {
		last  uint64
		count int
	}
	subDone := make(chan seen, 1)
	stopSub := make(chan struct{})
	go func() {
		var st seen
		defer func() { subDone <- st }()
		for {
			select {
			case <-stopSub:
				return
			default:
			}
			evs, err := sub.Next(ctx)
			if err != nil {
				return
			}
			for _, e := range evs {
				if e.Position <= st.last {
					st.last = ^uint64(0) // out of order: fails below
					return
				}
				st.last = e.Position
				st.count++
			}
		}
	}()

	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range perWriter {
				_, err := s.Append(ctx, name(rng.IntN(streams)), eventstore.Any, evs("C", 1+rng.IntN(3), "c"))
				if err != nil && !errors.Is(err, eventstore.ErrStreamTombstoned) {
					t.Errorf("append: %v", err)
					return
				}
			}
		}()
	}
	// The removals: stream 0 hard, 1 soft (then recreated by the
	// writers), the others truncated at their version of the moment.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(99, 7))
		for i := range 40 {
			time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
			st := name(i % streams)
			var err error
			switch i % streams {
			case 0:
				err = d.DeleteStream(ctx, st, eventstore.DeleteHard)
			case 1:
				err = d.DeleteStream(ctx, st, eventstore.DeleteSoft)
			default:
				v, verr := s.StreamVersion(ctx, st)
				if verr != nil {
					err = verr
					break
				}
				err = d.TruncateStream(ctx, st, v/2+1)
			}
			if err != nil {
				t.Errorf("removal on %s: %v", st, err)
				return
			}
			if i%10 == 9 {
				if _, err := d.Sweep(ctx); err != nil {
					t.Errorf("Sweep: %v", err)
					return
				}
			}
		}
	}()
	wg.Wait()
	if t.Failed() {
		return
	}
	sweep(t, d)
	h := head(t, s)

	// Every stream read returns a contiguous run of seqs ending at its
	// version; the log holds exactly the union of those runs.
	want := map[string][]uint64{}
	total := 0
	for i := range streams {
		evs, err := readStreamE(ctx, s, name(i), 1)
		if i == 0 {
			if !errors.Is(err, eventstore.ErrStreamTombstoned) {
				t.Fatalf("the hard-deleted stream reads %d events, %v", len(evs), err)
			}
			continue
		}
		if errors.Is(err, eventstore.ErrStreamDeleted) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		v := streamVersion(t, s, name(i))
		if len(evs) > 0 {
			wantSeqs(t, name(i), evs, evs[0].Seq, v)
			want[name(i)] = streamsOf(evs)[name(i)]
			total += len(evs)
		}
	}
	all := readAll(t, s)
	if got := streamsOf(all); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ReadAll after concurrent removals:\n got %v\nwant %v", got, want)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Position <= all[i-1].Position {
			t.Fatalf("ReadAll positions not increasing at %d", i)
		}
	}
	if len(all) > 0 && all[len(all)-1].Position > h {
		t.Fatalf("ReadAll returned position %d past the head %d", all[len(all)-1].Position, h)
	}

	// The subscriber reaches the head: an append after everything is
	// delivered to it, so it did not stall on any hole.
	res := mustAppend(t, s, "c-final", eventstore.NoStream, ev("F", "x"))
	deadline := time.Now().Add(10 * time.Second)
	for sub.Cursor() <= res.LastPosition {
		if time.Now().After(deadline) {
			t.Fatalf("the subscriber stalled at %d, head %d", sub.Cursor(), res.LastPosition)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stopSub)
	sub.Close()
	st := <-subDone
	if st.last == ^uint64(0) {
		t.Fatal("the subscriber received positions out of order")
	}
	if st.count < total+1 {
		t.Fatalf("the subscriber saw %d events, fewer than the %d still in the log", st.count, total+1)
	}

	// A projection over ReadAll: events per stream, rebuilt from the log,
	// equals the stream reads.
	proj := map[string]int{}
	for _, e := range readAll(t, s) {
		proj[e.Stream]++
	}
	for st, seqs := range want {
		if proj[st] != len(seqs) {
			t.Fatalf("projection counts %d events of %s, the stream has %d", proj[st], st, len(seqs))
		}
	}
}

// clearedRuleStopsASweep: a retention rule cleared while a sweep applies
// it is not applied once SetRetention has returned. The sweep is held
// (through the clock it reads for each stream) after its first stream, the
// rule is cleared, and the sweep let go: the streams after the first must
// keep all their events.
func clearedRuleStopsASweep(cfg deletionConfig) func(t *testing.T, s eventstore.Store, d eventstore.Deleter, clock *Clock) {
	return func(t *testing.T, s eventstore.Store, d eventstore.Deleter, clock *Clock) {
		if cfg.background {
			t.Skip("a background sweep would read the held clock too")
		}
		ctx := t.Context()
		const streams = 5
		for i := range streams {
			mustAppend(t, s, fmt.Sprintf("r-%d", i), eventstore.NoStream, evs("R", 5)...)
		}
		rule := eventstore.Retention{Prefix: "r-", MaxCount: 2}
		if err := d.SetRetention(ctx, rule); err != nil {
			t.Fatal(err)
		}
		held, release := make(chan struct{}), make(chan struct{})
		var releaseOnce sync.Once
		letGo := func() { releaseOnce.Do(func() { close(release) }) }
		defer letGo() // a failed check must not leave the sweep held
		var calls atomic.Int32
		clock.mu.Lock()
		clock.onNow = func() {
			if calls.Add(1) == 2 { // the sweep is about to apply the rule to its second stream
				close(held)
				<-release
			}
		}
		clock.mu.Unlock()
		swept := make(chan error, 1)
		go func() { _, err := d.Sweep(ctx); swept <- err }()
		select {
		case <-held:
		case err := <-swept:
			t.Fatalf("the sweep ended (%v) before it read the clock for a second stream", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the sweep never reached its second stream")
		}
		wantSeqs(t, "r-0, truncated before the rule was cleared", readStream(t, s, "r-0"), 4, 5)
		cleared := make(chan error, 1)
		// SetRetention may wait for the held truncation to finish, so it
		// runs beside the release.
		go func() { cleared <- d.SetRetention(ctx, eventstore.Retention{Prefix: rule.Prefix}) }()
		// The sweep is held outside its lock (or transaction), so
		// SetRetention returns before it is let go; a store whose
		// SetRetention waits for the sweep instead is let go after a while.
		select {
		case err := <-cleared:
			if err != nil {
				t.Fatal(err)
			}
			letGo()
		case <-time.After(5 * time.Second):
			letGo()
			if err := <-cleared; err != nil {
				t.Fatal(err)
			}
		}
		if err := <-swept; err != nil {
			t.Fatalf("Sweep: %v", err)
		}
		clock.mu.Lock()
		clock.onNow = nil
		clock.mu.Unlock()
		for i := 1; i < streams; i++ {
			wantSeqs(t, fmt.Sprintf("r-%d, after the rule was cleared", i), readStream(t, s, fmt.Sprintf("r-%d", i)), 1, 5)
		}
	}
}
