package bench

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
)

// pgProbe snapshots what PostgreSQL did during a measured run: its
// statements by text (pg_stat_statements, which the rig's own
// PostgreSQL preloads), the database's transaction and tuple counters,
// the tables' scans, and what its client backends wait for. The write
// mode takes the appends' transactions per command from it (the store's
// load-dependent demand, see scaling_model.go) and leaves the whole
// snapshot beside the nodes' logs (pgstats-SCENARIO-N.txt in --dir).
type pgProbe struct{ url string }

func (p pgProbe) reset(ctx context.Context) error {
	c, err := pgx.Connect(ctx, p.url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return err
	}
	_, err = c.Exec(ctx, "SELECT pg_stat_statements_reset(), pg_stat_reset()")
	return err
}

// dump writes the snapshot to file and returns how many transactions
// appended (the statement that moves the head runs once in each).
func (p pgProbe) dump(ctx context.Context, file string, commands int) (int64, error) {
	commands = max(commands, 1)
	c, err := pgx.Connect(ctx, p.url)
	if err != nil {
		return 0, err
	}
	defer c.Close(ctx)
	var appendTx int64
	if err := c.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE query LIKE 'UPDATE head SET position%'`).Scan(&appendTx); err != nil {
		return 0, err
	}
	var b strings.Builder
	var xc, xr, tr, tf, ti, tu, td int64
	if err := c.QueryRow(ctx, `SELECT sum(xact_commit), sum(xact_rollback), sum(tup_returned), sum(tup_fetched), sum(tup_inserted), sum(tup_updated), sum(tup_deleted) FROM pg_stat_database`).Scan(&xc, &xr, &tr, &tf, &ti, &tu, &td); err != nil {
		return 0, err
	}
	fmt.Fprintf(&b, "commands %d, append transactions %d (%.3f/cmd)\n", commands, appendTx, float64(appendTx)/float64(commands))
	fmt.Fprintf(&b, "commands %d\ncommits %d (%.2f/cmd) rollbacks %d returned %.1f/cmd fetched %.1f/cmd inserted %.2f/cmd updated %.2f/cmd deleted %.2f/cmd\n",
		commands, xc, float64(xc)/float64(commands), xr, float64(tr)/float64(commands), float64(tf)/float64(commands), float64(ti)/float64(commands), float64(tu)/float64(commands), float64(td)/float64(commands))
	rows, err := c.Query(ctx, `SELECT calls, total_exec_time, rows, shared_blks_hit+shared_blks_read, left(regexp_replace(query, '\s+', ' ', 'g'), 160) FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 25`)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var calls, nrows, blks int64
		var ms float64
		var q string
		if err := rows.Scan(&calls, &ms, &nrows, &blks, &q); err != nil {
			return 0, err
		}
		fmt.Fprintf(&b, "%8d calls %6.3f/cmd %9.1f ms %6.3f ms/cmd rows %6.2f/cmd blks %7.1f/cmd  %s\n", calls, float64(calls)/float64(commands), ms, ms/float64(commands), float64(nrows)/float64(commands), float64(blks)/float64(commands), q)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	t, err := c.Query(ctx, `SELECT relname, seq_scan, seq_tup_read, coalesce(idx_scan,0), coalesce(idx_tup_fetch,0), n_tup_hot_upd, n_tup_upd, n_dead_tup, n_live_tup, pg_relation_size(relid), autovacuum_count, autoanalyze_count FROM pg_stat_user_tables ORDER BY seq_tup_read + coalesce(idx_tup_fetch,0) DESC LIMIT 10`)
	if err == nil {
		for t.Next() {
			var name string
			var a [11]int64
			_ = t.Scan(&name, &a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6], &a[7], &a[8], &a[9], &a[10])
			fmt.Fprintf(&b, "table %-14s seq_scan %d seq_tup_read %d (%.1f/cmd) idx_scan %d idx_tup_fetch %d (%.1f/cmd) hot_upd %d upd %d dead %d live %d bytes %d autovac %d autoanalyze %d\n",
				name, a[0], a[1], float64(a[1])/float64(commands), a[2], a[3], float64(a[3])/float64(commands), a[4], a[5], a[6], a[7], a[8], a[9], a[10])
		}
		t.Close()
	}
	w, err := c.Query(ctx, `SELECT coalesce(wait_event_type,'-'), coalesce(wait_event,'-'), state, count(*) FROM pg_stat_activity WHERE backend_type='client backend' GROUP BY 1,2,3`)
	if err == nil {
		for w.Next() {
			var a, e, st string
			var n int64
			_ = w.Scan(&a, &e, &st, &n)
			fmt.Fprintf(&b, "activity %s %s %s %d\n", a, e, st, n)
		}
		w.Close()
	}
	return appendTx, os.WriteFile(file, []byte(b.String()), 0o644)
}
