package pgstore

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/verify"
	"github.com/logbook/logbook/internal/testenv"
)

// writePGStore makes, in a fresh schema, the store pebblestore's verify
// tests use: a has 3 events tagged x, b 2 (one append) tagged y, c 1; a
// snapshot of a at 2. Positions: a1 1, a2 2, b1 3, b2 4, a3 5, c1 6.
func writePGStore(t *testing.T) (dbURL, schema string) {
	t.Helper()
	dbURL, schema = testenv.URL(t), testenv.Schema(t)
	s, err := Open(t.Context(), dbURL, Options{Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
		if _, err := s.Append(t.Context(), a.stream, eventstore.Any, a.events); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveSnapshot(t.Context(), eventstore.Snapshot{Stream: "a", Seq: 2, Data: []byte("s")}); err != nil {
		t.Fatal(err)
	}
	return dbURL, schema
}

func TestVerifyCleanPGStore(t *testing.T) {
	dbURL, schema := writePGStore(t)
	r, err := Verify(t.Context(), dbURL, schema)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || r.Head != 6 || r.Events != 6 || r.Streams != 3 {
		t.Fatalf("report %+v, want head 6, 6 events, 3 streams, no problem", r)
	}
}

func TestVerifyPGFindsCorruption(t *testing.T) {
	for _, c := range []struct {
		name string
		sql  string
		want verify.Kind
	}{
		{"gap", `DELETE FROM appends WHERE position = 3; DELETE FROM events WHERE stream = 'b'; DELETE FROM event_tags WHERE tag = 'y'; UPDATE streams SET version = 0 WHERE stream = 'b'`, verify.Gap},
		{"append without its events", `DELETE FROM events WHERE stream = 'c'`, verify.Gap},
		{"event in no append", `INSERT INTO events SELECT stream, 4, gen_random_uuid(), type, version, tags, meta, data FROM events WHERE stream = 'a' AND seq = 3`, verify.StreamIndex},
		{"head", `UPDATE head SET position = 9`, verify.Head},
		{"stream version", `UPDATE streams SET version = 5 WHERE stream = 'a'`, verify.StreamVersion},
		{"stream order", `UPDATE appends SET first_seq = 7 WHERE position = 5; UPDATE events SET seq = 7 WHERE stream = 'a' AND seq = 3; UPDATE streams SET version = 7 WHERE stream = 'a'`, verify.StreamVersion},
		{"tag entry missing", `DELETE FROM event_tags WHERE position = 1`, verify.TagIndex},
		{"tag entry names an event without the tag", `INSERT INTO event_tags VALUES ('x', 6)`, verify.TagIndex},
		{"snapshot beyond the stream", `UPDATE snapshots SET seq = 9`, verify.Snapshot},
	} {
		t.Run(c.name, func(t *testing.T) {
			dbURL, schema := writePGStore(t)
			conn, err := pgx.Connect(t.Context(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(t.Context(), `SET search_path = `+schema+`; `+c.sql); err != nil {
				t.Fatal(err)
			}
			r, err := Verify(t.Context(), dbURL, schema)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Has(c.want) {
				t.Fatalf("no %s problem found: %+v", c.want, r)
			}
		})
	}
}

func TestVerifyPGRefusesWhatIsNoStore(t *testing.T) {
	dbURL, schema := testenv.URL(t), testenv.Schema(t)
	if _, err := Verify(t.Context(), dbURL, schema); !errors.Is(err, ErrNotStore) {
		t.Fatalf("a schema without the store's tables: %v, want ErrNotStore", err)
	}
}

// pgTool finds a client program of the PostgreSQL install
// scripts/postgres.sh uses (Debian's, the newest version).
func pgTool(t *testing.T, name string) string {
	t.Helper()
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	sort.Strings(found)
	if len(found) == 0 {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		if testenv.Required() {
			t.Fatalf("%s not found (scripts/postgres.sh installs it)", name)
		}
		t.Skipf("%s not found", name)
	}
	return found[len(found)-1]
}

// TestPGDumpRestore is the PostgreSQL way to back up a store, as
// docs/operations.md gives it: pg_dump of the store's schema, restored
// with psql into a fresh database, verifies and holds the same head; a
// store opened on it appends after that head.
func TestPGDumpRestore(t *testing.T) {
	pgDump, psql := pgTool(t, "pg_dump"), pgTool(t, "psql")
	dbURL, schema := writePGStore(t)
	// Some more appends, so the head is not the fixture's alone.
	s, err := Open(t.Context(), dbURL, Options{Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := s.Append(t.Context(), "more", eventstore.Any, []eventstore.NewEvent{{Type: "T", Tags: []string{"m"}, Data: []byte{byte(i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	before, err := Verify(t.Context(), dbURL, schema)
	if err != nil || !before.OK() {
		t.Fatalf("source: %+v, %v", before, err)
	}

	restoreURL := testenv.ScratchDatabase(t, dbURL)

	dump := exec.CommandContext(t.Context(), pgDump, "--schema="+schema, "--no-owner", "--no-privileges", dbURL)
	var sql, stderr bytes.Buffer
	dump.Stdout, dump.Stderr = &sql, &stderr
	if err := dump.Run(); err != nil {
		t.Fatalf("pg_dump: %v: %s", err, stderr.String())
	}
	load := exec.CommandContext(t.Context(), psql, "--quiet", "--no-psqlrc", "-v", "ON_ERROR_STOP=1", "--single-transaction", restoreURL)
	load.Stdin, load.Stdout, load.Stderr = &sql, &stderr, &stderr
	if err := load.Run(); err != nil {
		t.Fatalf("psql: %v: %s", err, stderr.String())
	}

	after, err := Verify(t.Context(), restoreURL, schema)
	if err != nil {
		t.Fatal(err)
	}
	if !after.OK() || after.Head != before.Head || after.Events != before.Events || after.Streams != before.Streams {
		t.Fatalf("restored: %+v, source: %+v", after, before)
	}
	rs, err := Open(t.Context(), restoreURL, Options{Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	res, err := rs.Append(t.Context(), "more", eventstore.Exactly(50), []eventstore.NewEvent{{Type: "T"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.FirstPosition != before.Head+1 {
		t.Fatalf("append to the restored store at %d, want %d", res.FirstPosition, before.Head+1)
	}
}

// A store with removals verifies clean, before and after the sweep; a
// lost event the removals do not explain is still found.
func TestVerifyPGAfterRemovals(t *testing.T) {
	dbURL, schema := writePGStore(t)
	s, err := Open(t.Context(), dbURL, Options{Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// a: 3 events at 1, 2, 5; b: 2 at 3, 4; c: 1 at 6.
	if err := s.TruncateStream(t.Context(), "a", 3); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteStream(t.Context(), "b", eventstore.DeleteHard); err != nil {
		t.Fatal(err)
	}
	for _, sweep := range []bool{false, true} {
		if sweep {
			if _, err := s.Sweep(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		r, err := Verify(t.Context(), dbURL, schema)
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() || r.Head != 6 {
			t.Fatalf("swept %v: report %+v, want head 6 and no problem", sweep, r)
		}
	}
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `DELETE FROM `+schema+`.events WHERE stream = 'c'`); err != nil {
		t.Fatal(err)
	}
	if r, err := Verify(t.Context(), dbURL, schema); err != nil || r.OK() {
		t.Fatalf("an event lost outside the removals: %+v, %v", r, err)
	}
}
