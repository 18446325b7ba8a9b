package tickets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/eventstore/pgstore"
	"github.com/logbook/logbook/internal/testenv"
)

// newTestService runs a service on a fresh embedded store (no fsync).
func newTestService(t *testing.T, cat Catalogue, gate Gate) *Service {
	t.Helper()
	return newTestServiceOn(t, "embedded", cat, gate)
}

// nodeGate is a gate with a store node per sport (db1, db2, …) that
// counts the requests each node completes and makes none wait: what the
// service's per-node counters are checked against.
type nodeGate struct {
	nodes  []*countingNode
	closed atomic.Bool
}

type countingNode struct{ n atomic.Uint64 }

func (c *countingNode) Completed() uint64 { return c.n.Load() }

// Busy: a millisecond per request.
func (c *countingNode) Busy() time.Duration { return time.Duration(c.n.Load()) * time.Millisecond }

func newNodeGate(sports int) *nodeGate {
	g := &nodeGate{}
	for range sports {
		g.nodes = append(g.nodes, &countingNode{})
	}
	return g
}

func (g *nodeGate) Do(ctx context.Context, sport int, op func() error) error {
	if g.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := op()
	if sport != Control {
		g.nodes[sport].n.Add(1)
	}
	return err
}

func (g *nodeGate) Describe() GateInfo {
	info := GateInfo{Name: "counting", Workers: 3}
	for i, n := range g.nodes {
		info.Nodes = append(info.Nodes, GateNode{Name: fmt.Sprintf("db%d", i+1), Sports: []string{DefaultSports[i]}, Rate: 50, Meter: n})
	}
	return info
}

func (g *nodeGate) Close() { g.closed.Store(true) }

// newTestServiceOn runs a service on a fresh store of the kind named:
// "embedded" (no fsync) or "postgres" (a schema of the test database).
func newTestServiceOn(t *testing.T, kind string, cat Catalogue, gate Gate) *Service {
	t.Helper()
	var store eventstore.Store
	var err error
	switch kind {
	case "embedded":
		store, err = pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	case "postgres":
		store, err = pgstore.Open(t.Context(), testenv.URL(t), pgstore.Options{Schema: testenv.Schema(t)})
	default:
		t.Fatalf("no store kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, store, Config{Catalogue: cat, Gate: gate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		store.Close()
	})
	return s
}

// 256 bookers race for a few seats, booking and returning at random,
// through the direct gate (nothing between them and the aggregates), on
// the embedded store and on PostgreSQL (where the store's own group
// commit and stream locks are what keep a seat from being sold twice).
// Afterwards: the log never sells a seat twice, every acknowledged
// booking and return is in the log where the service said, and the
// search view agrees with the log's final owners. (lab/ticketrig runs
// the same race through each of its schedulers.)
func TestConcurrentBookers(t *testing.T) {
	for _, kind := range []string{"embedded", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			testConcurrentBookers(t, kind)
		})
	}
}

func testConcurrentBookers(t *testing.T, kind string) {
	cat := Catalogue{Sports: DefaultSports, PerSport: 8, Days: 2}
	s := newTestServiceOn(t, kind, cat, nil)
	if st := s.Stats(); st.Arch != DirectName || len(st.Nodes) != 0 || st.Workers != 0 {
		t.Fatalf("the default gate: %+v, want direct, no nodes", st)
	}
	ctx := context.Background()
	type ack struct {
		id, owner, typ string
		pos            uint64
	}
	var (
		mu   sync.Mutex
		acks []ack
		wg   sync.WaitGroup
	)
	for b := range 256 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("booker-%d", b)
			rng := rand.New(rand.NewPCG(uint64(b), 1))
			var mine []string
			for range 12 {
				if len(mine) > 0 && rng.IntN(3) == 0 {
					i := rng.IntN(len(mine))
					id := mine[i]
					res, err := s.Return(ctx, id, owner)
					if err != nil {
						t.Errorf("return %s by %s: %v", id, owner, err)
						return
					}
					mine = append(mine[:i], mine[i+1:]...)
					mu.Lock()
					acks = append(acks, ack{id, owner, "TicketReturned", res.Result.Position})
					mu.Unlock()
					continue
				}
				id := TicketID(cat.Sports[rng.IntN(len(cat.Sports))], rng.IntN(cat.PerSport))
				res, err := s.Book(ctx, id, owner)
				switch {
				case errors.Is(err, ErrTaken):
				case err != nil:
					t.Errorf("book %s by %s: %v", id, owner, err)
					return
				case res.Ticket.Owner != owner:
					t.Errorf("book %s by %s acknowledged with owner %q", id, owner, res.Ticket.Owner)
				case res.Result.Position != 0:
					mine = append(mine, id)
					mu.Lock()
					acks = append(acks, ack{id, owner, "TicketBooked", res.Result.Position})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	audit, err := AuditLog(ctx, s.Store)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit.Violations) > 0 {
		t.Fatalf("seats sold twice: %v", audit.Violations)
	}
	if audit.Events != len(acks) {
		t.Errorf("log has %d ticket events, %d were acknowledged", audit.Events, len(acks))
	}
	for _, a := range acks {
		evs, err := s.Store.ReadAll(ctx, a.pos, 1)
		if err != nil || len(evs) != 1 || evs[0].Stream != Kind+"-"+a.id || evs[0].Type != a.typ {
			t.Fatalf("acknowledged %s of %s by %s at %d: log has %v (%v)", a.typ, a.id, a.owner, a.pos, evs, err)
		}
	}
	// The view, once caught up, shows each ticket's last owner.
	head, _ := s.Store.Head(ctx)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.Search.WaitFor(wctx, head); err != nil {
		t.Fatal(err)
	}
	booked := 0
	for _, sport := range cat.Sports {
		res := s.Search.Current().Find(Query{Sport: sport, Limit: MaxLimit})
		for _, l := range res.Tickets {
			tk, _, err := s.Tickets.State(ctx, l.ID)
			if err == nil && (tk.Owner == "") != l.Available {
				t.Errorf("%s: view says available=%v, aggregate owner %q", l.ID, l.Available, tk.Owner)
			}
			if !l.Available {
				booked++
			}
		}
	}
	if booked != audit.Booked {
		t.Errorf("view has %d booked, the log %d", booked, audit.Booked)
	}
}

func TestIdempotentBooking(t *testing.T) {
	s := newTestService(t, testCat, newNodeGate(len(testCat.Sports)))
	ctx := context.Background()
	first, err := s.Book(ctx, "diving.3", "ann", aggregate.WithIdempotencyKey("key-1"))
	if err != nil || first.Result.Position == 0 {
		t.Fatal(first, err)
	}
	again, err := s.Book(ctx, "diving.3", "ann", aggregate.WithIdempotencyKey("key-1"))
	if err != nil || !again.Result.Duplicate || again.Result.Position != first.Result.Position {
		t.Fatalf("retry = %+v, %v; want the first result again", again, err)
	}
	if _, err := s.Book(ctx, "diving.3", "bob", aggregate.WithIdempotencyKey("key-2")); !errors.Is(err, ErrTaken) {
		t.Fatalf("bob booking ann's seat: %v", err)
	}
	if _, err := s.Return(ctx, "diving.3", "bob"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("bob returning ann's seat: %v", err)
	}
	if _, err := s.Book(ctx, "diving.999", "bob"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown ticket: %v", err)
	}
	if _, err := s.Find(ctx, Query{Sport: "diving", Day: 11, Limit: 1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("day 11 of 10: %v", err)
	}
	if err := s.Control(ctx); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	// Every diving request, the refused ones too, was served by diving's
	// node; the gate's description is reported as it said.
	if st.Control != 1 || st.Sports["diving"] != 4 || st.Nodes["db3"] != 4 || st.Nodes["db1"]+st.Nodes["db2"] != 0 ||
		st.NodeBusy["db3"] != 0.004 || st.Arch != "counting" || st.Workers != 3 || st.NodeRate != 50 || st.Placement["diving"][0] != "db3" {
		t.Errorf("stats %+v", st)
	}
	// Counters are the same numbers, in catalogue and node order.
	sports, nodes := make([]uint64, len(s.Catalogue.Sports)), make([]uint64, len(s.GateInfo().Nodes))
	if control := s.Counters(sports, nodes); control != st.Control {
		t.Errorf("Counters: control %d, Stats %d", control, st.Control)
	}
	for i, name := range s.Catalogue.Sports {
		if sports[i] != st.Sports[name] {
			t.Errorf("Counters: %s %d, Stats %d", name, sports[i], st.Sports[name])
		}
	}
	for i, n := range s.GateInfo().Nodes {
		if nodes[i] != st.Nodes[n.Name] {
			t.Errorf("Counters: %s %d, Stats %d", n.Name, nodes[i], st.Nodes[n.Name])
		}
	}
}

// A search's cached answer is exactly a fresh one's, and a booking moves
// the view so that the next answer shows it.
func TestFindJSONCachedByPosition(t *testing.T) {
	cat := Catalogue{Sports: DefaultSports, PerSport: 20, Days: 2}
	s := newTestService(t, cat, nil)
	ctx := context.Background()
	q := Query{Sport: "cycling", Available: true, Limit: 5}
	fresh := func() string {
		b, err := json.Marshal(s.Search.Current().Find(q))
		if err != nil {
			t.Fatal(err)
		}
		return string(b) + "\n"
	}
	for range 2 { // the second from the cache
		body, err := s.FindJSON(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if string(body) != fresh() {
			t.Fatalf("FindJSON %s, Find %s", body, fresh())
		}
	}
	b, err := s.Book(ctx, "cycling.0", "ann")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Search.WaitFor(ctx, b.Result.Position); err != nil {
		t.Fatal(err)
	}
	body, err := s.FindJSON(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	if string(body) != fresh() || res.Matches != 19 || res.Tickets[0].ID != "cycling.1" || res.Position < b.Result.Position {
		t.Fatalf("after booking cycling.0: %s", body)
	}
}
