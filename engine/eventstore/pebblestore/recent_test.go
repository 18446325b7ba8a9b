package pebblestore

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
)

// TestRecentIDsModel adds ids, some of them again, to recent-id tables
// of several sizes and hashes — the real one, and weak ones under which
// many ids share a home slot or even the whole hash — and checks every
// lookup against the plain list of the last cap entries: an id is found
// exactly while one of its entries is among them, at such an entry's
// position. The weak hashes make long probe runs, so deletion's shifting
// back is exercised on every eviction.
func TestRecentIDsModel(t *testing.T) {
	hashes := map[string]func(eventstore.ID) uint64{
		"seeded": nil,
		"few homes": func(id eventstore.ID) uint64 { // 4 homes, distinct tags
			return uint64(id[0])<<32 | uint64(id[1]&3)
		},
		"one hash": func(id eventstore.ID) uint64 { return 7 }, // every entry collides fully
	}
	for name, hash := range hashes {
		for _, n := range []int{1, 3, 16, 100} {
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			r := newRecentIDs(n)
			if hash != nil {
				r.hash = hash
			}
			type entry struct {
				id  eventstore.ID
				pos uint64
			}
			var model []entry // the last n added
			at := map[uint64]eventstore.ID{}
			pool := make([]eventstore.ID, 3*n+2)
			for i := range pool {
				pool[i][0], pool[i][1], pool[i][15] = byte(rng.Uint32()), byte(i), byte(i>>8)
			}
			for step := range 20 * n {
				pos := uint64(step + 1)
				id := pool[rng.IntN(len(pool))]
				r.add(id, pos)
				at[pos] = id
				model = append(model, entry{id, pos})
				if len(model) > n {
					model = model[1:]
				}
				for _, q := range pool {
					var want []uint64
					for _, e := range model {
						if e.id == q {
							want = append(want, e.pos)
						}
					}
					got, ok := r.findHash(r.hashOf(q), func(pos uint64) bool { return at[pos] == q })
					if ok != (len(want) > 0) || ok && !slices.Contains(want, got) {
						t.Fatalf("%s, cap %d, step %d: find %x = %d, %v; want one of %v", name, n, step, q[:2], got, ok, want)
					}
				}
				used := 0
				for _, s := range r.slots {
					if s.tag != 0 {
						used++
					}
				}
				if used != len(model) {
					t.Fatalf("%s, cap %d, step %d: %d slots used, want %d", name, n, step, used, len(model))
				}
			}
		}
	}
}

// TestRecentIDsOff: with no room, nothing is remembered.
func TestRecentIDsOff(t *testing.T) {
	r := newRecentIDs(0)
	r.add(eventstore.ID{1}, 1)
	if _, ok := r.findHash(r.hashOf(eventstore.ID{1}), func(uint64) bool { return true }); ok {
		t.Fatal("found an id in a table of no room")
	}
}

// TestRecentIDsConfirmsID: with every id hashing alike, the store must
// still tell a retry (the same ids, recognized as a duplicate, in the
// batch being built and once stored) from new ids with expected version
// Any, which it writes: the table keeps only hashes, and locate confirms
// the id.
func TestRecentIDsConfirmsID(t *testing.T) {
	ctx := t.Context()
	s, err := Open(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.recent.hash = func(eventstore.ID) uint64 { return 42 } // before the first append reaches the sequencer
	ev := func(id eventstore.ID) []eventstore.NewEvent {
		return []eventstore.NewEvent{{ID: id, Type: "T", Data: []byte("{}")}}
	}
	a, b := eventstore.NewID(), eventstore.NewID()
	first, err := s.Append(ctx, "s", eventstore.Any, ev(a))
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Append(ctx, "s", eventstore.Any, ev(b))
	if err != nil || other.Duplicate || other.FirstPosition == first.FirstPosition {
		t.Fatalf("a new id whose hash is another's: %+v, %v; want it written", other, err)
	}
	again, err := s.Append(ctx, "s", eventstore.Any, ev(a))
	if err != nil || !again.Duplicate || again.FirstPosition != first.FirstPosition {
		t.Fatalf("retry: %+v, %v; want the duplicate of %+v", again, err, first)
	}
	// Within one batch: many appends sent at once, each new id and then
	// its retry, are grouped by the sequencer.
	ids := make([]eventstore.ID, 50)
	results := make([]eventstore.AppendResult, 2*len(ids))
	errs := make([]error, 2*len(ids))
	var wg sync.WaitGroup
	for i := range ids {
		ids[i] = eventstore.NewID()
		for k := range 2 {
			wg.Go(func() { results[2*i+k], errs[2*i+k] = s.Append(ctx, "s", eventstore.Any, ev(ids[i])) })
		}
	}
	wg.Wait()
	for i := range ids {
		r0, r1 := results[2*i], results[2*i+1]
		if errs[2*i] != nil || errs[2*i+1] != nil || r0.FirstPosition != r1.FirstPosition || r0.Duplicate == r1.Duplicate {
			t.Fatalf("id %d sent twice at once: %+v (%v) and %+v (%v); want one written, one its duplicate", i, r0, errs[2*i], r1, errs[2*i+1])
		}
	}
	if head, err := s.Head(ctx); err != nil || head != uint64(2+len(ids)) {
		t.Fatalf("head %d (%v), want %d events", head, err, 2+len(ids))
	}
}
