package bench_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/lab/bench"
)

// bench cdc end to end at a small size, twice on one schema name (a run
// clears what an earlier one left), leaving nothing behind.
func TestCDC(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	ctx := context.Background()
	for range 2 {
		r, err := bench.RunCDC(ctx, bench.CDCConfig{UsersDB: url, Schema: schema, Users: 2000, Changes: 50, Load: 50})
		if err != nil {
			t.Fatal(err)
		}
		// Pass (the p99 floor) is a timing and belongs to the bench's own
		// runs on a quiet machine, not to a test on a loaded CI machine.
		if r.Users != 2000 || r.Changes != 50 || r.P99MS <= 0 || r.SnapshotS <= 0 {
			t.Fatalf("%+v", r)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left int
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1)
		+ (SELECT count(*) FROM pg_publication WHERE pubname = $2)
		+ (SELECT count(*) FROM pg_namespace WHERE nspname = $3)`, schema+"_slot", schema+"_pub", schema).Scan(&left)
	if err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d of the run's slot, publication and schema left behind", left)
	}
}
