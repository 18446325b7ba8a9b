package pgstore

import (
	"context"
	_ "embed"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/internal/testenv"
)

// schemaV1 is the layout of stores made before appends had their own
// table: positions in events, given by a sequencer after the commit.
//
//go:embed testdata/schema_v1.sql
var schemaV1 string

// TestOpensStoreOfPreviousLayout makes a store the way the previous
// version did — sequenced appends, and one its sequencer had not reached
// when the process stopped — and opens it: every event reads back in
// place, the pending append gets the next positions in its order, a
// retry of an old append is recognized, and appending goes on.
func TestOpensStoreOfPreviousLayout(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{`CREATE SCHEMA ` + schema, `SET search_path = ` + schema, schemaV1} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	old := map[string][]eventstore.NewEvent{}
	appendV1 := func(stream string, expect int64, n int, tag string) {
		t.Helper()
		events := withTag(evs(n, stream), tag)
		ids := make([][16]byte, n)
		types, tags, datas := make([]string, n), make([]string, n), make([][]byte, n)
		versions, metas := make([]int32, n), make([]*string, n)
		for i := range events {
			events[i].ID = eventstore.NewID()
			ids[i], types[i], tags[i], datas[i] = events[i].ID, events[i].Type, tag, events[i].Data
		}
		var status int
		if err := conn.QueryRow(ctx, `SELECT status FROM append_events($1, $2, $3, $4, $5, $6, $7, $8)`,
			stream, expect, ids, types, versions, tags, metas, datas).Scan(&status); err != nil || status != 0 {
			t.Fatalf("v1 append to %s: status %d, %v", stream, status, err)
		}
		old[stream] = append(old[stream], events...)
	}
	appendV1("a", 0, 3, "red")
	appendV1("b", 0, 2, "blue")
	appendV1("a", 3, 1, "red")
	if _, err := conn.Exec(ctx, `SELECT * FROM sequence_events(1000, 'x')`); err != nil {
		t.Fatal(err)
	}
	appendV1("b", 2, 2, "red") // committed, never sequenced

	s, err := Open(ctx, url, Options{Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := s.ReadAll(ctx, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a/1", "a/2", "a/3", "b/1", "b/2", "a/4", "b/3", "b/4"}
	if len(all) != len(want) {
		t.Fatalf("read %d events after the migration, want %d", len(all), len(want))
	}
	for i, ev := range all {
		if got := fmt.Sprintf("%s/%d", ev.Stream, ev.Seq); got != want[i] || ev.Position != uint64(i+1) || ev.Time.IsZero() {
			t.Errorf("position %d holds %s at %d (time %v), want %s", i+1, got, ev.Position, ev.Time, want[i])
		}
		if ev.ID != old[ev.Stream][ev.Seq-1].ID {
			t.Errorf("%s/%d: id changed", ev.Stream, ev.Seq)
		}
	}
	red, err := s.ReadTag(ctx, "red", 1, 100)
	if err != nil || len(red) != 6 || red[5].Stream != "b" || red[5].Position != 8 {
		t.Fatalf("tag red after the migration: %d events, %v", len(red), err)
	}
	res, err := s.Append(ctx, "a", eventstore.Any, old["a"][:3])
	if err != nil || !res.Duplicate || res.FirstPosition != 1 || res.LastPosition != 3 {
		t.Fatalf("retry of an append of the old layout: %+v, %v", res, err)
	}
	res, err = s.Append(ctx, "b", eventstore.Exactly(4), evs(2, "new"))
	if err != nil || res.FirstPosition != 9 || res.FirstSeq != 5 {
		t.Fatalf("append after the migration: %+v, %v", res, err)
	}
	if h, err := s.Head(ctx); err != nil || h != 10 {
		t.Fatalf("head %d, %v; want 10", h, err)
	}
	// Opening again does not migrate again.
	s2, err := Open(ctx, url, Options{Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if all, err := s2.ReadAll(ctx, 1, 100); err != nil || len(all) != 10 {
		t.Fatalf("second open reads %d events, %v", len(all), err)
	}
}

func withTag(events []eventstore.NewEvent, tag string) []eventstore.NewEvent {
	for i := range events {
		events[i].Tags = []string{tag}
	}
	return events
}
