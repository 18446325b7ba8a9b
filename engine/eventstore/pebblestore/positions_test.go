package pebblestore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/logbook/logbook/engine/eventstore"
)

func appendN(t *testing.T, s *Store, stream string, n int) {
	t.Helper()
	batch := make([]eventstore.NewEvent, n)
	for i := range batch {
		batch[i] = eventstore.NewEvent{Type: "E", Data: bytes.Repeat([]byte("d"), 200)}
	}
	if _, err := s.Append(t.Context(), stream, eventstore.Any, batch); err != nil {
		t.Fatal(err)
	}
}

// eventKeys scans the event keys in [from, to] with opts and returns
// their positions and the bytes of table blocks the scan read.
func eventKeys(t *testing.T, s *Store, opts *pebble.IterOptions) ([]uint64, uint64) {
	t.Helper()
	iter, err := s.db.NewIter(opts)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for ok := iter.First(); ok; ok = iter.Next() {
		out = append(out, be64(iter.Key()[1:]))
	}
	read := iter.Stats().InternalStats.BlockBytes
	if err := iter.Close(); err != nil {
		t.Fatal(err)
	}
	return out, read
}

// TestTailReadSkipsTables: a read of the newest events, which are in the
// memtable, reads no block of the tables flushed before them, though each
// table's key range (its first event key to its last stream index key)
// overlaps the read's. Without the position property every table is
// sought into.
func TestTailReadSkipsTables(t *testing.T) {
	s, err := Open(t.TempDir(), Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 3 {
		appendN(t, s, fmt.Sprint("s", i), 500)
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	appendN(t, s, "tail", 5)
	head := s.durable.Load()

	got, read := eventKeys(t, s, eventRange(head-4, head))
	if want := []uint64{head - 4, head - 3, head - 2, head - 1, head}; !slices.Equal(got, want) {
		t.Fatalf("tail read = %v, want %v", got, want)
	}
	if read != 0 {
		t.Errorf("the tail read read %d bytes of table blocks, want none", read)
	}
	plain := &pebble.IterOptions{LowerBound: eventKey(nil, head-4), UpperBound: eventKey(nil, head+1)}
	if _, read := eventKeys(t, s, plain); read == 0 {
		t.Errorf("without the filter the read touched no table either: the test shows nothing")
	}
	evs, err := s.ReadAll(t.Context(), head-4, 100)
	if err != nil || len(evs) != 5 || evs[0].Position != head-4 || evs[0].Stream != "tail" {
		t.Fatalf("ReadAll(%d) = %d events, %v", head-4, len(evs), err)
	}
}

// TestPositionFilterHidesNothingAndShowsNothingDeleted: under random
// appends, removals, sweeps, deletions of event keys left uncompacted,
// flushes and compactions, a filtered read of any range of positions
// returns exactly the keys an unfiltered read does. A deletion the filter
// skipped while the older event it deletes stayed visible would show up
// here as an extra position.
func TestPositionFilterHidesNothingAndShowsNothingDeleted(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			s, err := Open(t.TempDir(), Options{SweepInterval: -1, MemTableBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := t.Context()
			streams := []string{"a", "b", "c", "d", "e"}
			removed := 0
			for step := range 300 {
				st := streams[rng.IntN(len(streams))]
				switch r := rng.IntN(20); {
				case r < 12:
					appendN(t, s, st, 1+rng.IntN(40))
				case r < 14:
					mode := eventstore.DeleteSoft
					if rng.IntN(4) == 0 {
						mode = eventstore.DeleteHard
						streams = slices.DeleteFunc(slices.Clone(streams), func(x string) bool { return x == st })
						streams = append(streams, fmt.Sprint(st, step))
					}
					if err := s.DeleteStream(ctx, st, mode); err != nil {
						t.Fatal(err)
					}
				case r < 15:
					if v, err := s.StreamVersion(ctx, st); err == nil && v > 2 {
						if err := s.TruncateStream(ctx, st, 1+uint64(rng.IntN(int(v)))); err != nil {
							t.Fatal(err)
						}
					}
				case r < 17:
					stats, err := s.Sweep(ctx)
					if err != nil {
						t.Fatal(err)
					}
					removed += int(stats.Removed)
				case r < 18:
					// A sweep's deletions without the compaction that
					// follows it (TestPositionFilterSeesDeletions).
					if head := s.durable.Load(); head > 0 {
						b := s.db.NewBatch()
						from := 1 + uint64(rng.IntN(int(head)))
						for pos := from; pos <= head && pos < from+20; pos++ {
							_ = b.DeleteSized(eventKey(nil, pos), 300, nil)
						}
						if err := b.Commit(pebble.NoSync); err != nil {
							t.Fatal(err)
						}
					}
				case r < 19:
					if err := s.db.Flush(); err != nil {
						t.Fatal(err)
					}
				default:
					if err := s.db.Compact(ctx, []byte{prefixEvent}, []byte{prefixEvent + 1}, rng.IntN(2) == 0); err != nil {
						t.Fatal(err)
					}
				}
				head := s.durable.Load()
				if head == 0 {
					continue
				}
				for range 3 {
					from := 1 + uint64(rng.IntN(int(head)))
					to := from + uint64(rng.IntN(int(head-from)+1))
					got, _ := eventKeys(t, s, eventRange(from, to))
					want, _ := eventKeys(t, s, &pebble.IterOptions{LowerBound: eventKey(nil, from), UpperBound: eventKey(nil, to+1)})
					if !slices.Equal(got, want) {
						i := 0
						for i < min(len(got), len(want)) && got[i] == want[i] {
							i++
						}
						t.Fatalf("step %d: positions %d..%d: the filtered read has %d positions, the plain one %d; they differ from the %dth on (%v against %v)",
							step, from, to, len(got), len(want), i+1, got[i:min(i+5, len(got))], want[i:min(i+5, len(want))])
					}
				}
			}
			if removed == 0 {
				t.Fatalf("no sweep removed anything: the test exercised no deletion")
			}
		})
	}
}

// TestPositionFilterSeesDeletions: events flushed to a table, then their
// keys deleted as the sweep deletes them and the deletions flushed to a
// table of their own, before any compaction joins the two (the sweep
// compacts what it removed, but a crash or its byte budget can leave the
// deletions apart): a filtered read of those positions returns none of
// them. The deletions' table holds no event, only deletions, so it is
// read only because a deletion counts as its event's position.
func TestPositionFilterSeesDeletions(t *testing.T) {
	s, err := Open(t.TempDir(), Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appendN(t, s, "gone", 30)
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	b := s.db.NewBatch()
	for pos := uint64(1); pos <= 30; pos++ {
		_ = b.DeleteSized(eventKey(nil, pos), 300, nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := s.Metrics().Levels[0].TablesCount; n < 2 {
		t.Fatalf("%d tables in L0, want the events' and the deletions' apart", n)
	}
	if got, _ := eventKeys(t, s, eventRange(5, 20)); len(got) != 0 {
		t.Fatalf("filtered read of deleted positions 5..20 = %v, want none", got)
	}
}
