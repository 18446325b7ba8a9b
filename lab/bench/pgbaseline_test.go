package bench

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/engine/eventstore/pgstore"
	"github.com/logbook/logbook/internal/testenv"
)

// TestBaselineTables: the store-shaped baseline is a copy of the store's
// events table with every one of its indexes, the plain one has its
// primary key only; RunBaseline copies every row into each (several
// writers to few streams: the store's unique (stream, seq) must hold)
// and drops its table.
func TestBaselineTables(t *testing.T) {
	url, schema := testenv.SchemaURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	store, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	pool := store.Pool()
	indexes := func(table string) []string {
		t.Helper()
		rs, err := pool.Query(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = $2`, schema, table)
		if err != nil {
			t.Fatal(err)
		}
		defs, err := pgx.CollectRows(rs, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range defs {
			// Only what is indexed, and how: names differ.
			how := d[strings.Index(d, " USING "):]
			if strings.HasPrefix(d, "CREATE UNIQUE") {
				how = "unique" + how
			}
			defs[i] = how
		}
		slices.Sort(defs)
		return defs
	}
	for _, kind := range []BaselineTable{PlainTable, StoreEventsTable} {
		table, _, err := createBaseline(ctx, pool, kind)
		if err != nil {
			t.Fatal(err)
		}
		got := indexes(table[0])
		want := []string{`unique USING btree ("position")`}
		if kind == StoreEventsTable {
			want = indexes("events")
		}
		if len(got) == 0 || !slices.Equal(got, want) {
			t.Errorf("kind %d: indexes %q, want %q", kind, got, want)
		}
		eps, err := RunBaseline(ctx, pool, AppendConfig{Events: 1000, Batch: 10, Writers: 4, Payload: 20, Streams: 2}, kind)
		if err != nil || eps <= 0 {
			t.Fatalf("kind %d: %v events/s, %v", kind, eps, err)
		}
		var left int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = $2`, schema, table[0]).Scan(&left); err != nil || left != 0 {
			t.Errorf("kind %d: table left behind (%d, %v)", kind, left, err)
		}
	}
}
