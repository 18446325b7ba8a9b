package window

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/priority"
)

// TestKeyNumbers checks the writer's numbering of keys: senders change
// from day to day, so that keys leave memory as days close, and the
// numbers are made afresh at every close of a day (renumberMin below 0) and
// at each reopen. Every window must stay exact against the model, and
// the interner must not hold many more keys than the open buckets.
func TestKeyNumbers(t *testing.T) {
	defer func(n int) { renumberMin = n }(renumberMin)
	// Below zero: at every close of a day, however many keys are open.
	// (At 0 the close renumbers only when the interner holds more than
	// twice the open keys, which a catch-up batch that already holds the
	// new day's every key does not leave: 36 keys, 18 open, in some runs.)
	renumberMin = -1 << 30
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	def := testDef("numbers", Tumbling(time.Minute), 2*time.Minute, time.Hour, 24*time.Hour)
	m := newModel(def)
	base := at("2024-02-27T20:00:00Z").UnixNano()
	var evs []tev
	clock := base
	for range 3000 {
		clock += int64(rng.IntN(int(80 * time.Second)))
		tm := clock
		if rng.IntN(20) == 0 {
			tm -= int64(rng.IntN(int(3 * time.Hour))) // late, or within grace
		}
		day := tm / int64(24*time.Hour) % 10 // the UTC day
		e := tev{T: tm, Sender: fmt.Sprintf("d%d-s%d", day, rng.IntN(6)), Kind: fmt.Sprintf("k%d", rng.IntN(3)),
			V: float64(rng.IntN(100)), User: fmt.Sprintf("u%d", rng.IntN(10))}
		evs = append(evs, e)
		m.add(e)
	}
	st := openStore(t, t.TempDir())
	defer st.Close()
	dir := t.TempDir()
	var a *Aggregation
	renumbered := 0
	for i, part := range [][]tev{evs[:1000], evs[1000:2200], evs[2200:]} {
		var err error
		if a, err = Open(dir, def, Options{}); err != nil {
			t.Fatal(err)
		}
		appendEvents(t, st, part)
		catchUp(t, st, a, 1+rng.IntN(200))
		open := map[int32]bool{}
		for _, bk := range a.open {
			for k, s := range bk.byID {
				if s != nil {
					open[s.key] = true
				}
				if s != nil && (s.key != int32(k) || s.dims != a.in.keys[k]) {
					t.Fatalf("part %d: entry %d of a bucket numbered %d, %q", i, k, s.key, s.dims)
				}
			}
		}
		if a.in.len() > 2*len(open)+3*18 {
			t.Errorf("part %d: %d keys numbered, %d open", i, a.in.len(), len(open))
		}
		renumbered += a.renumbered
		if i < 2 {
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer a.Close()
	if renumbered == 0 {
		t.Error("the keys were never numbered afresh")
	}
	for i := range 100 {
		q := Query{Unit: []time.Duration{0, time.Hour, 24 * time.Hour, 48 * time.Hour}[rng.IntN(4)]}
		if rng.IntN(2) == 0 {
			q.Filter = map[string]string{"sender": fmt.Sprintf("d%d-s%d", rng.IntN(10), rng.IntN(6))}
		}
		if rng.IntN(2) == 0 {
			q.Filter = map[string]string{"kind": fmt.Sprintf("k%d", rng.IntN(3))}
		}
		for _, d := range []string{"sender", "kind"} {
			if rng.IntN(2) == 0 {
				q.GroupBy = append(q.GroupBy, d)
			}
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

// TestYieldBound holds a query open while a batch is applied: the writer
// steps aside for it, but for at most two thirds of its time.
func TestYieldBound(t *testing.T) {
	def := testDef("yield", Tumbling(time.Minute), 2*time.Minute, time.Hour)
	a := openAgg(t, def)
	var batch []eventstore.Event
	base := at("2024-02-28T22:00:00Z").UnixNano()
	for i := range 40 * yieldEvery {
		data, _ := json.Marshal(tev{T: base + int64(i)*int64(time.Second), Sender: fmt.Sprintf("s%d", i%50), Kind: "k", V: 1, User: "u"})
		batch = append(batch, eventstore.Event{Position: uint64(i + 1), Type: "sent", Data: data})
	}
	priority.Begin()
	start := time.Now()
	err := a.Apply(context.Background(), batch)
	el := time.Since(start)
	priority.End()
	if err != nil {
		t.Fatal(err)
	}
	if a.yield.Waited() == 0 || a.yield.Waited() > el*2/3+priority.MaxWait {
		t.Errorf("yielded %v of %v", a.yield.Waited(), el)
	}
	got, err := a.Query(context.Background(), Query{Unit: time.Hour})
	if err != nil || len(got.Rows) == 0 {
		t.Fatalf("%d rows, %v", len(got.Rows), err)
	}
}
