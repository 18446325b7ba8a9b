package pgstore

import (
	"fmt"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/internal/testenv"
)

// TestAppendsRunGenericPlans: the statements of an append's transaction
// run on their generic plans, on both write paths, instead of being
// planned again at each execution (PostgreSQL's choice for three of
// them); and the setting ends with the transaction, so the connections
// go back to the pool as they were.
func TestAppendsRunGenericPlans(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	ctx := t.Context()
	s := openProcess(t, url, Options{Schema: schema})
	for i := range 20 {
		// One round trip on a guessed version, then three: Any to a
		// stream the process has not seen.
		if _, err := s.Append(ctx, "guessed", eventstore.Any, evs(3, "g")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, fmt.Sprintf("read-%d", i), eventstore.Any, evs(2, "r")); err != nil {
			t.Fatal(err)
		}
	}
	if s.guessed.Load() == 0 {
		t.Fatal("no batch went the one-round-trip way")
	}
	conns := s.pool.AcquireAllIdle(ctx)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	var generic, custom int64
	for _, c := range conns {
		var mode string
		if err := c.QueryRow(ctx, `SHOW plan_cache_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if mode != "auto" {
			t.Fatalf("a connection back in the pool has plan_cache_mode %s", mode)
		}
		var g, cu int64
		if err := c.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
			FROM pg_prepared_statements
			WHERE statement LIKE 'WITH locked AS%' OR statement LIKE 'UPDATE streams%' OR statement LIKE 'INSERT INTO appends%'`).Scan(&g, &cu); err != nil {
			t.Fatal(err)
		}
		generic, custom = generic+g, custom+cu
	}
	if generic == 0 || custom != 0 {
		t.Fatalf("the append statements ran %d generic plans and %d custom ones, want only generic", generic, custom)
	}
}
