package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
)

func concurrentTests() []testCase {
	return []testCase{
		{"RandomAppenders", testRandomAppenders},
		{"OptimisticCounter", testOptimisticCounter},
		{"ReadersSeeWholeAppends", testReadersSeeWholeAppends},
	}
}

// errorList collects the errors of concurrent goroutines; the test
// goroutine reports them after joining.
type errorList struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorList) add(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

func (l *errorList) report(t *testing.T) {
	t.Helper()
	for i, err := range l.errs {
		if i == 10 {
			t.Errorf("… and %d more errors", len(l.errs)-10)
			break
		}
		t.Error(err)
	}
	if len(l.errs) > 0 {
		t.FailNow()
	}
}

// ack is an acknowledged append.
type ack struct {
	stream string
	events []eventstore.NewEvent // with the ids the store used
	res    eventstore.AppendResult
}

// appendRetrying appends with an exact expected version taken from the
// stream, and on conflict retries from the version the ConflictError
// reports, until it succeeds.
func appendRetrying(ctx context.Context, s eventstore.Store, stream string, useNoStream bool, events []eventstore.NewEvent) (eventstore.AppendResult, int, error) {
	v, err := s.StreamVersion(ctx, stream)
	if err != nil {
		return eventstore.AppendResult{}, 0, err
	}
	for conflicts := 0; conflicts < 10_000; conflicts++ {
		expect := eventstore.Exactly(v)
		if v == 0 && useNoStream {
			expect = eventstore.NoStream
		}
		res, err := s.Append(ctx, stream, expect, events)
		var ce *eventstore.ConflictError
		if !errors.As(err, &ce) {
			if err == nil && (res.Duplicate || res.FirstSeq != v+1) {
				return res, conflicts, fmt.Errorf("append to %q expecting %v: result %+v", stream, expect, res)
			}
			return res, conflicts, err
		}
		if !errors.Is(err, eventstore.ErrVersionConflict) || ce.Stream != stream || ce.Expected != expect || ce.Actual == v {
			return res, conflicts, fmt.Errorf("append to %q expecting %v: conflict %+v (%v)", stream, expect, *ce, err)
		}
		if ce.Actual < v {
			return res, conflicts, fmt.Errorf("append to %q: stream version went back from %d to %d", stream, v, ce.Actual)
		}
		v = ce.Actual
	}
	return eventstore.AppendResult{}, 0, fmt.Errorf("append to %q: too many conflicts", stream)
}

func randomTags(rng *rand.Rand) []string {
	switch rng.IntN(4) {
	case 0:
		return []string{"x"}
	case 1:
		return []string{"y"}
	case 2:
		return []string{"y", "x"}
	}
	return nil
}

func testRandomAppenders(t *testing.T, s eventstore.Store) {
	const writers, ops = 6, 50
	streams := []string{"rnd-0", "rnd-1", "rnd-2", "rnd-3", "rnd-4", "rnd-5"}
	var errs errorList
	acks := make([][]ack, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			ctx := t.Context()
			rng := rand.New(rand.NewPCG(42, uint64(w)))
			var mine []ack
			for op := range ops {
				stream := streams[rng.IntN(len(streams))]
				events := make([]eventstore.NewEvent, 1+rng.IntN(6))
				for i := range events {
					events[i] = eventstore.NewEvent{Type: "rnd", Version: w, Tags: randomTags(rng),
						Meta: map[string]string{"w": strconv.Itoa(w), "op": strconv.Itoa(op)}, Data: fmt.Appendf(nil, "%d/%d/%d", w, op, i)}
				}
				var res eventstore.AppendResult
				var err error
				switch kind := rng.IntN(10); {
				case kind < 4:
					res, err = s.Append(ctx, stream, eventstore.Any, withIDs(events))
				case kind < 8:
					res, _, err = appendRetrying(ctx, s, stream, kind%2 == 0, withIDs(events))
				case kind < 9 && len(mine) > 0:
					// Retry an earlier append with some expected version:
					// it must come back as the duplicate it is.
					old := mine[rng.IntN(len(mine))]
					expect := []eventstore.ExpectedVersion{eventstore.Any, eventstore.NoStream, eventstore.Exactly(old.res.LastSeq), eventstore.Exactly(old.res.FirstSeq - 1)}[rng.IntN(4)]
					res, err = s.Append(ctx, old.stream, expect, old.events)
					want := old.res
					want.Duplicate = true
					if err == nil && res != want {
						err = fmt.Errorf("retry of %+v expecting %v returned %+v", old.res, expect, res)
					}
					if err != nil {
						errs.add(fmt.Errorf("writer %d op %d: %w", w, op, err))
						return
					}
					continue
				default:
					res, err = s.Append(ctx, stream, eventstore.Any, events) // ids generated
				}
				if err != nil {
					errs.add(fmt.Errorf("writer %d op %d: %w", w, op, err))
					return
				}
				mine = append(mine, ack{stream: stream, events: events, res: res})
			}
			acks[w] = mine
		})
	}
	wg.Wait()
	errs.report(t)
	var all []ack
	for _, a := range acks {
		all = append(all, a...)
	}
	checkInvariants(t, s, all)
}

// checkInvariants checks the store against the appends it acknowledged,
// which must be all it holds.
func checkInvariants(t *testing.T, s eventstore.Store, acks []ack) {
	t.Helper()
	log := readAll(t, s)
	h := head(t, s)
	wantPositions(t, "ReadAll", log, 1, h)

	// Every acknowledged event, once, where its append said.
	total := uint64(0)
	streams := map[string]bool{}
	seen := map[eventstore.ID]uint64{}
	for _, e := range log {
		if p, ok := seen[e.ID]; ok {
			t.Fatalf("id %s stored twice, at positions %d and %d", e.ID, p, e.Position)
		}
		seen[e.ID] = e.Position
	}
	for _, a := range acks {
		n := uint64(len(a.events))
		total += n
		streams[a.stream] = true
		r := a.res
		if r.Stream != a.stream || r.Duplicate || r.LastSeq-r.FirstSeq+1 != n || r.LastPosition-r.FirstPosition+1 != n || r.FirstSeq == 0 || r.FirstPosition == 0 {
			t.Fatalf("append of %d events to %q: result %+v", n, a.stream, r)
		}
		for i := range a.events {
			pos := r.FirstPosition + uint64(i)
			if pos > h {
				t.Fatalf("append %+v acknowledged past the head %d", r, h)
			}
			if err := checkStored(log[pos-1], a.events[i], a.stream, r.FirstSeq+uint64(i), pos); err != nil {
				t.Fatalf("event %d of append %+v: %v", i, r, err)
			}
		}
	}
	if total != h {
		t.Fatalf("%d events acknowledged, but Head is %d", total, h)
	}

	// The streams partition the log, each gap-free and in log order.
	if names := listStreams(t, s); !slices.Equal(names, slices.Sorted(maps.Keys(streams))) {
		t.Fatalf("ListStreams = %q, want %q", names, slices.Sorted(maps.Keys(streams)))
	}
	inStreams := 0
	for stream := range streams {
		evs := readStream(t, s, stream)
		v := streamVersion(t, s, stream)
		wantSeqs(t, "ReadStream("+stream+")", evs, 1, v)
		for i, e := range evs {
			if i > 0 && e.Position <= evs[i-1].Position {
				t.Fatalf("stream %q: seq %d at position %d, after position %d", stream, e.Seq, e.Position, evs[i-1].Position)
			}
			if d := diffEvent(e, log[e.Position-1]); d != "" {
				t.Fatalf("stream %q seq %d disagrees with ReadAll at %d: %s", stream, e.Seq, e.Position, d)
			}
		}
		inStreams += len(evs)
	}
	if inStreams != len(log) {
		t.Fatalf("the streams hold %d events, the log %d", inStreams, len(log))
	}

	// The tag index agrees with the events' tags.
	tags := map[string][]uint64{}
	for _, e := range log {
		for _, tag := range e.Tags {
			tags[tag] = append(tags[tag], e.Position)
		}
	}
	for tag, positions := range tags {
		got := readTag(t, s, tag, 1)
		if !slices.Equal(keys(got, byPosition), positions) {
			t.Fatalf("ReadTag(%q) positions %s, want %s", tag, abbrev(keys(got, byPosition)), abbrev(positions))
		}
	}
}

// testOptimisticCounter has writers increment one stream with exact
// expected versions: every version is won by exactly one of them.
func testOptimisticCounter(t *testing.T, s eventstore.Store) {
	const writers, incs = 6, 15
	var errs errorList
	wins := make([][]uint64, writers)
	var wg sync.WaitGroup
	var conflicts [writers]int
	for w := range writers {
		wg.Go(func() {
			for range incs {
				res, c, err := appendRetrying(t.Context(), s, "counter", w%2 == 0, withIDs(evs("inc", 1)))
				conflicts[w] += c
				if err != nil {
					errs.add(fmt.Errorf("writer %d: %w", w, err))
					return
				}
				wins[w] = append(wins[w], res.FirstSeq)
			}
		})
	}
	wg.Wait()
	errs.report(t)
	var all []uint64
	for _, w := range wins {
		all = append(all, w...)
	}
	slices.Sort(all)
	if !slices.Equal(all, seqRange(1, writers*incs)) {
		t.Fatalf("versions won: %s, want each of 1..%d once", abbrev(all), writers*incs)
	}
	if v := streamVersion(t, s, "counter"); v != writers*incs {
		t.Fatalf("StreamVersion = %d, want %d", v, writers*incs)
	}
	t.Logf("conflicts per writer: %v", conflicts)
}

// testReadersSeeWholeAppends reads while writers append: every read is
// gap-free, returns nothing past the head, and a read that reaches the end
// ends with the last event of an append (an append is visible entirely or
// not at all).
func testReadersSeeWholeAppends(t *testing.T, s eventstore.Store) {
	const writers, appends, readers = 3, 60, 2
	streams := []string{"w-0", "w-1", "w-2"}
	var errs errorList
	stop := make(chan struct{})
	var writing, reading sync.WaitGroup
	for w := range writers {
		writing.Go(func() {
			rng := rand.New(rand.NewPCG(7, uint64(w)))
			for range appends {
				events := make([]eventstore.NewEvent, 1+rng.IntN(5))
				for i := range events {
					events[i] = eventstore.NewEvent{Type: "w", Tags: []string{"w"},
						Meta: map[string]string{"i": strconv.Itoa(i), "n": strconv.Itoa(len(events))}}
				}
				if _, err := s.Append(t.Context(), streams[rng.IntN(len(streams))], eventstore.Any, events); err != nil {
					errs.add(err)
					return
				}
			}
		})
	}
	lastOfAppend := func(e eventstore.Event) bool {
		return e.Meta["i"] != "" && e.Meta["i"] == strconv.Itoa(mustAtoi(e.Meta["n"])-1)
	}
	check := func(what string, evs []eventstore.Event, err error, key func(eventstore.Event) uint64, gapFree bool) {
		if err != nil {
			errs.add(fmt.Errorf("%s: %w", what, err))
			return
		}
		if len(evs) == 0 {
			return
		}
		// Only acknowledged events are readable: none past the head as
		// it is once the read returned.
		h, err := s.Head(t.Context())
		if err != nil {
			errs.add(fmt.Errorf("head: %w", err))
			return
		}
		for _, e := range evs {
			if e.Position > h {
				errs.add(fmt.Errorf("%s returned position %d, past the head %d", what, e.Position, h))
				return
			}
		}
		if gapFree {
			if err := checkKeys("key", evs, key, 1, uint64(len(evs))); err != nil {
				errs.add(fmt.Errorf("%s: %w", what, err))
			}
		}
		if last := evs[len(evs)-1]; !lastOfAppend(last) {
			errs.add(fmt.Errorf("%s ends at position %d, event %s of %s of its append", what, last.Position, last.Meta["i"], last.Meta["n"]))
		}
	}
	for r := range readers {
		reading.Go(func() {
			ctx := t.Context()
			rng := rand.New(rand.NewPCG(8, uint64(r)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				stream := streams[rng.IntN(len(streams))]
				evs, err := readAllE(ctx, s, 1)
				check("ReadAll", evs, err, byPosition, true)
				evs, err = readStreamE(ctx, s, stream, 1)
				check("ReadStream", evs, err, bySeq, true)
				evs, err = readTagE(ctx, s, "w", 1)
				check("ReadTag", evs, err, nil, false)
				evs, err = s.ReadStreamBackward(ctx, stream, 0, 1)
				check("ReadStreamBackward", evs, err, nil, false)
			}
		})
	}
	writing.Wait()
	close(stop)
	reading.Wait()
	errs.report(t)
	wantPositions(t, "ReadAll after the writers", readAll(t, s), 1, head(t, s))
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}
