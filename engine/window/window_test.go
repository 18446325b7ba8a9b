package window

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/logbook/logbook/engine/eventstore"
)

func expect(t *testing.T, got, want string) {
	t.Helper()
	want = strings.TrimLeft(want, "\n")
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestTumblingEdges(t *testing.T) {
	def := testDef("edges", Tumbling(time.Minute), 0, time.Hour, 24*time.Hour)
	a := build(t, def, []tev{
		ev("2016-12-31T23:58:59.999Z", "a", "x", 1, "u1"),
		ev("2016-12-31T23:59:00Z", "a", "x", 2, "u1"), // exactly at the first window's end: the next window
		ev("2016-12-31T23:59:59.999999999Z", "a", "x", 3, "u2"),
		ev("2017-01-01T00:00:00Z", "a", "x", 4, "u3"), // the hour and the day change together
		ev("2017-01-01T00:00:30Z", "b", "y", 5, "u3"),
		ev("2020-02-29T12:00:00Z", "a", "x", 6, "u4"), // a leap day is a day
		ev("2020-02-29T23:59:59Z", "a", "x", 7, "u4"),
		ev("2020-03-01T00:00:00Z", "a", "x", 8, "u5"),
	})
	expect(t, query(t, a, Query{GroupBy: []string{"sender"}}), `
2016-12-31T23:58:00Z..2016-12-31T23:59:00Z sender=a n=1 late=0 sum=1 min=1 max=1 avg=1 users=1 closed
2016-12-31T23:59:00Z..2017-01-01T00:00:00Z sender=a n=2 late=0 sum=5 min=2 max=3 avg=2.5 users=2 closed
2017-01-01T00:00:00Z..2017-01-01T00:01:00Z sender=a n=1 late=0 sum=4 min=4 max=4 avg=4 users=1 closed
2017-01-01T00:00:00Z..2017-01-01T00:01:00Z sender=b n=1 late=0 sum=5 min=5 max=5 avg=5 users=1 closed
2020-02-29T12:00:00Z..2020-02-29T12:01:00Z sender=a n=1 late=0 sum=6 min=6 max=6 avg=6 users=1 closed
2020-02-29T23:59:00Z..2020-03-01T00:00:00Z sender=a n=1 late=0 sum=7 min=7 max=7 avg=7 users=1 closed
2020-03-01T00:00:00Z..2020-03-01T00:01:00Z sender=a n=1 late=0 sum=8 min=8 max=8 avg=8 users=1
`)
	expect(t, query(t, a, Query{Unit: time.Hour, To: at("2018-01-01T00:00:00Z")}), `
2016-12-31T23:00:00Z..2017-01-01T00:00:00Z n=3 late=0 sum=6 min=1 max=3 avg=2 users=2 closed
2017-01-01T00:00:00Z..2017-01-01T01:00:00Z n=2 late=0 sum=9 min=4 max=5 avg=4.5 users=1 closed
`)
	expect(t, query(t, a, Query{Unit: 24 * time.Hour, Filter: map[string]string{"kind": "x"}}), `
2016-12-31T00:00:00Z..2017-01-01T00:00:00Z n=3 late=0 sum=6 min=1 max=3 avg=2 users=2 closed
2017-01-01T00:00:00Z..2017-01-02T00:00:00Z n=1 late=0 sum=4 min=4 max=4 avg=4 users=1 closed
2020-02-29T00:00:00Z..2020-03-01T00:00:00Z n=2 late=0 sum=13 min=6 max=7 avg=6.5 users=1 closed
2020-03-01T00:00:00Z..2020-03-02T00:00:00Z n=1 late=0 sum=8 min=8 max=8 avg=8 users=1
`)
	// Two days rolled up at query time from the day level, from aligned
	// to the unit.
	expect(t, query(t, a, Query{Unit: 48 * time.Hour, From: at("2020-02-28T00:00:00Z")}), `
2020-02-28T00:00:00Z..2020-03-01T00:00:00Z n=2 late=0 sum=13 min=6 max=7 avg=6.5 users=1 closed
2020-03-01T00:00:00Z..2020-03-03T00:00:00Z n=1 late=0 sum=8 min=8 max=8 avg=8 users=1
`)
}

func TestHopping(t *testing.T) {
	def := testDef("hop", Hopping(10*time.Minute, 5*time.Minute), 0)
	a := build(t, def, []tev{
		ev("2025-03-01T10:07:00Z", "a", "x", 1, "u1"),
		ev("2025-03-01T10:10:00Z", "a", "x", 2, "u2"), // at the end of [10:00,10:10): not in it
		ev("2025-03-01T10:14:59Z", "a", "x", 4, "u2"),
	})
	expect(t, query(t, a, Query{}), `
2025-03-01T10:00:00Z..2025-03-01T10:10:00Z n=1 late=0 sum=1 min=1 max=1 avg=1 users=1 closed
2025-03-01T10:05:00Z..2025-03-01T10:15:00Z n=3 late=0 sum=7 min=1 max=4 avg=2.33333 users=2
2025-03-01T10:10:00Z..2025-03-01T10:20:00Z n=2 late=0 sum=6 min=2 max=4 avg=3 users=1
`)
	if _, err := a.Query(context.Background(), Query{Unit: time.Hour}); err == nil {
		t.Error("hopping windows rolled up by unit")
	}
}

func TestSessions(t *testing.T) {
	def := testDef("sess", Session(5*time.Minute), 10*time.Minute)
	a := build(t, def, []tev{
		ev("2025-03-01T10:00:00Z", "a", "x", 1, "u1"),
		ev("2025-03-01T10:02:00Z", "a", "x", 1, "u1"), // extends [10:00,10:05) to [10:00,10:07)
		ev("2025-03-01T10:10:00Z", "a", "x", 1, "u2"), // 8 min after: a new session
		ev("2025-03-01T10:00:00Z", "b", "x", 1, "u1"),
		ev("2025-03-01T10:05:00Z", "b", "x", 1, "u1"), // exactly gap apart: a new session
		ev("2025-03-01T10:06:00Z", "a", "x", 1, "u3"), // out of order, within grace: bridges both sessions of a
	})
	expect(t, query(t, a, Query{GroupBy: []string{"sender"}}), `
2025-03-01T10:00:00Z..2025-03-01T10:05:00Z sender=b n=1 late=0 sum=1 min=1 max=1 avg=1 users=1
2025-03-01T10:00:00Z..2025-03-01T10:15:00Z sender=a n=4 late=0 sum=4 min=1 max=1 avg=1 users=3
2025-03-01T10:05:00Z..2025-03-01T10:10:00Z sender=b n=1 late=0 sum=1 min=1 max=1 avg=1 users=1
`)
	// An event that merges a session starting later moves its start.
	st := openStore(t, t.TempDir())
	defer st.Close()
	b := openAgg(t, def)
	appendEvents(t, st, []tev{
		ev("2025-03-01T10:10:00Z", "a", "x", 1, "u1"),
		ev("2025-03-01T10:08:00Z", "a", "x", 2, "u1"),
		ev("2025-03-01T10:40:00Z", "c", "x", 1, "u1"), // stream time 10:40
		ev("2025-03-01T10:20:00Z", "a", "x", 1, "u1"), // own window closes at 10:35: late
		ev("2025-03-01T10:12:00Z", "a", "x", 1, "u1"), // late too (a closed session is final)
	})
	catchUp(t, st, b, 2)
	expect(t, query(t, b, Query{GroupBy: []string{"sender"}}), `
2025-03-01T10:08:00Z..2025-03-01T10:15:00Z sender=a n=2 late=0 sum=3 min=1 max=2 avg=1.5 users=1 closed
2025-03-01T10:12:00Z..2025-03-01T10:17:00Z sender=a n=0 late=1 sum=0 users=0 closed late-only
2025-03-01T10:20:00Z..2025-03-01T10:25:00Z sender=a n=0 late=1 sum=0 users=0 closed late-only
2025-03-01T10:40:00Z..2025-03-01T10:45:00Z sender=c n=1 late=0 sum=1 min=1 max=1 avg=1 users=1
`)
	// Reopened, the open sessions come back into memory and go on.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := Open(b.dir, def, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	appendEvents(t, st, []tev{ev("2025-03-01T10:44:00Z", "c", "x", 1, "u2")})
	catchUp(t, st, b, 2)
	expect(t, query(t, b, Query{Filter: map[string]string{"sender": "c"}}), `
2025-03-01T10:40:00Z..2025-03-01T10:49:00Z n=2 late=0 sum=2 min=1 max=1 avg=1 users=2
`)
}

func TestGraceAndLate(t *testing.T) {
	def := testDef("late", Tumbling(time.Minute), 30*time.Second, time.Hour)
	st := openStore(t, t.TempDir())
	defer st.Close()
	reg := prometheus.NewRegistry()
	a, err := Open(t.TempDir(), def, Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	appendEvents(t, st, []tev{
		ev("2025-03-01T10:00:10Z", "a", "x", 1, "u1"),
		ev("2025-03-01T10:01:20Z", "a", "x", 1, "u1"),
		ev("2025-03-01T10:00:50Z", "a", "x", 5, "u2"), // window ends 10:01, grace to 10:01:30: accepted
		ev("2025-03-01T10:01:30Z", "a", "x", 1, "u1"),
		ev("2025-03-01T10:00:40Z", "a", "x", 9, "u3"), // stream time 10:01:30 reached end+grace: late
		ev("2025-03-01T09:00:40Z", "a", "x", 9, "u3"), // late for a window never seen
	})
	catchUp(t, st, a, 3)
	expect(t, query(t, a, Query{}), `
2025-03-01T09:00:00Z..2025-03-01T09:01:00Z n=0 late=1 sum=0 users=0 closed late-only
2025-03-01T10:00:00Z..2025-03-01T10:01:00Z n=2 late=1 sum=6 min=1 max=5 avg=3 users=2 closed
2025-03-01T10:01:00Z..2025-03-01T10:02:00Z n=2 late=0 sum=2 min=1 max=1 avg=1 users=1
`)
	// Lateness is decided on the minute, so the hour holds exactly its
	// minutes: the late event is late there too.
	expect(t, query(t, a, Query{Unit: time.Hour}), `
2025-03-01T09:00:00Z..2025-03-01T10:00:00Z n=0 late=1 sum=0 users=0 closed late-only
2025-03-01T10:00:00Z..2025-03-01T11:00:00Z n=4 late=1 sum=8 min=1 max=5 avg=2 users=2
`)
	expect(t, query(t, a, Query{Final: true}), `
2025-03-01T09:00:00Z..2025-03-01T09:01:00Z n=0 late=1 sum=0 users=0 closed late-only
2025-03-01T10:00:00Z..2025-03-01T10:01:00Z n=2 late=1 sum=6 min=1 max=5 avg=3 users=2 closed
`)
	if got := testutil.ToFloat64(a.lateC); got != 2 {
		t.Errorf("late metric %v, want 2", got)
	}
}

func TestDistinctBeyondExact(t *testing.T) {
	def := testDef("distinct", Tumbling(time.Hour), 0)
	def.DistinctExact = 50
	var evs []tev
	for i := range 3000 {
		evs = append(evs, ev("2025-03-01T10:00:00Z", "a", "x", 1, fmt.Sprintf("user-%d", i%2000)))
	}
	evs = append(evs, ev("2025-03-01T10:00:00Z", "b", "x", 1, "u"))
	a := build(t, def, evs)
	res, err := a.Query(context.Background(), Query{GroupBy: []string{"sender"}})
	if err != nil {
		t.Fatal(err)
	}
	d := res.Rows[0].Distinct["user"]
	if d.Exact || d.Count < 1900 || d.Count > 2100 {
		t.Errorf("2000 distinct users beyond the exact limit: %+v", d)
	}
	if d := res.Rows[1].Distinct["user"]; !d.Exact || d.Count != 1 {
		t.Errorf("one user: %+v", d)
	}
}

// TestRandomized checks random pull queries against a recomputation from
// the raw events, with events out of order and late, applied in batches
// of random sizes, across a reopen.
func TestRandomized(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	def := testDef("random", Tumbling(time.Minute), 2*time.Minute, time.Hour, 24*time.Hour)
	m := newModel(def)
	var evs []tev
	base := at("2024-02-28T22:00:00Z").UnixNano()
	clock := base
	for range 4000 {
		clock += int64(rng.IntN(int(40 * time.Second)))
		t := clock
		switch rng.IntN(20) {
		case 0:
			t -= int64(rng.IntN(int(2 * time.Minute))) // out of order, mostly within grace
		case 1:
			t -= int64(rng.IntN(int(3 * time.Hour))) // late
		}
		e := tev{T: t, Sender: fmt.Sprintf("s%d", rng.IntN(4)), Kind: fmt.Sprintf("k%d", rng.IntN(3)),
			V: float64(rng.IntN(100)) - 20, User: fmt.Sprintf("u%d", rng.IntN(30))}
		evs = append(evs, e)
		m.add(e)
	}
	st := openStore(t, t.TempDir())
	defer st.Close()
	dir := t.TempDir()
	a, err := Open(dir, def, Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, st, evs[:len(evs)/2])
	catchUp(t, st, a, 1+rng.IntN(300))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a, err = Open(dir, def, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	appendEvents(t, st, evs[len(evs)/2:])
	catchUp(t, st, a, 1+rng.IntN(300))

	units := []time.Duration{0, time.Minute, 5 * time.Minute, time.Hour, 3 * time.Hour, 24 * time.Hour, 48 * time.Hour}
	for i := range 200 {
		q := Query{Unit: units[rng.IntN(len(units))], Final: rng.IntN(4) == 0}
		if rng.IntN(2) == 0 {
			q.Filter = map[string]string{}
			if rng.IntN(2) == 0 {
				q.Filter["sender"] = fmt.Sprintf("s%d", rng.IntN(5))
			}
			if rng.IntN(2) == 0 {
				q.Filter["kind"] = fmt.Sprintf("k%d", rng.IntN(3))
			}
		}
		for _, d := range []string{"sender", "kind"} {
			if rng.IntN(2) == 0 {
				q.GroupBy = append(q.GroupBy, d)
			}
		}
		if rng.IntN(2) == 0 {
			u := max(int64(q.Unit), int64(time.Minute))
			from := (base-2*int64(time.Hour))/u*u + int64(rng.IntN(40))*u
			q.From = time.Unix(0, from)
			q.To = time.Unix(0, from+int64(rng.IntN(60))*u)
		}
		got, err := a.Query(context.Background(), q)
		if err != nil {
			t.Fatalf("query %d %+v: %v", i, q, err)
		}
		if g, w := show(got.Rows), show(m.query(q)); g != w {
			t.Fatalf("query %d %+v (seed %d):\ngot:\n%s\nwant:\n%s", i, q, seed, g, w)
		}
	}
}

func TestQueryErrors(t *testing.T) {
	a := build(t, testDef("errs", Tumbling(time.Minute), 0, time.Hour), []tev{ev("2025-03-01T10:00:00Z", "a", "x", 1, "u")})
	for _, q := range []Query{
		{Unit: 90 * time.Second},
		{Unit: 2 * time.Hour, From: at("2025-03-01T01:00:00Z")},
		{Filter: map[string]string{"nope": "1"}},
		{GroupBy: []string{"sender", "sender"}},
		{From: at("2025-03-01T10:00:00Z"), To: at("2025-03-01T09:00:00Z")},
	} {
		var qe *QueryError
		if _, err := a.Query(context.Background(), q); err == nil || !errors.As(err, &qe) {
			t.Errorf("%+v: %v, want a QueryError", q, err)
		}
	}
	small, err := Open(t.TempDir(), testDef("small", Tumbling(time.Minute), 0), Options{MaxRows: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	st := openStore(t, t.TempDir())
	defer st.Close()
	appendEvents(t, st, []tev{ev("2025-03-01T10:00:00Z", "a", "x", 1, "u"), ev("2025-03-01T10:01:00Z", "a", "x", 1, "u")})
	catchUp(t, st, small, 10)
	if _, err := small.Query(context.Background(), Query{}); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("two rows with MaxRows 1: %v", err)
	}
}

func TestDefinitionErrors(t *testing.T) {
	for _, d := range []Definition{
		testDef("", Tumbling(time.Minute), 0),
		testDef("x", Tumbling(0), 0),
		testDef("x", Hopping(time.Minute, 2*time.Minute), 0),
		testDef("x", Session(0), 0),
		testDef("x", Session(time.Minute), 0, time.Hour),
		testDef("x", Tumbling(time.Minute), 0, 90*time.Second),
		testDef("x", Tumbling(time.Minute), -time.Second),
		{Name: "x", Window: Tumbling(time.Minute), Dims: []string{"from"}, Extract: extractTest},
		{Name: "x", Window: Tumbling(time.Minute), Dims: []string{"a", "a"}, Extract: extractTest},
		{Name: "x", Window: Tumbling(time.Minute)},
	} {
		if _, err := Open(t.TempDir(), d, Options{}); err == nil {
			t.Errorf("%+v opened", d)
		}
	}
}

func TestKeyEscaping(t *testing.T) {
	dims := []string{"a\x00b", "", "\x00", "plain"}
	got, err := splitDims(appendDims(nil, dims), nil)
	if err != nil || len(got) != 4 {
		t.Fatalf("%q %v", got, err)
	}
	for i := range dims {
		if string(got[i]) != dims[i] {
			t.Errorf("dim %d: %q, want %q", i, got[i], dims[i])
		}
	}
	for _, dims := range [][]string{dims, {"x\x00", "\x00\x00", "", "y"}} {
		gs := splitDimsString(string(appendDims(nil, dims)), nil)
		if !slices.Equal(gs, dims) {
			t.Errorf("splitDimsString: %q, want %q", gs, dims)
		}
	}
	// A filter on an escaped value goes through a base's index.
	def := testDef("esc", Tumbling(time.Minute), 0, time.Hour)
	a := build(t, def, []tev{
		ev("2025-03-01T10:00:00Z", "a\x00b", "\x00", 1, "u"),
		ev("2025-03-01T10:00:10Z", "a", "\x00", 2, "u"),
		ev("2025-03-01T10:00:20Z", "a\x00b", "k", 4, "u"),
	})
	if got, want := query(t, a, Query{Unit: time.Hour, Filter: map[string]string{"sender": "a\x00b"}}), "2025-03-01T10:00:00Z..2025-03-01T11:00:00Z n=2 late=0 sum=5 min=1 max=4 avg=2.5 users=1\n"; got != want {
		t.Errorf("filter on an escaped value: %q, want %q", got, want)
	}
	if floorDiv(-1, 60) != -60 || floorDiv(-60, 60) != -60 || floorDiv(59, 60) != 0 {
		t.Error("floorDiv")
	}
}

func TestCloseEndsQueries(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	a, err := Open(t.TempDir(), testDef("close", Tumbling(time.Minute), 0), Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, st, []tev{ev("2025-03-01T10:00:00Z", "a", "x", 1, "u")})
	catchUp(t, st, a, 10)
	live := make(chan error, 1)
	answered := make(chan struct{}, 1)
	go func() {
		live <- a.Live(context.Background(), Query{}, func(Result) error {
			answered <- struct{}{}
			return nil
		})
	}()
	<-answered
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-live:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("live query ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("live query still running after Close")
	}
	if _, err := a.Query(context.Background(), Query{}); !errors.Is(err, ErrClosed) {
		t.Errorf("query after Close: %v", err)
	}
}

func TestExtractJSON(t *testing.T) {
	def := Definition{Name: "j", Window: Tumbling(time.Minute), Dims: []string{"sender.id", "kind"}, Values: []string{"size"}, Distinct: []string{"to"}}
	def.Extract = ExtractJSON(def, "at", "sent")
	r := Record{Dims: make([]string, 2), Values: make([]float64, 1), Distinct: make([]string, 1)}
	e := eventstore.Event{Type: "sent", Data: []byte(`{"at":"2025-03-01T10:00:00.5Z","sender":{"id":"acme"},"kind":7,"size":12.5,"to":"bob"}`)}
	if !def.Extract(&e, &r) || !r.Time.Equal(at("2025-03-01T10:00:00.5Z")) || r.Dims[0] != "acme" || r.Dims[1] != "7" || r.Values[0] != 12.5 || r.Distinct[0] != "bob" {
		t.Errorf("%+v", r)
	}
	e.Data = []byte(`{"at":1740823200000,"size":1}`)
	if !def.Extract(&e, &r) || !r.Time.Equal(time.UnixMilli(1740823200000)) || r.Dims[0] != "" {
		t.Errorf("milliseconds: %+v", r)
	}
	for _, bad := range []eventstore.Event{
		{Type: "other", Data: e.Data},
		{Type: "sent", Data: []byte(`[1]`)},
		{Type: "sent", Data: []byte(`{"size":1}`)},
		{Type: "sent", Data: []byte(`{"at":"yesterday","size":1}`)},
		{Type: "sent", Data: []byte(`{"at":1,"size":"big"}`)},
	} {
		if def.Extract(&bad, &r) {
			t.Errorf("%s %s extracted", bad.Type, bad.Data)
		}
	}
}

// TestSumsInLogOrder checks that a window adds its events in the log's
// order, as the batch's second pass must keep them when it groups them by
// key: float sums depend on the order. Key a's values, in the log's
// order, sum to 1 (1e16 + 1 rounds to 1e16); reversed, they sum to 0.
// Other keys' events lie between them, and all go in one batch.
func TestSumsInLogOrder(t *testing.T) {
	def := testDef("order", Tumbling(time.Minute), time.Minute, time.Hour)
	st := openStore(t, t.TempDir())
	defer st.Close()
	a := openAgg(t, def)
	appendEvents(t, st, []tev{
		ev("2025-03-01T10:00:01Z", "a", "x", 1e16, "u"),
		ev("2025-03-01T10:00:02Z", "b", "x", 5, "u"),
		ev("2025-03-01T10:00:03Z", "a", "x", 1, "u"),
		ev("2025-03-01T10:00:04Z", "c", "y", 6, "u"),
		ev("2025-03-01T10:00:05Z", "a", "x", -1e16, "u"),
		ev("2025-03-01T10:00:06Z", "b", "y", 7, "u"),
		ev("2025-03-01T10:00:07Z", "a", "x", 1, "u"),
	})
	evs, err := st.ReadAll(testCtx(t), 1, 100)
	if err != nil || len(evs) < 7 { // and events of another type
		t.Fatalf("read %d events: %v", len(evs), err)
	}
	if err := a.Apply(testCtx(t), evs); err != nil {
		t.Fatal(err)
	}
	for _, unit := range []time.Duration{time.Minute, time.Hour} {
		got, err := a.Query(testCtx(t), Query{Unit: unit, Filter: map[string]string{"sender": "a"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Rows) != 1 || got.Rows[0].Count != 4 || got.Rows[0].Values["v"].Sum != 1 {
			t.Errorf("unit %v: %s, want one row of 4 events summing to 1", unit, show(got.Rows))
		}
	}
}
