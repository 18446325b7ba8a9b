package query_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/query"
)

const patience = 20 * time.Second

func openStore(t *testing.T) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatalf("pebblestore.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func newReader(t *testing.T, s eventstore.Store, opts query.Options) *query.Reader {
	t.Helper()
	j, err := query.New(s, opts)
	if err != nil {
		t.Fatalf("query.New: %v", err)
	}
	t.Cleanup(j.Close)
	return j
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

// appendEvents appends n events to stream, one append of n, each tagged
// with tags; their data names the stream and sequence.
func appendEvents(t testing.TB, s eventstore.Store, stream string, n int, tags ...string) eventstore.AppendResult {
	t.Helper()
	evs := make([]eventstore.NewEvent, n)
	for i := range evs {
		evs[i] = eventstore.NewEvent{Type: "test", Tags: tags, Data: fmt.Appendf(nil, `{"stream":%q,"i":%d}`, stream, i)}
	}
	res, err := s.Append(context.Background(), stream, eventstore.Any, evs)
	if err != nil {
		t.Fatalf("append to %s: %v", stream, err)
	}
	return res
}

// appendBg is appendEvents for goroutines other than the test's, which
// must not call t.Fatal.
func appendBg(t testing.TB, s eventstore.Store, stream string, n int, tags ...string) {
	evs := make([]eventstore.NewEvent, n)
	for i := range evs {
		evs[i] = eventstore.NewEvent{Type: "test", Tags: tags, Data: []byte("{}")}
	}
	if _, err := s.Append(context.Background(), stream, eventstore.Any, evs); err != nil {
		t.Errorf("append to %s: %v", stream, err)
	}
}

// drain reads a current query to its end.
func drain(t *testing.T, ctx context.Context, q *query.Events) []eventstore.Event {
	t.Helper()
	var out []eventstore.Event
	for {
		evs, err := q.Next(ctx)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if len(evs) == 0 {
			t.Fatal("Next returned an empty page without error")
		}
		out = append(out, evs...)
	}
}

// take reads a live query until it has n events.
func take(t *testing.T, ctx context.Context, q *query.Events, n int) []eventstore.Event {
	t.Helper()
	var out []eventstore.Event
	for len(out) < n {
		evs, err := q.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %d of %d events: %v", len(out), n, err)
		}
		out = append(out, evs...)
	}
	if len(out) != n {
		t.Fatalf("got %d events, want %d", len(out), n)
	}
	return out
}

func seqs(evs []eventstore.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i := range evs {
		out[i] = evs[i].Seq
	}
	return out
}

func positions(evs []eventstore.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i := range evs {
		out[i] = evs[i].Position
	}
	return out
}

func span(from, to uint64) []uint64 {
	var out []uint64
	for v := from; v <= to; v++ {
		out = append(out, v)
	}
	return out
}

func checkIdle(t *testing.T, j *query.Reader) {
	t.Helper()
	if st := j.Permitter().Stats(); st.InUse != 0 || st.Waiting != 0 {
		t.Fatalf("permits not returned: %+v", st)
	}
}

// hidden hides the store's Changed method, as a backend that must poll.
type hidden struct{ eventstore.Store }

func TestCurrentEventsByStream(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t)
	appendEvents(t, s, "a", 10)
	appendEvents(t, s, "b", 5)
	j := newReader(t, s, query.Options{MaxBufferSize: 3})

	if got := seqs(drain(t, ctx, j.CurrentEventsByStream("a", 0, 0))); !slices.Equal(got, span(1, 10)) {
		t.Fatalf("whole stream: %v", got)
	}
	if got := seqs(drain(t, ctx, j.CurrentEventsByStream("a", 4, 8))); !slices.Equal(got, span(4, 8)) {
		t.Fatalf("4..8: %v", got)
	}
	if got := drain(t, ctx, j.CurrentEventsByStream("a", 11, 0)); len(got) != 0 {
		t.Fatalf("past the end: %v", seqs(got))
	}
	if got := drain(t, ctx, j.CurrentEventsByStream("a", 5, 4)); len(got) != 0 {
		t.Fatalf("to before from: %v", seqs(got))
	}
	if got := drain(t, ctx, j.CurrentEventsByStream("nobody", 0, 0)); len(got) != 0 {
		t.Fatalf("missing stream: %v", seqs(got))
	}

	// The query ends at the log's head when it began, however much is
	// appended while it runs.
	q := j.CurrentEventsByStream("b", 1, 0)
	first, err := q.Next(ctx)
	if err != nil || len(first) != 3 {
		t.Fatalf("first page: %d events, %v", len(first), err)
	}
	appendEvents(t, s, "b", 5)
	rest := drain(t, ctx, q)
	if got := seqs(append(first, rest...)); !slices.Equal(got, span(1, 5)) {
		t.Fatalf("bounded by the head at start: %v", got)
	}
	if q.Cursor() != 6 {
		t.Fatalf("cursor %d, want 6", q.Cursor())
	}
	if _, err := q.Next(ctx); err != io.EOF {
		t.Fatalf("Next after the end: %v", err)
	}

	// An invalid stream id fails with the store's error.
	if _, err := j.CurrentEventsByStream("", 0, 0).Next(ctx); !errors.Is(err, eventstore.ErrInvalidStreamID) {
		t.Fatalf("empty stream id: %v", err)
	}
	checkIdle(t, j)
}

// written is how many events liveWriter(streams, batches) gives stream.
func written(streams []string, batches int, stream string) int {
	n := 0
	for i := range batches {
		if streams[i%len(streams)] == stream {
			n += 1 + i%3
		}
	}
	return n
}

// liveWriter appends batches of 1 to 3 events to streams in turn, in the
// background; wait waits for the last.
func liveWriter(t *testing.T, s eventstore.Store, streams []string, batches int, tags ...string) (wait func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range batches {
			appendBg(t, s, streams[i%len(streams)], 1+i%3, tags...)
			if i%10 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	return wg.Wait
}

func TestEventsByStreamLive(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t)
	appendEvents(t, s, "a", 25)
	j := newReader(t, s, query.Options{MaxBufferSize: 4})

	q := j.EventsByStream("a", 0, 0)
	tail := j.EventsByStream("a", 20, 0)
	// Appends race with the catch-up, so the switch to live is crossed
	// while events are arriving.
	streams := []string{"a", "other"}
	wait := liveWriter(t, s, streams, 100)
	defer wait()
	total := 25 + written(streams, 100, "a")
	got := take(t, ctx, q, total)
	if !slices.Equal(seqs(got), span(1, uint64(total))) {
		t.Fatalf("live query: %v", seqs(got))
	}
	if got := take(t, ctx, tail, total-19); !slices.Equal(seqs(got), span(20, uint64(total))) {
		t.Fatalf("live query from 20: %v", seqs(got))
	}
	for i := range got {
		if got[i].Stream != "a" {
			t.Fatalf("event of stream %q", got[i].Stream)
		}
	}

	// Caught up, the query waits; a new append wakes it.
	next := make(chan []eventstore.Event)
	go func() {
		evs, err := q.Next(ctx)
		if err != nil {
			t.Error(err)
		}
		next <- evs
	}()
	time.Sleep(20 * time.Millisecond)
	appendEvents(t, s, "other", 1)
	appendEvents(t, s, "a", 2)
	if evs := <-next; !slices.Equal(seqs(evs), span(uint64(total)+1, uint64(total)+2)) {
		t.Fatalf("woken with %v", seqs(evs))
	}

	// A live query with an upper bound ends there.
	bounded := j.EventsByStream("a", uint64(total), uint64(total)+5)
	got = take(t, ctx, bounded, 3)
	appendEvents(t, s, "a", 10)
	got = append(got, take(t, ctx, bounded, 3)...)
	if !slices.Equal(seqs(got), span(uint64(total), uint64(total)+5)) {
		t.Fatalf("bounded live query: %v", seqs(got))
	}
	if _, err := bounded.Next(ctx); err != io.EOF {
		t.Fatalf("after its last seq: %v", err)
	}
	checkIdle(t, j)
}

func TestCurrentAllEvents(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t)
	for i := range 7 {
		appendEvents(t, s, fmt.Sprintf("s%d", i), i+1)
	}
	j := newReader(t, s, query.Options{MaxBufferSize: 5})
	if got := positions(drain(t, ctx, j.CurrentAllEvents(0))); !slices.Equal(got, span(1, 28)) {
		t.Fatalf("all: %v", got)
	}
	if got := positions(drain(t, ctx, j.CurrentAllEvents(20))); !slices.Equal(got, span(20, 28)) {
		t.Fatalf("from 20: %v", got)
	}
	if got := drain(t, ctx, j.CurrentAllEvents(29)); len(got) != 0 {
		t.Fatalf("from past the head: %v", positions(got))
	}
	q := j.CurrentAllEvents(1)
	first, _ := q.Next(ctx)
	appendEvents(t, s, "late", 10)
	if got := positions(append(first, drain(t, ctx, q)...)); !slices.Equal(got, span(1, 28)) {
		t.Fatalf("bounded by the head at start: %v", got)
	}
	checkIdle(t, j)
}

func TestAllEventsLive(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t)
	appendEvents(t, s, "x", 30)
	j := newReader(t, s, query.Options{MaxBufferSize: 7})
	q := j.AllEvents(0)
	streams := []string{"x", "y", "z"}
	wait := liveWriter(t, s, streams, 150)
	defer wait()
	head := uint64(30)
	for _, st := range streams {
		head += uint64(written(streams, 150, st))
	}
	if got := positions(take(t, ctx, q, int(head))); !slices.Equal(got, span(1, head)) {
		t.Fatalf("live all: %v", got)
	}
	appendEvents(t, s, "w", 3)
	if got := positions(take(t, ctx, q, 3)); !slices.Equal(got, span(head+1, head+3)) {
		t.Fatalf("after catching up: %v", got)
	}
	checkIdle(t, j)
}

func TestCurrentEventsByTag(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t)
	appendEvents(t, s, "a", 4, "red")
	appendEvents(t, s, "b", 4, "blue")
	appendEvents(t, s, "c", 4, "red", "blue")
	j := newReader(t, s, query.Options{MaxBufferSize: 3})
	if got := positions(drain(t, ctx, j.CurrentEventsByTag("red", 0))); !slices.Equal(got, append(span(1, 4), span(9, 12)...)) {
		t.Fatalf("red: %v", got)
	}
	if got := positions(drain(t, ctx, j.CurrentEventsByTag("blue", 7))); !slices.Equal(got, append(span(7, 8), span(9, 12)...)) {
		t.Fatalf("blue from 7: %v", got)
	}
	if got := drain(t, ctx, j.CurrentEventsByTag("green", 0)); len(got) != 0 {
		t.Fatalf("green: %v", positions(got))
	}
	q := j.CurrentEventsByTag("red", 0)
	first, _ := q.Next(ctx)
	appendEvents(t, s, "d", 4, "red")
	if got := positions(append(first, drain(t, ctx, q)...)); !slices.Equal(got, append(span(1, 4), span(9, 12)...)) {
		t.Fatalf("bounded by the head at start: %v", got)
	}
	checkIdle(t, j)
}

func TestEventsByTagLive(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t)
	appendEvents(t, s, "a", 10, "hot")
	appendEvents(t, s, "a", 10, "cold")
	j := newReader(t, s, query.Options{MaxBufferSize: 4})
	q := j.EventsByTag("hot", 0)
	hot := []string{"a", "b"}
	w1 := liveWriter(t, s, hot, 60, "hot")
	w2 := liveWriter(t, s, []string{"c"}, 60, "cold")
	got := take(t, ctx, q, 10+written(hot, 60, "a")+written(hot, 60, "b"))
	w1()
	w2()
	var want []uint64
	for _, ev := range drain(t, ctx, j.CurrentAllEvents(0)) {
		if slices.Contains(ev.Tags, "hot") {
			want = append(want, ev.Position)
		}
	}
	if !slices.Equal(positions(got), want) {
		t.Fatalf("live tag: %v, want %v", positions(got), want)
	}
	appendEvents(t, s, "z", 2, "hot")
	if got := take(t, ctx, q, 2); got[0].Stream != "z" || got[1].Stream != "z" {
		t.Fatalf("after catching up: %+v", got)
	}
	checkIdle(t, j)
}

func drainIDs(t *testing.T, ctx context.Context, q *query.StreamIDs) []string {
	t.Helper()
	var out []string
	for {
		ids, err := q.Next(ctx)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, ids...)
	}
}

func takeIDs(t *testing.T, ctx context.Context, q *query.StreamIDs, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		ids, err := q.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %d of %d ids: %v", len(out), n, err)
		}
		out = append(out, ids...)
	}
	return out
}

func TestCurrentStreamIDs(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t)
	var want []string
	for i := range 23 {
		id := fmt.Sprintf("s-%02d", i)
		want = append(want, id)
		appendEvents(t, s, id, 1+i%3)
	}
	j := newReader(t, s, query.Options{MaxBufferSize: 5})
	if got := drainIDs(t, ctx, j.CurrentStreamIDs()); !slices.Equal(got, want) {
		t.Fatalf("ids: %v", got)
	}
	if got := drainIDs(t, ctx, newReader(t, openStore(t), query.Options{}).CurrentStreamIDs()); len(got) != 0 {
		t.Fatalf("empty store: %v", got)
	}
	checkIdle(t, j)
}

func TestStreamIDsLive(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t)
	want := map[string]bool{}
	for i := range 40 {
		id := fmt.Sprintf("old-%02d", i)
		want[id] = true
		appendEvents(t, s, id, 2)
	}
	j := newReader(t, s, query.Options{MaxBufferSize: 3})
	q := j.StreamIDs()
	// New streams, before and after the listing's cursor, and more events
	// for old streams, all while the query lists and switches over.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 60 {
			for _, id := range []string{fmt.Sprintf("a-%02d", i), fmt.Sprintf("z-%02d", i), fmt.Sprintf("old-%02d", i%40)} {
				appendBg(t, s, id, 1)
			}
		}
	}()
	for i := range 60 {
		want[fmt.Sprintf("a-%02d", i)] = true
		want[fmt.Sprintf("z-%02d", i)] = true
	}
	got := takeIDs(t, ctx, q, len(want))
	wg.Wait()
	seen := map[string]bool{}
	for _, id := range got {
		if seen[id] {
			t.Fatalf("%s delivered twice", id)
		}
		if !want[id] {
			t.Fatalf("unexpected id %s", id)
		}
		seen[id] = true
	}
	appendEvents(t, s, "old-00", 1)
	appendEvents(t, s, "new", 1)
	if got := takeIDs(t, ctx, q, 1); !slices.Equal(got, []string{"new"}) {
		t.Fatalf("after catching up: %v", got)
	}
	checkIdle(t, j)
}

// creating is a store whose ListStreams creates streams in the middle of
// its second call, so the query meets the switch's hard case every time:
// one stream created behind the listing's cursor (never listed) and one
// ahead of it (listed, and then met again in the log).
type creating struct {
	*pebblestore.Store
	t     *testing.T
	calls int
}

func (c *creating) ListStreams(ctx context.Context, after string, max int) ([]string, error) {
	c.calls++
	if c.calls == 2 {
		appendEvents(c.t, c.Store, "a-behind", 1)
		appendEvents(c.t, c.Store, "z-ahead", 1)
	}
	return c.Store.ListStreams(ctx, after, max)
}

func TestStreamIDsSwitch(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t)
	want := []string{"m-0", "m-1", "m-2", "m-3", "m-4", "m-5", "m-6", "z-ahead", "a-behind", "n-later"}
	for _, id := range want[:7] {
		appendEvents(t, s, id, 1)
	}
	j := newReader(t, &creating{Store: s, t: t}, query.Options{MaxBufferSize: 3})
	q := j.StreamIDs()
	got := takeIDs(t, ctx, q, 9)
	appendEvents(t, s, "n-later", 1)
	got = append(got, takeIDs(t, ctx, q, 1)...)
	if !slices.Equal(got, want) {
		t.Fatalf("ids %v, want %v", got, want)
	}
}

func TestPollingWithoutChanged(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t)
	appendEvents(t, s, "a", 5, "t")
	j := newReader(t, hidden{s}, query.Options{MaxBufferSize: 2, RefreshInterval: 5 * time.Millisecond})
	byID := j.EventsByStream("a", 1, 0)
	all := j.AllEvents(1)
	tag := j.EventsByTag("t", 1)
	ids := j.StreamIDs()
	for _, q := range []*query.Events{byID, all, tag} {
		if got := seqs(take(t, ctx, q, 5)); !slices.Equal(got, span(1, 5)) {
			t.Fatalf("catch-up: %v", got)
		}
	}
	if got := takeIDs(t, ctx, ids, 1); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("ids: %v", got)
	}
	before := j.Permitter().Stats().Granted
	go func() {
		time.Sleep(30 * time.Millisecond)
		appendBg(t, s, "a", 3, "t")
		appendBg(t, s, "b", 1)
	}()
	for _, q := range []*query.Events{byID, tag} {
		if got := seqs(take(t, ctx, q, 3)); !slices.Equal(got, span(6, 8)) {
			t.Fatalf("polled: %v", got)
		}
	}
	if got := positions(take(t, ctx, all, 4)); !slices.Equal(got, span(6, 9)) {
		t.Fatalf("polled all: %v", got)
	}
	if got := takeIDs(t, ctx, ids, 1); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("polled ids: %v", got)
	}
	// Nothing signals a commit, so the queries must have asked repeatedly.
	if polls := j.Permitter().Stats().Granted - before; polls < 8 {
		t.Fatalf("only %d backend queries while polling", polls)
	}
	checkIdle(t, j)
}

// decorated is a store decorator that, like the metrics package's,
// hides the backend's Changed but offers Unwrap.
type decorated struct {
	eventstore.Store
	reads *atomic.Int64
}

func (d decorated) Unwrap() eventstore.Store { return d.Store }

func (d decorated) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]eventstore.Event, error) {
	d.reads.Add(1)
	return d.Store.ReadStream(ctx, stream, from, max)
}

// TestWakeupsNotTimers checks that on the embedded store, even behind a
// decorator, a caught-up live query runs no backend query until a commit
// concerns it, and that its reads go through the decorator.
func TestWakeupsNotTimers(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t)
	appendEvents(t, s, "a", 1)
	var reads atomic.Int64
	j := newReader(t, decorated{s, &reads}, query.Options{RefreshInterval: time.Millisecond})
	q := j.EventsByStream("a", 1, 0)
	take(t, ctx, q, 1)
	got := make(chan []eventstore.Event)
	go func() {
		evs, _ := q.Next(ctx)
		got <- evs
	}()
	waitFor(t, "the query to sleep", func() bool { return j.Permitter().Stats().Granted == 2 })
	appendEvents(t, s, "unrelated", 1)
	time.Sleep(50 * time.Millisecond)
	if n := j.Permitter().Stats().Granted; n != 2 {
		t.Fatalf("%d backend queries while idle, want 2", n)
	}
	appendEvents(t, s, "a", 1)
	if evs := <-got; len(evs) != 1 || evs[0].Seq != 2 {
		t.Fatalf("woken with %v", seqs(evs))
	}
	if n := reads.Load(); n != 3 {
		t.Fatalf("%d reads through the decorator, want 3", n)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCancelEndsLiveQuery(t *testing.T) {
	s := openStore(t)
	appendEvents(t, s, "a", 3)
	j := newReader(t, s, query.Options{MaxConcurrentQueries: 1})
	run := func(name string, next func(context.Context) error) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				for {
					if err := next(ctx); err != nil {
						errc <- err
						return
					}
				}
			}()
			time.Sleep(20 * time.Millisecond)
			cancel()
			select {
			case err := <-errc:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("ended with %v", err)
				}
			case <-time.After(patience):
				t.Fatal("cancelled query did not end")
			}
			checkIdle(t, j)
		})
	}
	events := func(q *query.Events) func(context.Context) error {
		return func(ctx context.Context) error { _, err := q.Next(ctx); return err }
	}
	run("EventsByStream", events(j.EventsByStream("a", 1, 0)))
	run("AllEvents", events(j.AllEvents(1)))
	run("EventsByTag", events(j.EventsByTag("t", 1)))
	ids := j.StreamIDs()
	run("StreamIDs", func(ctx context.Context) error { _, err := ids.Next(ctx); return err })
	polled := newReader(t, hidden{s}, query.Options{RefreshInterval: time.Hour})
	run("polling", events(polled.AllEvents(1)))

	// Cancelled while queued for a permit: the wait ends, and the queue
	// forgets it.
	if err := j.Permitter().Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() { _, err := j.CurrentAllEvents(1).Next(ctx); errc <- err }()
	waitFor(t, "the query to queue", func() bool { return j.Permitter().Stats().Waiting == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("queued query ended with %v", err)
	}
	j.Permitter().Release()
	checkIdle(t, j)

	// A cancelled live query resumes where it stood.
	q := j.EventsByStream("a", 1, 0)
	take(t, context.Background(), q, 3)
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer ccancel()
	if _, err := q.Next(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("idle live query: %v", err)
	}
	appendEvents(t, s, "a", 1)
	if got := take(t, testCtx(t), q, 1); got[0].Seq != 4 {
		t.Fatalf("resumed at %d", got[0].Seq)
	}
}

func TestCloseEndsLiveQueries(t *testing.T) {
	s := openStore(t)
	j, err := query.New(s, query.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := j.AllEvents(1)
	errc := make(chan error)
	go func() { _, err := q.Next(context.Background()); errc <- err }()
	time.Sleep(10 * time.Millisecond)
	j.Close()
	if err := <-errc; !errors.Is(err, query.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if _, err := j.CurrentAllEvents(1).Next(context.Background()); !errors.Is(err, query.ErrClosed) {
		t.Fatalf("new query after Close: %v", err)
	}
	checkIdle(t, j)
}

// TestManyLiveQueries runs many more live queries than permits: each
// gets its stream exactly, and no more backend queries than permits ever
// run at once.
func TestManyLiveQueries(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t)
	const streams, perStream, limit = 300, 12, 4
	j := newReader(t, s, query.Options{MaxBufferSize: 5, MaxConcurrentQueries: limit})
	var wg sync.WaitGroup
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := take(t, ctx, j.EventsByStream(fmt.Sprintf("s-%d", i), 0, 0), perStream)
			if !slices.Equal(seqs(got), span(1, perStream)) {
				t.Errorf("stream %d: %v", i, seqs(got))
			}
		}()
	}
	for k := range perStream / 3 {
		for i := range streams {
			appendEvents(t, s, fmt.Sprintf("s-%d", (i+k)%streams), 3)
		}
	}
	wg.Wait()
	st := j.Permitter().Stats()
	if st.Peak > limit || st.InUse != 0 || st.Waiting != 0 {
		t.Fatalf("permitter: %+v", st)
	}
}

func TestIterators(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t)
	appendEvents(t, s, "a", 10)
	appendEvents(t, s, "b", 1)
	j := newReader(t, s, query.Options{MaxBufferSize: 4})
	q := j.CurrentEventsByStream("a", 1, 0)
	var got []uint64
	for ev, err := range q.All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Seq)
		if ev.Seq == 2 {
			break // in the middle of a page: the query resumes at 3
		}
	}
	for ev, err := range q.All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Seq)
	}
	if !slices.Equal(got, span(1, 10)) {
		t.Fatalf("iterated %v", got)
	}

	ids := j.CurrentStreamIDs()
	var names []string
	for id, err := range ids.All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, id)
		break
	}
	for id, err := range ids.All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, id)
	}
	if !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("ids %v", names)
	}

	// An error is yielded once and ends the loop.
	n := 0
	for _, err := range j.CurrentEventsByStream("bad\x01id", 0, 0).All(ctx) {
		n++
		if !errors.Is(err, eventstore.ErrInvalidStreamID) {
			t.Fatalf("yielded %v", err)
		}
	}
	if n != 1 {
		t.Fatalf("yielded %d times", n)
	}
}

func TestMetrics(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t)
	appendEvents(t, s, "a", 3)
	reg := prometheus.NewRegistry()
	j := newReader(t, s, query.Options{MaxConcurrentQueries: 2, Registerer: reg})
	drain(t, ctx, j.CurrentAllEvents(1))
	if err := j.Permitter().Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	defer j.Permitter().Release()
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		switch {
		case m.GetGauge() != nil:
			got[mf.GetName()] = m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			got[mf.GetName()] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"logbook_query_throttler_waiters":        0,
		"logbook_query_throttler_permits_in_use": 1,
		"logbook_query_throttler_permits":        2,
		"logbook_query_backend_queries_total":    2, // the one page (it reached the head), the permit above
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %v, want %v (all: %v)", name, got[name], v, got)
		}
	}
	// A second reader on the same registry shares the metrics.
	j2 := newReader(t, s, query.Options{MaxConcurrentQueries: 5, Registerer: reg})
	drain(t, ctx, j2.CurrentAllEvents(1))
	mfs, err = reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		switch mf.GetName() {
		case "logbook_query_throttler_permits":
			if v := m.GetGauge().GetValue(); v != 7 {
				t.Errorf("shared permits gauge %v, want 7", v)
			}
		case "logbook_query_backend_queries_total":
			if v := m.GetCounter().GetValue(); v != 3 {
				t.Errorf("shared backend queries %v, want 3", v)
			}
		}
	}
}
