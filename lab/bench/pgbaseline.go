package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/logbook/logbook/lab/stats"
)

// The tables RunBaseline writes into; each is made and dropped by each
// run, in the store's schema.
const (
	baselineTable       = "logbook_baseline_events"
	baselineEventsTable = "logbook_baseline_events_table"
)

// BaselineTable is the kind of table RunBaseline copies the rows into.
type BaselineTable int

const (
	// PlainTable has only a primary key, on the position: the fastest
	// way PostgreSQL offers to store the rows.
	PlainTable BaselineTable = iota
	// StoreEventsTable is a copy of the store's own events table — its
	// columns, constraints and indexes (CREATE TABLE … LIKE events
	// INCLUDING ALL) — so a run of the store beside it shows what the
	// store's bookkeeping costs beyond writing its events: the appends'
	// rows, the streams' versions, the head and the notification. The
	// store's events table must exist in the pool's search_path.
	StoreEventsTable
)

// Checkpoint asks the database, through db (a connection or a pool), to
// write out its dirty pages, so that the next timed run does not pay for
// the one before it. It needs a superuser or the pg_checkpoint role.
func Checkpoint(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}) error {
	if _, err := db.Exec(ctx, "CHECKPOINT"); err != nil {
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "42501" {
			return fmt.Errorf("CHECKPOINT needs a superuser or the pg_checkpoint role: %w", err)
		}
		return fmt.Errorf("CHECKPOINT: %w", err)
	}
	return nil
}

// createBaseline makes RunBaseline's table of the given kind afresh and
// returns its name and the columns RunBaseline writes.
func createBaseline(ctx context.Context, pool *pgxpool.Pool, kind BaselineTable) (pgx.Identifier, []string, error) {
	name := baselineTable
	create := `(position bigint PRIMARY KEY, stream text COLLATE "C" NOT NULL, seq bigint NOT NULL,
		id uuid NOT NULL, type text NOT NULL, version integer NOT NULL, tags text[] NOT NULL, meta text,
		data bytea NOT NULL, time timestamptz NOT NULL)`
	columns := []string{"position", "stream", "seq", "id", "type", "version", "tags", "meta", "data", "time"}
	if kind == StoreEventsTable {
		name, create = baselineEventsTable, `(LIKE events INCLUDING ALL)`
		columns = []string{"stream", "seq", "id", "type", "version", "tags", "meta", "data"}
	}
	table := pgx.Identifier{name}
	if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS `+table.Sanitize()+`;
		CREATE TABLE `+table.Sanitize()+` `+create); err != nil {
		return nil, nil, fmt.Errorf("bench baseline: %w", err)
	}
	return table, columns, nil
}

// RunBaseline writes the rows an append workload writes — the same
// events, payloads, batches and writers — straight into a table of the
// given kind by binary COPY, each batch in its own transaction, with none
// of the store's guarantees (no stream versions checked, no log order).
// It returns events/s: what the database itself can do, for the store's
// figure to be read against.
func RunBaseline(ctx context.Context, pool *pgxpool.Pool, cfg AppendConfig, kind BaselineTable) (float64, error) {
	if cfg.Events <= 0 || cfg.Batch <= 0 || cfg.Writers <= 0 || cfg.Streams <= 0 || cfg.Payload < 0 {
		return 0, errors.New("bench baseline: events, batch, writers and streams must be positive, payload not negative")
	}
	table, columns, err := createBaseline(ctx, pool, kind)
	if err != nil {
		return 0, err
	}
	defer pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table.Sanitize()) //nolint:errcheck // best effort
	appends := (cfg.Events + cfg.Batch - 1) / cfg.Batch
	runID := newRunID()
	var next, position atomic.Int64
	errs := make(chan error, cfg.Writers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range cfg.Writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			payload := make([]byte, cfg.Payload)
			for i := range payload {
				payload[i] = byte(rng.Uint32())
			}
			rows := make([][]any, cfg.Batch)
			seq := 0
			for {
				n := next.Add(1) - 1
				if n >= int64(appends) {
					return
				}
				size := min(cfg.Batch, cfg.Events-int(n)*cfg.Batch)
				stream := fmt.Sprintf("bench-%s-%d", runID, rng.IntN(cfg.Streams))
				first := position.Add(int64(size)) - int64(size)
				now := time.Now()
				for i := range rows[:size] {
					seq++
					id := cfg.newID(rng)
					if kind == StoreEventsTable {
						// (stream, seq) is unique there: the position is.
						rows[i] = []any{stream, first + int64(i) + 1, id, "bench.Event", int32(0), []string{}, nil, payload}
					} else {
						rows[i] = []any{first + int64(i) + 1, stream, int64(seq), id, "bench.Event", int32(0), []string{}, nil, payload, now}
					}
				}
				n, err := pool.CopyFrom(ctx, table, columns, pgx.CopyFromRows(rows[:size]))
				if err == nil && n != int64(size) {
					err = fmt.Errorf("COPY wrote %d rows of %d", n, size)
				}
				if err != nil {
					errs <- fmt.Errorf("bench baseline: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return stats.Round(float64(cfg.Events)/elapsed.Seconds(), 0), nil
}
