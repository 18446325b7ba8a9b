package window

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// TestOldLayoutRebuilds opens a database written in another layout of
// keys (here: the layout marker removed and a bucket in the old one-key
// layout added, as a build before the marker left it): the aggregation
// empties it and the runner rebuilds it from the log, to the same
// answers.
func TestOldLayoutRebuilds(t *testing.T) {
	def := testDef("relayout", Tumbling(time.Minute), 2*time.Minute, time.Hour)
	var evs []tev
	for i := range 300 {
		evs = append(evs, ev("2025-03-01T10:00:00Z", "a", "x", float64(i), "u"))
		evs[i].T += int64(i) * int64(17*time.Second)
		evs[i].Sender = []string{"a", "b", "c"}[i%3]
	}
	st := openStore(t, t.TempDir())
	defer st.Close()
	appendEvents(t, st, evs)
	dir := t.TempDir()
	a, err := Open(dir, def, Options{})
	if err != nil {
		t.Fatal(err)
	}
	catchUp(t, st, a, 7)
	q := Query{Unit: time.Hour, GroupBy: []string{"sender"}}
	want := query(t, a, q)
	if want == "" {
		t.Fatal("no rows")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(layoutKey, nil); err != nil {
		t.Fatal(err)
	}
	old := bucketKey(nil, prefixWindow, 0, at("2025-03-01T10:00:00Z").UnixNano())
	if err := db.Set(old, []byte{bucketFormat, 0, 0, 0, 0, 0, 0, 0, 0}, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	a, err = Open(dir, def, Options{})
	if err != nil {
		t.Fatalf("reopening an old layout: %v", err)
	}
	defer a.Close()
	if cp, _ := a.Checkpoint(context.Background()); cp != 0 {
		t.Fatalf("checkpoint %d after a layout change, want 0 (rebuild)", cp)
	}
	if got := query(t, a, q); got != "" {
		t.Fatalf("rows before the rebuild:\n%s", got)
	}
	catchUp(t, st, a, 7)
	if got := query(t, a, q); got != want {
		t.Fatalf("after the rebuild:\n%s\nwant:\n%s", got, want)
	}
}

// TestDeltas checks that small batches write deltas rather than bases,
// that the deltas stay under half a base, and that a closed bucket is
// compacted to its base alone.
func TestDeltas(t *testing.T) {
	def := testDef("deltas", Tumbling(time.Minute), 0, 24*time.Hour)
	var evs []tev
	for i := range 400 {
		e := ev("2025-03-01T10:00:00Z", "", "x", float64(i), "u")
		e.T += int64(i) * int64(time.Second)
		e.Sender = []string{"a", "b", "c", "d", "e", "f", "g", "h"}[i%8]
		e.Kind = []string{"x", "y", "z"}[i%3]
		evs = append(evs, e)
	}
	// One event of the next day closes the first day.
	next := ev("2025-03-02T00:00:30Z", "a", "x", 1, "u")
	st := openStore(t, t.TempDir())
	defer st.Close()
	a := openAgg(t, def)
	appendEvents(t, st, evs)
	catchUp(t, st, a, 1)
	count := func() (bases, deltas, entries int) {
		err := a.read(func(r pebble.Reader, _ uint64) error {
			it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixWindow, 1}, UpperBound: []byte{prefixWindow, 2}})
			if err != nil {
				return err
			}
			for it.First(); it.Valid(); it.Next() {
				if it.Key()[10] == suffixBase {
					bases++
				} else {
					deltas++
				}
				_, es, _, err := splitRecord(it.Value())
				if err != nil {
					return err
				}
				for rest := es; len(rest) > 0; entries++ {
					if _, _, rest, err = nextEntry(rest); err != nil {
						return err
					}
				}
			}
			return it.Close()
		})
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	bases, deltas, entries := count()
	if bases != 1 || deltas == 0 || entries > 24+12 {
		t.Fatalf("day level: %d bases, %d deltas, %d entries; want 1 base of 24 entries and deltas of at most 12", bases, deltas, entries)
	}
	want := query(t, a, Query{Unit: 24 * time.Hour, GroupBy: []string{"sender", "kind"}})
	appendEvents(t, st, []tev{next})
	catchUp(t, st, a, 1)
	if bases, deltas, entries = count(); bases != 2 || deltas != 0 || entries != 25 {
		t.Fatalf("after the day closed: %d bases, %d deltas, %d entries; want 2, 0, 25", bases, deltas, entries)
	}
	got := query(t, a, Query{To: at("2025-03-02T00:00:00Z"), Unit: 24 * time.Hour, GroupBy: []string{"sender", "kind"}})
	if strings.ReplaceAll(got, " closed", "") != want {
		t.Fatalf("the compacted day:\n%s\nwant:\n%s", got, want)
	}
}
