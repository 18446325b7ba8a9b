package pebblestore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/verify"
)

// writeStore makes a store of 3 streams: a has 3 events tagged x, b has
// 2 events (one append of 2) tagged y, c has 1 event; a snapshot of a at
// 2. Positions: a1 1, a2 2, b1 3, b2 4, a3 5, c1 6.
func writeStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ev := func(tags ...string) eventstore.NewEvent {
		return eventstore.NewEvent{Type: "T", Tags: tags, Data: []byte("payload")}
	}
	for _, a := range []struct {
		stream string
		events []eventstore.NewEvent
	}{
		{"a", []eventstore.NewEvent{ev("x")}},
		{"a", []eventstore.NewEvent{ev("x")}},
		{"b", []eventstore.NewEvent{ev("y"), ev("y")}},
		{"a", []eventstore.NewEvent{ev("x")}},
		{"c", []eventstore.NewEvent{ev()}},
	} {
		if _, err := s.Append(ctx, a.stream, eventstore.Any, a.events); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveSnapshot(ctx, eventstore.Snapshot{Stream: "a", Seq: 2, Data: []byte("s")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// corrupt opens the store's database raw and changes it.
func corrupt(t *testing.T, dir string, change func(db *pebble.DB) error) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := change(db); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyCleanStore(t *testing.T) {
	dir := writeStore(t)
	r, err := Verify(dir, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || r.Head != 6 || r.Events != 6 || r.Streams != 3 {
		t.Fatalf("report %+v, want head 6, 6 events, 3 streams, no problem", r)
	}
}

func TestVerifyFindsCorruption(t *testing.T) {
	set := func(k, v []byte) func(*pebble.DB) error {
		return func(db *pebble.DB) error { return db.Set(k, v, pebble.Sync) }
	}
	del := func(keys ...[]byte) func(*pebble.DB) error {
		return func(db *pebble.DB) error {
			for _, k := range keys {
				if err := db.Delete(k, pebble.Sync); err != nil {
					return err
				}
			}
			return nil
		}
	}
	pos := func(p uint64) []byte { return eventKey(nil, p) }
	posValue := func(p uint64) []byte { return pos(p)[1:] }
	for _, c := range []struct {
		name   string
		change func(*pebble.DB) error
		want   verify.Kind
	}{
		// Position 4 gone with its index entries: the log has a hole.
		{"gap", del(pos(4), streamKey(nil, "b", 2), tagKey(nil, "y", 4)), verify.Gap},
		{"undecodable record", set(pos(3), []byte{9, 9, 9}), verify.Corrupt},
		// b's events renumbered as if an event were missing: 1, 3.
		{"stream version", func(db *pebble.DB) error {
			return errors.Join(db.Delete(streamKey(nil, "b", 2), nil), db.Set(streamKey(nil, "b", 3), posValue(4), pebble.Sync))
		}, verify.StreamVersion},
		{"stream index entry missing", del(streamKey(nil, "c", 1)), verify.StreamIndex},
		{"stream index names another event", set(streamKey(nil, "c", 1), posValue(5)), verify.StreamIndex},
		{"tag entry missing", del(tagKey(nil, "x", 2)), verify.TagIndex},
		{"tag entry names an event without the tag", set(tagKey(nil, "x", 6), nil), verify.TagIndex},
		{"snapshot beyond the stream", set(snapshotKey(nil, "c"), encodeSnapshot(eventstore.Snapshot{Seq: 5, Data: []byte("s")})), verify.Snapshot},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeStore(t)
			corrupt(t, dir, c.change)
			r, err := Verify(dir, VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Has(c.want) {
				t.Fatalf("no %s problem found: %+v", c.want, r)
			}
			if r.Err() == nil {
				t.Fatal("Err is nil for a report with problems")
			}
		})
	}
}

// A flipped bit in a table fails its block's checksum.
func TestVerifyFindsChecksumFailure(t *testing.T) {
	dir := writeStore(t)
	corrupt(t, dir, func(db *pebble.DB) error { return db.Flush() })
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no table after a flush")
	}
	for _, name := range tables {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/4] ^= 0x40 // inside the data blocks, before index and footer
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Verify(dir, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Has(verify.Corrupt) {
		t.Fatalf("no corruption found: %+v", r)
	}
}

func TestVerifyRefusesWhatIsNoStore(t *testing.T) {
	if _, err := Verify(filepath.Join(t.TempDir(), "missing"), VerifyOptions{}); err == nil || !strings.Contains(err.Error(), "no such directory") {
		t.Errorf("missing directory: %v", err)
	}
	if _, err := Verify(t.TempDir(), VerifyOptions{}); !errors.Is(err, ErrNotStore) {
		t.Errorf("empty directory: %v, want ErrNotStore", err)
	}
	other := t.TempDir()
	corrupt(t, other, func(db *pebble.DB) error { return db.Set([]byte("k"), []byte("v"), pebble.Sync) })
	if _, err := Verify(other, VerifyOptions{}); !errors.Is(err, ErrNotStore) {
		t.Errorf("a Pebble database not a store: %v, want ErrNotStore", err)
	}
	// A store open in a process is locked.
	dir := t.TempDir()
	s, err := Open(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Verify(dir, VerifyOptions{}); err == nil || !strings.Contains(err.Error(), "server") {
		t.Errorf("store in use: %v", err)
	}
}

// A store with removals verifies clean: the positions of removed events
// are gaps the sweep left on purpose, a truncated stream starts past 1,
// a deleted one has no events left — none of it is a problem.
func TestVerifyAfterRemovals(t *testing.T) {
	dir := writeStore(t)
	ctx := context.Background()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// a: 3 events at 1, 2, 5; b: 2 at 3, 4; c: 1 at 6.
	if err := s.TruncateStream(ctx, "a", 3); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteStream(ctx, "b", eventstore.DeleteHard); err != nil {
		t.Fatal(err)
	}
	for _, sweep := range []bool{false, true} {
		if sweep {
			if _, err := s.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := Verify(dir, VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() || r.Head != 6 {
			t.Fatalf("swept %v: report %+v, want head 6 and no problem", sweep, r)
		}
		if s, err = Open(dir, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	// A gap the removals do not explain is still found: remove c's
	// event, above every removed position, by hand.
	corrupt(t, dir, func(db *pebble.DB) error { return db.Delete(eventKey(nil, 6), pebble.Sync) })
	if r, err := Verify(dir, VerifyOptions{}); err != nil || r.OK() {
		t.Fatalf("a position lost above the removals: %+v, %v", r, err)
	}
}
