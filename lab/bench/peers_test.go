package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/engine/eventstore/pgstore"
	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/lab/bench"
)

// TestPeers runs a small peers comparison on the test database: every
// store writes every event of both workloads (RunPeers counts them in the
// peers' tables), the figures and ratios are filled in, and the peers'
// tables are gone afterwards.
func TestPeers(t *testing.T) {
	messageDB, python := testenv.Peers(t)
	url, _ := testenv.SchemaURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	store, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg := bench.PeersConfig{
		MessageDB: messageDB, Python: python, Payload: 50, Streams: 20,
		Workloads: []bench.PeerWorkload{{Batch: 100, Writers: 1, Events: 1000}, {Batch: 1, Writers: 8, Events: 200}},
	}
	before := requestedCheckpoints(ctx, t, url)
	r, err := bench.RunPeers(ctx, store, url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Peers) != 6 {
		t.Fatalf("%d rows, want 2 peers and the COPY ceiling × 2 workloads: %+v", len(r.Peers), r.Peers)
	}
	for _, row := range r.Peers {
		if row.LogbookEventsPerSec <= 0 || row.PeerEventsPerSec <= 0 || row.Ratio <= 0 || row.PeerVersion == "" {
			t.Errorf("row not filled in: %+v", row)
		}
	}
	if head, err := store.Head(ctx); err != nil || head != 1200 {
		t.Errorf("logbook's store holds %d events (%v), want 1200", head, err)
	}
	// One CHECKPOINT before each timed run: logbook's, two peers' and
	// the COPY ceiling's, for each workload (checkpoints of other tests
	// running meanwhile only add to the count).
	if n := requestedCheckpoints(ctx, t, url) - before; n < 8 {
		t.Errorf("%d checkpoints requested during the run, want at least 8", n)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables
		WHERE table_schema = 'message_store' OR table_name IN ('logbook_peer_eventsourcing', 'logbook_baseline_events')`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d peer tables left behind (%v)", left, err)
	}
}

// requestedCheckpoints is the server's count of checkpoints asked for
// (by CHECKPOINT or by the WAL's size) since its statistics were reset.
func requestedCheckpoints(ctx context.Context, t *testing.T, url string) int64 {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var version int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	q := `SELECT checkpoints_req FROM pg_stat_bgwriter`
	if version >= 170000 {
		q = `SELECT num_requested FROM pg_stat_checkpointer`
	}
	var n int64
	if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
