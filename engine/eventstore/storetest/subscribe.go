package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

func subscribeTests() []testCase {
	return []testCase{
		{"All", func(t *testing.T, s eventstore.Store) {
			runLive(t, s, []*follower{
				{filter: eventstore.All(), from: 1},
				{filter: eventstore.All(), from: 250},
			})
		}},
		{"Tag", func(t *testing.T, s eventstore.Store) {
			runLive(t, s, []*follower{
				{filter: eventstore.Tagged("hot"), from: 1},
				{filter: eventstore.Tagged("hot"), from: 300},
				{filter: eventstore.Tagged("cold"), from: 1},
			})
		}},
		{"Stream", func(t *testing.T, s eventstore.Store) {
			runLive(t, s, []*follower{
				{filter: eventstore.OfStream(liveStreams[0]), from: 1},
				{filter: eventstore.OfStream(liveStreams[0]), from: 20},
				{filter: eventstore.OfStream(liveStreams[1]), from: 1},
			})
		}},
		{"SlowSubscriber", func(t *testing.T, s eventstore.Store) {
			runLive(t, s, []*follower{
				{filter: eventstore.All(), from: 1, delay: 3 * time.Millisecond},
				{filter: eventstore.Tagged("hot"), from: 1, delay: 3 * time.Millisecond},
				{filter: eventstore.OfStream(liveStreams[0]), from: 1, delay: 3 * time.Millisecond},
			})
		}},
		{"FromFuture", testSubscribeFromFuture},
		{"Cursor", testSubscribeCursor},
		{"ContextCancel", testSubscribeContextCancel},
		{"CloseSubscription", testSubscribeClose},
		{"CloseStore", testSubscribeCloseStore},
	}
}

// The live workload: events in liveStreams with tags "hot" and "cold"; at
// its end one event of type "end" in each stream, tagged with both, in the
// order of liveStreams. A follower of a stream stops at its "end", the
// others at the last one.
var liveStreams = []string{"live-0", "live-1", "live-2", "live-3"}

const (
	livePrefill       = 600 // events stored before the followers start
	liveWriters       = 3
	liveWriterAppends = 40
	waitTimeout       = 30 * time.Second
)

// liveBatch returns 1 to 3 events with random tags for a random stream.
func liveBatch(rng *rand.Rand, typ string) (string, []eventstore.NewEvent) {
	stream := liveStreams[rng.IntN(len(liveStreams))]
	events := make([]eventstore.NewEvent, 1+rng.IntN(3))
	for i := range events {
		var tags []string
		switch rng.IntN(4) {
		case 0:
			tags = []string{"hot"}
		case 1:
			tags = []string{"cold"}
		case 2:
			tags = []string{"cold", "hot"}
		}
		events[i] = eventstore.NewEvent{Type: typ, Tags: tags, Data: fmt.Appendf(nil, "%s %d", typ, rng.Uint64())}
	}
	return stream, events
}

// follower is one subscription of runLive and what it received.
type follower struct {
	filter eventstore.Filter
	from   uint64
	delay  time.Duration // between Next calls: a slow consumer

	sub eventstore.Subscription
	got []eventstore.Event
	err error
}

func (f *follower) String() string {
	return fmt.Sprintf("subscription to %v from %d (delay %v)", f.filter, f.from, f.delay)
}

// isLast reports whether e is the last event f will get.
func (f *follower) isLast(e eventstore.Event) bool {
	return e.Type == "end" && (f.filter.Kind == eventstore.FilterStream || e.Stream == liveStreams[len(liveStreams)-1])
}

// follow calls Next until the last event arrives.
func (f *follower) follow(ctx context.Context) {
	for {
		batch, err := f.sub.Next(ctx)
		if err != nil {
			f.err = fmt.Errorf("next after %d events: %w", len(f.got), err)
			return
		}
		if len(batch) == 0 {
			f.err = fmt.Errorf("next after %d events returned no events and no error", len(f.got))
			return
		}
		f.got = append(f.got, batch...)
		if slices.ContainsFunc(batch, f.isLast) {
			return
		}
		if f.delay > 0 {
			time.Sleep(f.delay)
		}
	}
}

// runLive stores livePrefill events, then starts the followers together
// with liveWriters concurrent writers, so that the followers go from
// catching up to following live while events are being committed. After
// the writers are done it appends the "end" events and checks that every
// follower received exactly the events its filter selects from its start,
// once each, in order.
func runLive(t *testing.T, s eventstore.Store, followers []*follower) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < livePrefill; {
		stream, events := liveBatch(rng, "prefill")
		mustAppend(t, s, stream, eventstore.Any, events...)
		n += len(events)
	}
	for _, f := range followers {
		sub, err := s.Subscribe(t.Context(), f.filter, f.from)
		if err != nil {
			t.Fatalf("Subscribe(%v, %d): %v", f.filter, f.from, err)
		}
		t.Cleanup(func() { _ = sub.Close() })
		f.sub = sub
	}

	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	start := make(chan struct{})
	var followersDone, writersDone sync.WaitGroup
	for _, f := range followers {
		followersDone.Go(func() {
			<-start
			f.follow(ctx)
		})
	}
	writeErrs := make(chan error, liveWriters)
	for w := range liveWriters {
		writersDone.Go(func() {
			rng := rand.New(rand.NewPCG(3, uint64(w)))
			<-start
			for range liveWriterAppends {
				stream, events := liveBatch(rng, "live")
				if _, err := s.Append(ctx, stream, eventstore.Any, events); err != nil {
					writeErrs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		})
	}
	close(start)
	writersDone.Wait()
	close(writeErrs)
	for err := range writeErrs {
		t.Error(err)
	}
	// Acknowledged after every writer's last append: the last events of all.
	var end eventstore.AppendResult
	for _, stream := range liveStreams {
		end = mustAppend(t, s, stream, eventstore.Any, eventstore.NewEvent{Type: "end", Tags: []string{"hot", "cold"}})
	}
	followersDone.Wait()
	if t.Failed() {
		return
	}

	all := readAll(t, s)
	wantPositions(t, "ReadAll after the live workload", all, 1, end.LastPosition)
	for _, f := range followers {
		if f.err != nil {
			t.Errorf("%v: %v", f, f.err)
			continue
		}
		if err := checkFollowed(f, all); err != nil {
			t.Errorf("%v: %v", f, err)
		}
		var wantCursor uint64
		if f.filter.Kind == eventstore.FilterStream {
			wantCursor = f.got[len(f.got)-1].Seq + 1
		} else {
			wantCursor = end.LastPosition + 1
		}
		if c := f.sub.Cursor(); c != wantCursor {
			t.Errorf("%v: Cursor() = %d at the end, want %d", f, c, wantCursor)
		}
	}
}

// selects reports whether a subscription to filter from from delivers e.
func selects(filter eventstore.Filter, from uint64, e eventstore.Event) bool {
	switch filter.Kind {
	case eventstore.FilterStream:
		return e.Stream == filter.Stream && e.Seq >= from
	case eventstore.FilterTag:
		return slices.Contains(e.Tags, filter.Tag) && e.Position >= from
	default:
		return e.Position >= from
	}
}

// checkFollowed compares what a follower received with what the log holds.
func checkFollowed(f *follower, all []eventstore.Event) error {
	var want []eventstore.Event
	for _, e := range all {
		if selects(f.filter, f.from, e) {
			want = append(want, e)
		}
	}
	switch f.filter.Kind {
	case eventstore.FilterStream:
		// Gap-free by sequence number, from where it started.
		if err := checkKeys("seq", f.got, bySeq, f.from, f.from+uint64(len(want))-1); err != nil {
			return err
		}
	case eventstore.FilterAll:
		if err := checkKeys("position", f.got, byPosition, f.from, f.from+uint64(len(want))-1); err != nil {
			return err
		}
	}
	for i := 1; i < len(f.got); i++ {
		if f.got[i].Position <= f.got[i-1].Position {
			return fmt.Errorf("event %d at position %d after one at position %d", i, f.got[i].Position, f.got[i-1].Position)
		}
	}
	if len(f.got) != len(want) {
		return fmt.Errorf("received %d events (positions %s), want %d (positions %s)",
			len(f.got), abbrev(keys(f.got, byPosition)), len(want), abbrev(keys(want, byPosition)))
	}
	for i := range want {
		if d := diffEvent(f.got[i], want[i]); d != "" {
			return fmt.Errorf("event %d differs from the stored one: %s", i, d)
		}
	}
	return nil
}

// nextResult is what a Next call running in the background returned.
type nextResult struct {
	events []eventstore.Event
	err    error
}

func nextAsync(ctx context.Context, sub eventstore.Subscription) <-chan nextResult {
	ch := make(chan nextResult, 1)
	go func() {
		evs, err := sub.Next(ctx)
		ch <- nextResult{evs, err}
	}()
	return ch
}

// wantBlocked checks that a background Next has not returned yet.
func wantBlocked(t *testing.T, what string, ch <-chan nextResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: Next returned %d events, %v; want it to block", what, len(r.events), r.err)
	case <-time.After(20 * time.Millisecond):
	}
}

// await waits for a background Next to return.
func await(t *testing.T, what string, ch <-chan nextResult) nextResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitTimeout):
		t.Fatalf("%s: Next did not return within %v", what, waitTimeout)
		return nextResult{}
	}
}

func subscribe(t *testing.T, s eventstore.Store, f eventstore.Filter, from uint64) eventstore.Subscription {
	t.Helper()
	sub, err := s.Subscribe(t.Context(), f, from)
	if err != nil {
		t.Fatalf("Subscribe(%v, %d): %v", f, from, err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// nextEvents calls Next until n events arrived.
func nextEvents(t *testing.T, sub eventstore.Subscription, n int) []eventstore.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	var got []eventstore.Event
	for len(got) < n {
		evs, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %d of %d events: %v", len(got), n, err)
		}
		if len(evs) == 0 {
			t.Fatalf("Next after %d of %d events returned no events and no error", len(got), n)
		}
		got = append(got, evs...)
	}
	if len(got) != n {
		t.Fatalf("Next delivered %d events, want %d", len(got), n)
	}
	return got
}

func testSubscribeFromFuture(t *testing.T, s eventstore.Store) {
	mustAppend(t, s, "a", eventstore.Any, evs("old", 3, "t")...)
	mustAppend(t, s, "b", eventstore.Any, evs("old", 2, "t")...)
	// Head is 5, a is at version 3: start past both.
	all := subscribe(t, s, eventstore.All(), 8)
	tag := subscribe(t, s, eventstore.Tagged("t"), 8)
	stream := subscribe(t, s, eventstore.OfStream("a"), 5)
	allNext := nextAsync(t.Context(), all)
	wantBlocked(t, "All from a future position", allNext)

	mustAppend(t, s, "b", eventstore.Any, evs("new", 2, "t")...) // positions 6, 7
	mustAppend(t, s, "a", eventstore.Any, evs("new", 1, "t")...) // position 8, a seq 4
	mustAppend(t, s, "a", eventstore.Any, evs("new", 2, "t")...) // positions 9, 10, a seq 5, 6

	r := await(t, "All from 8", allNext)
	if r.err != nil {
		t.Fatal(r.err)
	}
	got := append(r.events, nextEvents(t, all, 3-len(r.events))...)
	wantPositions(t, "All from 8", got, 8, 10)
	wantPositions(t, "Tagged from 8", nextEvents(t, tag, 3), 8, 10)
	wantSeqs(t, "stream a from seq 5", nextEvents(t, stream, 2), 5, 6)
}

func testSubscribeCursor(t *testing.T, s eventstore.Store) {
	mustAppend(t, s, "a", eventstore.Any, evs("e", 4)...)
	mustAppend(t, s, "b", eventstore.Any, evs("e", 3, "t")...) // positions 5..7
	for _, c := range []struct {
		filter     eventstore.Filter
		from       uint64
		n          int
		wantCursor uint64
	}{
		{eventstore.All(), 1, 7, 8},
		{eventstore.All(), 3, 5, 8},
		{eventstore.Tagged("t"), 1, 3, 8},
		{eventstore.Tagged("t"), 6, 2, 8},
		{eventstore.OfStream("a"), 1, 4, 5},
		{eventstore.OfStream("b"), 2, 2, 4},
	} {
		sub := subscribe(t, s, c.filter, c.from)
		if got := sub.Cursor(); got != c.from {
			t.Fatalf("%v from %d: Cursor() = %d before Next", c.filter, c.from, got)
		}
		got := nextEvents(t, sub, c.n)
		if cur := sub.Cursor(); cur != c.wantCursor {
			t.Fatalf("%v from %d: Cursor() = %d after %d events, want %d", c.filter, c.from, cur, len(got), c.wantCursor)
		}
	}
}

func testSubscribeContextCancel(t *testing.T, s eventstore.Store) {
	mustAppend(t, s, "a", eventstore.Any, evs("e", 2)...)
	for _, f := range []eventstore.Filter{eventstore.All(), eventstore.Tagged("t"), eventstore.OfStream("a")} {
		// Start right after what is there: nothing to deliver yet.
		from := head(t, s) + 1
		if f.Kind == eventstore.FilterStream {
			from = streamVersion(t, s, f.Stream) + 1
		}
		sub := subscribe(t, s, f, from)
		ctx, cancel := context.WithCancel(t.Context())
		ch := nextAsync(ctx, sub)
		wantBlocked(t, fmt.Sprintf("%v with nothing to deliver", f), ch)
		cancel()
		r := await(t, "Next after cancel", ch)
		if !errors.Is(r.err, context.Canceled) || len(r.events) != 0 {
			t.Fatalf("%v: Next after its context was cancelled: %d events, %v; want context.Canceled", f, len(r.events), r.err)
		}

		// A deadline ends Next as well.
		dctx, dcancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
		evs, err := sub.Next(dctx)
		dcancel()
		if !errors.Is(err, context.DeadlineExceeded) || len(evs) != 0 {
			t.Fatalf("%v: Next past its deadline: %d events, %v; want context.DeadlineExceeded", f, len(evs), err)
		}

		// The subscription itself goes on.
		mustAppend(t, s, "a", eventstore.Any, ev("e", "", "t"))
		got := nextEvents(t, sub, 1)
		if !selects(f, from, got[0]) {
			t.Fatalf("%v: after cancelled Next calls, Next delivered %+v", f, got[0])
		}
	}
}

func testSubscribeClose(t *testing.T, s eventstore.Store) {
	mustAppend(t, s, "a", eventstore.Any, evs("e", 2)...)
	for _, f := range []eventstore.Filter{eventstore.All(), eventstore.Tagged("t"), eventstore.OfStream("a")} {
		sub := subscribe(t, s, f, 100)
		ch := nextAsync(t.Context(), sub)
		wantBlocked(t, fmt.Sprintf("%v with nothing to deliver", f), ch)
		if err := sub.Close(); err != nil {
			t.Fatalf("%v: Close: %v", f, err)
		}
		r := await(t, "Next after Close", ch)
		if r.err == nil || len(r.events) != 0 {
			t.Fatalf("%v: Next blocked during Close returned %d events, %v; want an error", f, len(r.events), r.err)
		}
		// Closed for good, even with events to deliver.
		mustAppend(t, s, "a", eventstore.Any, evs("e", 1, "t")...)
		evs, err := sub.Next(t.Context())
		if err == nil || len(evs) != 0 {
			t.Fatalf("%v: Next on a closed subscription returned %d events, %v; want an error", f, len(evs), err)
		}
		_ = sub.Close() // closing twice is harmless
	}
}

func testSubscribeCloseStore(t *testing.T, s eventstore.Store) {
	mustAppend(t, s, "a", eventstore.Any, evs("e", 2, "t")...)
	var blocked []<-chan nextResult
	for _, f := range []eventstore.Filter{eventstore.All(), eventstore.Tagged("t"), eventstore.OfStream("a")} {
		ch := nextAsync(t.Context(), subscribe(t, s, f, 100))
		wantBlocked(t, fmt.Sprintf("%v with nothing to deliver", f), ch)
		blocked = append(blocked, ch)
	}
	idle := subscribe(t, s, eventstore.All(), 100) // not in Next while the store closes
	behind := subscribe(t, s, eventstore.All(), 1) // with events to catch up on
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i, ch := range blocked {
		r := await(t, "Next during the store's Close", ch)
		if !errors.Is(r.err, eventstore.ErrClosed) || len(r.events) != 0 {
			t.Fatalf("subscription %d: Next blocked during the store's Close returned %d events, %v; want ErrClosed", i, len(r.events), r.err)
		}
	}
	for name, sub := range map[string]eventstore.Subscription{"idle": idle, "behind": behind} {
		r := await(t, "Next after the store's Close", nextAsync(t.Context(), sub))
		if !errors.Is(r.err, eventstore.ErrClosed) || len(r.events) != 0 {
			t.Fatalf("%s subscription: Next after the store's Close returned %d events, %v; want ErrClosed", name, len(r.events), r.err)
		}
	}
}
