package window

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/projection"
)

// tev is a test event: the payload the test aggregations read.
type tev struct {
	T      int64   `json:"t"` // Unix ns
	Sender string  `json:"s"`
	Kind   string  `json:"k"`
	V      float64 `json:"v"`
	User   string  `json:"u"`
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func ev(ts, sender, kind string, v float64, user string) tev {
	return tev{T: at(ts).UnixNano(), Sender: sender, Kind: kind, V: v, User: user}
}

// extractTest reads a tev payload; events of other types are skipped.
func extractTest(e *eventstore.Event, r *Record) bool {
	if e.Type != "sent" {
		return false
	}
	var x tev
	if err := json.Unmarshal(e.Data, &x); err != nil {
		return false
	}
	r.Time = time.Unix(0, x.T)
	r.Dims[0], r.Dims[1] = x.Sender, x.Kind
	r.Values[0] = x.V
	r.Distinct[0] = x.User
	return true
}

func testDef(name string, w Window, grace time.Duration, rollUps ...time.Duration) Definition {
	return Definition{
		Name: name, Window: w, Grace: grace, RollUps: rollUps,
		Dims: []string{"sender", "kind"}, Values: []string{"v"}, Distinct: []string{"user"},
		Extract: extractTest,
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openStore(t *testing.T, dir string) *pebblestore.Store {
	t.Helper()
	st, err := pebblestore.Open(dir, pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// appendEvents appends evs in order, a few per append, with an event of
// another type now and then (which the aggregation must skip).
func appendEvents(t testing.TB, st eventstore.Store, evs []tev) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < len(evs); {
		n := min(len(evs)-i, 1+i%7)
		batch := make([]eventstore.NewEvent, 0, n+1)
		for _, e := range evs[i : i+n] {
			data, _ := json.Marshal(e)
			batch = append(batch, eventstore.NewEvent{Type: "sent", Data: data})
		}
		if i%5 == 0 {
			batch = append(batch, eventstore.NewEvent{Type: "other", Data: []byte(`{"t":1}`)})
		}
		if _, err := st.Append(ctx, fmt.Sprintf("s-%d", i%13), eventstore.Any, batch); err != nil {
			t.Fatal(err)
		}
		i += n
	}
}

// catchUp runs the aggregation over st until it reaches the head.
func catchUp(t testing.TB, st eventstore.Store, a *Aggregation, maxBatch int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := projection.NewRunner(st, a, projection.Options{Name: a.Name(), MaxBatch: maxBatch})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	if err := r.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// build opens an aggregation in a temporary directory, appends evs and
// catches up.
func build(t *testing.T, def Definition, evs []tev) *Aggregation {
	t.Helper()
	return buildBatch(t, def, evs, 5)
}

// buildBatch is build with batches of at most maxBatch events.
func buildBatch(t *testing.T, def Definition, evs []tev, maxBatch int) *Aggregation {
	t.Helper()
	st := openStore(t, t.TempDir())
	t.Cleanup(func() { st.Close() })
	a := openAgg(t, def)
	appendEvents(t, st, evs)
	catchUp(t, st, a, maxBatch)
	return a
}

// openAgg opens an aggregation of def in a temporary directory, closed
// when the test ends.
func openAgg(t testing.TB, def Definition) *Aggregation {
	t.Helper()
	a, err := Open(t.TempDir(), def, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// show renders rows one per line, comparable as text.
func show(rows []Row) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%s..%s", r.Start.Format(time.RFC3339), r.End.Format(time.RFC3339))
		keys := make([]string, 0, len(r.Dims))
		for k := range r.Dims {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%s", k, r.Dims[k])
		}
		fmt.Fprintf(&b, " n=%d late=%d", r.Count, r.Late)
		if s, ok := r.Values["v"]; ok {
			fmt.Fprintf(&b, " sum=%g", s.Sum)
			if s.Min != nil {
				fmt.Fprintf(&b, " min=%g max=%g avg=%.6g", *s.Min, *s.Max, *s.Avg)
			}
		}
		if d, ok := r.Distinct["user"]; ok {
			fmt.Fprintf(&b, " users=%d", d.Count)
			if !d.Exact {
				b.WriteString("~")
			}
		}
		if r.Closed {
			b.WriteString(" closed")
		}
		if r.LateOnly {
			b.WriteString(" late-only")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func query(t *testing.T, a *Aggregation, q Query) string {
	t.Helper()
	res, err := a.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return show(res.Rows)
}

// model is a straightforward recomputation of a tumbling aggregation
// (with roll-ups) from the raw events, in log order: the reference the
// randomized and crash tests compare the aggregation with.
type model struct {
	sizes []int64
	grace int64
	st    int64
	win   map[mkey]*mstate
}

type mkey struct {
	level        int
	start        int64
	sender, kind string
}

type mstate struct {
	count, late   uint64
	sum, min, max float64
	users         map[string]bool
}

func newModel(def Definition) *model {
	return &model{sizes: def.levelSizes(), grace: int64(def.Grace), st: math.MinInt64, win: map[mkey]*mstate{}}
}

func (m *model) add(e tev) {
	m.st = max(m.st, e.T)
	base := m.sizes[0]
	late := (e.T/base)*base+base <= m.st-m.grace // times in tests are after 1970
	for l, size := range m.sizes {
		k := mkey{l, (e.T / size) * size, e.Sender, e.Kind}
		s := m.win[k]
		if s == nil {
			s = &mstate{min: math.Inf(1), max: math.Inf(-1), users: map[string]bool{}}
			m.win[k] = s
		}
		if late {
			s.late++
			continue
		}
		s.count++
		s.sum += e.V
		s.min, s.max = min(s.min, e.V), max(s.max, e.V)
		s.users[e.User] = true
	}
}

// query answers q the slow way.
func (m *model) query(q Query) []Row {
	level, unit := 0, int64(0)
	if q.Unit > 0 {
		for l := len(m.sizes) - 1; l >= 0; l-- {
			if int64(q.Unit)%m.sizes[l] == 0 {
				level = l
				if int64(q.Unit) != m.sizes[l] {
					unit = int64(q.Unit)
				}
				break
			}
		}
	}
	from, to := int64(math.MinInt64), int64(math.MaxInt64)
	if !q.From.IsZero() {
		from = q.From.UnixNano()
	}
	if !q.To.IsZero() {
		to = q.To.UnixNano()
	}
	type gkey struct {
		start  int64
		sender string
		kind   string
	}
	groups := map[gkey]*mstate{}
	for k, s := range m.win {
		if k.level != level || k.start < from || k.start >= to {
			continue
		}
		if v, ok := q.Filter["sender"]; ok && v != k.sender {
			continue
		}
		if v, ok := q.Filter["kind"]; ok && v != k.kind {
			continue
		}
		start := k.start
		size := m.sizes[level]
		if unit > 0 {
			start, size = (k.start/unit)*unit, unit
		}
		if q.Final && start+size > m.st-m.grace {
			continue
		}
		g := gkey{start: start}
		for _, d := range q.GroupBy {
			if d == "sender" {
				g.sender = k.sender
			} else {
				g.kind = k.kind
			}
		}
		x := groups[g]
		if x == nil {
			x = &mstate{min: math.Inf(1), max: math.Inf(-1), users: map[string]bool{}}
			groups[g] = x
		}
		x.count += s.count
		x.late += s.late
		x.sum += s.sum
		x.min, x.max = min(x.min, s.min), max(x.max, s.max)
		for u := range s.users {
			x.users[u] = true
		}
	}
	size := m.sizes[level]
	if unit > 0 {
		size = unit
	}
	var rows []Row
	for g, x := range groups {
		r := Row{Start: time.Unix(0, g.start).UTC(), End: time.Unix(0, g.start+size).UTC(), Dims: map[string]string{},
			Count: x.count, Late: x.late, Closed: g.start+size <= m.st-m.grace, LateOnly: x.count == 0 && x.late > 0}
		for _, d := range q.GroupBy {
			if d == "sender" {
				r.Dims[d] = g.sender
			} else {
				r.Dims[d] = g.kind
			}
		}
		s := Stat{Sum: x.sum}
		if x.count > 0 {
			mn, mx, avg := x.min, x.max, x.sum/float64(x.count)
			s.Min, s.Max, s.Avg = &mn, &mx, &avg
		}
		r.Values = map[string]Stat{"v": s}
		r.Distinct = map[string]DistinctCount{"user": {uint64(len(x.users)), true}}
		rows = append(rows, r)
	}
	sortRows(rows)
	return rows
}

// sortRows orders rows as the aggregation does: by start, end, then the
// grouped dimensions.
func sortRows(rows []Row) {
	slices.SortFunc(rows, func(x, y Row) int {
		if c := x.Start.Compare(y.Start); c != 0 {
			return c
		}
		if c := x.End.Compare(y.End); c != 0 {
			return c
		}
		return strings.Compare(x.Dims["sender"]+"\x00"+x.Dims["kind"], y.Dims["sender"]+"\x00"+y.Dims["kind"])
	})
}
