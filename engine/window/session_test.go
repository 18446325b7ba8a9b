package window

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// sessionModel recomputes session windows from the raw events in log
// order, the slow way.
type sessionModel struct {
	gap, grace int64
	st         int64
	open       map[[2]string][]*msession // per key, sessions in no order
	done       []*msession
	late       map[lateKey]uint64
}

type msession struct {
	key        [2]string
	start, end int64
	s          *mstate
}

type lateKey struct {
	key        [2]string
	start, end int64
}

// add applies one event as Kafka Streams would, but for closed sessions
// being final: an event merges with the open sessions of its key that
// its window [t, t+gap) overlaps. One whose own window has closed joins
// only the open session it falls inside, else it is late in a window of
// its own; one whose window is open but overlaps a closed session is
// late in that session.
func (m *sessionModel) add(e tev) {
	m.st = max(m.st, e.T)
	k := [2]string{e.Sender, e.Kind}
	closed := func(end int64) bool { return end < m.st-m.grace }
	var open []*msession
	for _, s := range m.open[k] {
		if closed(s.end) {
			m.done = append(m.done, s) // closed: final
		} else {
			open = append(open, s)
		}
	}
	m.open[k] = open
	overlaps := func(s *msession) bool { return s.start < e.T+m.gap && e.T < s.end }
	if closed(e.T + m.gap) {
		for _, s := range open {
			if s.start <= e.T && e.T < s.end {
				s.s.count++
				s.s.sum += e.V
				s.s.min, s.s.max = min(s.s.min, e.V), max(s.s.max, e.V)
				s.s.users[e.User] = true
				return
			}
		}
		m.late[lateKey{k, e.T, e.T + m.gap}]++
		return
	}
	for _, s := range m.done {
		if s.key == k && overlaps(s) {
			m.late[lateKey{k, s.start, s.end}]++
			return
		}
	}
	merged := &msession{key: k, start: e.T, end: e.T + m.gap, s: &mstate{min: e.V, max: e.V, users: map[string]bool{e.User: true}, count: 1, sum: e.V}}
	var keep []*msession
	for _, s := range open {
		if overlaps(s) {
			merged.start, merged.end = min(merged.start, s.start), max(merged.end, s.end)
			x := merged.s
			x.count += s.s.count
			x.sum += s.s.sum
			x.min, x.max = min(x.min, s.s.min), max(x.max, s.s.max)
			for u := range s.s.users {
				x.users[u] = true
			}
			continue
		}
		keep = append(keep, s)
	}
	m.open[k] = append(keep, merged)
}

// rows answers a query grouped by both dimensions, over all time.
func (m *sessionModel) rows() []Row {
	var all []*msession
	all = append(all, m.done...)
	for _, l := range m.open {
		all = append(all, l...)
	}
	type gk struct {
		start, end int64
		key        [2]string
	}
	groups := map[gk]*Row{}
	row := func(g gk) *Row {
		r := groups[g]
		if r == nil {
			r = &Row{Start: time.Unix(0, g.start).UTC(), End: time.Unix(0, g.end).UTC(),
				Dims:   map[string]string{"sender": g.key[0], "kind": g.key[1]},
				Closed: g.end < m.st-m.grace, Values: map[string]Stat{"v": {}}, Distinct: map[string]DistinctCount{"user": {0, true}}}
			groups[g] = r
		}
		return r
	}
	for _, s := range all {
		r := row(gk{s.start, s.end, s.key})
		mn, mx, avg := s.s.min, s.s.max, s.s.sum/float64(s.s.count)
		r.Count = s.s.count
		r.Values["v"] = Stat{Sum: s.s.sum, Min: &mn, Max: &mx, Avg: &avg}
		r.Distinct["user"] = DistinctCount{uint64(len(s.s.users)), true}
	}
	for l, n := range m.late {
		row(gk{l.start, l.end, l.key}).Late += n
	}
	var rows []Row
	for _, r := range groups {
		r.LateOnly = r.Count == 0 && r.Late > 0
		rows = append(rows, *r)
	}
	sortRows(rows)
	return rows
}

func TestSessionsRandomized(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	def := testDef("sessions", Session(5*time.Minute), 3*time.Minute)
	m := &sessionModel{gap: int64(def.Window.Gap), grace: int64(def.Grace), st: -1 << 63,
		open: map[[2]string][]*msession{}, late: map[lateKey]uint64{}}
	var evs []tev
	clock := at("2025-03-01T00:00:00Z").UnixNano()
	for range 3000 {
		clock += int64(rng.IntN(int(20 * time.Second)))
		ts := clock
		if rng.IntN(10) == 0 {
			ts -= int64(rng.IntN(int(12 * time.Minute))) // out of order, some late
		}
		e := tev{T: ts, Sender: fmt.Sprintf("s%d", rng.IntN(3)), Kind: fmt.Sprintf("k%d", rng.IntN(2)),
			V: float64(rng.IntN(50)), User: fmt.Sprintf("u%d", rng.IntN(8))}
		evs = append(evs, e)
		m.add(e)
	}
	st := openStore(t, t.TempDir())
	defer st.Close()
	dir := t.TempDir()
	a, err := Open(dir, def, Options{MaxRows: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, st, evs[:len(evs)/3])
	catchUp(t, st, a, 1+rng.IntN(200))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if a, err = Open(dir, def, Options{MaxRows: 100_000}); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	appendEvents(t, st, evs[len(evs)/3:])
	catchUp(t, st, a, 1+rng.IntN(200))
	got := query(t, a, Query{GroupBy: []string{"sender", "kind"}})
	if want := show(m.rows()); got != want {
		t.Fatalf("seed %d:\ngot:\n%s\nwant:\n%s", seed, got, want)
	}
}
