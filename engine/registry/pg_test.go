package registry

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pgstore"
	"github.com/logbook/logbook/internal/testenv"
)

// TestTwoNodesOnPostgres: two registries on two stores sharing one
// PostgreSQL schema (two logbook nodes) register at once — the same
// schemas, different schemas, in shared and separate subjects. Ids must
// never collide (one schema, one id; two schemas, two ids), versions of a
// subject must be 1..n, and each node must at once find what the other
// registered.
func TestTwoNodesOnPostgres(t *testing.T) {
	url, _ := testenv.SchemaURL(t)
	ctx := context.Background()
	var regs [2]*Registry
	for i := range regs {
		store, err := pgstore.Open(ctx, url, pgstore.Options{MaxConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		regs[i] = openRegistry(t, store)
	}
	if err := regs[0].SetLevel(ctx, "", None); err != nil {
		t.Fatal(err)
	}
	const perNode = 12
	schema := func(i int) string {
		return fmt.Sprintf(`{"type":"record","name":"R%d","fields":[{"name":"f","type":"int"}]}`, i)
	}
	type result struct {
		node, i int
		subj    string
		id      int
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
	)
	for node := range regs {
		for g := range 3 {
			wg.Go(func() {
				for i := g; i < perNode; i += 3 {
					// The same schema i in the shared subject from both
					// nodes; a schema of this node's own in its own subject
					// and in the shared one.
					cases := []struct {
						subj string
						s    int
					}{{"shared", i}, {fmt.Sprintf("node%d", node), 100*(node+1) + i}, {"shared", 100*(node+1) + i}}
					for _, c := range cases {
						id, err := regs[node].Register(ctx, c.subj, schema(c.s))
						if err != nil {
							t.Errorf("node %d: %v", node, err)
							return
						}
						mu.Lock()
						results = append(results, result{node, c.s, c.subj, id})
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	idOf := map[int]int{}
	schemaOf := map[int]int{}
	for _, r := range results {
		if id, ok := idOf[r.i]; ok && id != r.id {
			t.Fatalf("schema %d got ids %d and %d", r.i, id, r.id)
		}
		if s, ok := schemaOf[r.id]; ok && s != r.i {
			t.Fatalf("id %d given to schemas %d and %d", r.id, s, r.i)
		}
		idOf[r.i], schemaOf[r.id] = r.id, r.i
	}
	if want := perNode + 2*perNode; len(idOf) != want {
		t.Fatalf("%d distinct schemas, want %d", len(idOf), want)
	}
	for n, reg := range regs {
		// What the other node registered is found at once.
		for s, id := range idOf {
			text, err := reg.SchemaByID(ctx, id)
			if err != nil || text != mustNorm(t, schema(s)) {
				t.Fatalf("node %d, id %d: %q, %v", n, id, text, err)
			}
		}
		for subj, want := range map[string]int{"shared": 3 * perNode, "node0": perNode, "node1": perNode} {
			vs, err := reg.Versions(ctx, subj, false)
			if err != nil || len(vs) != want || !slices.IsSorted(vs) || vs[0] != 1 || vs[len(vs)-1] != want {
				t.Fatalf("node %d, %s: versions %v, %v; want 1..%d", n, subj, vs, err, want)
			}
		}
	}
}

// subscribeCounter counts the subscriptions opened on its store.
type subscribeCounter struct {
	eventstore.Store
	n atomic.Int64
}

func (s *subscribeCounter) Subscribe(ctx context.Context, f eventstore.Filter, from uint64) (eventstore.Subscription, error) {
	s.n.Add(1)
	return s.Store.Subscribe(ctx, f, from)
}

// TestPollFollowsWithoutSubscribing: a registry with Poll never
// subscribes to its store (on PostgreSQL a subscription makes the process
// follow every commit of the log), yet what another node changed reaches
// an answer that does not catch up first — the global compatibility
// level — within a few polls.
func TestPollFollowsWithoutSubscribing(t *testing.T) {
	url, _ := testenv.SchemaURL(t)
	ctx := context.Background()
	var stores [2]eventstore.Store
	for i := range stores {
		s, err := pgstore.Open(ctx, url, pgstore.Options{MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	counted := &subscribeCounter{Store: stores[0]}
	polled, err := Open(ctx, counted, Options{Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { polled.Close() })
	other := openRegistry(t, stores[1])
	if err := other.SetLevel(ctx, "", None); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for polled.Level("") != None && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if l := polled.Level(""); l != None {
		t.Errorf("the polling registry's level is %q 5 s after the other node set NONE", l)
	}
	if n := counted.n.Load(); n != 0 {
		t.Errorf("the polling registry subscribed %d times", n)
	}
}
