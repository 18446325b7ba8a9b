package shred

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresOptions configure a keyring in PostgreSQL.
type PostgresOptions struct {
	Options
	// Table is the keyring's table, created if missing (default
	// logbook_subject_keys, in the connection's search path). A name or
	// schema.name of letters, digits and underscores.
	Table string
}

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)

// OpenPostgres opens a keyring in a table of the PostgreSQL database
// pool connects to (creating the table if needed), for a store on
// PostgreSQL: the processes sharing the store share the keys. Keys are
// written and destroyed in committed transactions. A key another process
// forgot may still be used from this one's memory for Options.CacheTTL
// (default 5 s).
//
// PostgreSQL keeps a deleted row's old version until VACUUM reclaims it,
// and its write-ahead log and base backups hold it for as long as they
// are kept: forgetting updates the row in place to its tombstone and
// vacuums the table, and the key's bytes are wrapped under the master
// key, which is never stored in the database.
func OpenPostgres(ctx context.Context, pool *pgxpool.Pool, master MasterKey, opts PostgresOptions) (*Keyring, error) {
	if opts.Table == "" {
		opts.Table = "logbook_subject_keys"
	}
	if !tableName.MatchString(opts.Table) {
		return nil, fmt.Errorf("shred: table name %q: want name or schema.name of letters, digits and underscores", opts.Table)
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = 5 * time.Second
	}
	b := &pgBackend{pool: pool, table: opts.Table}
	if opts.Existing {
		var found bool
		if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, b.table).Scan(&found); err != nil {
			return nil, fmt.Errorf("shred: open keyring %s: %w", b.table, err)
		}
		if !found {
			return nil, fmt.Errorf("open keyring %s (in the connection's search path): %w", b.table, ErrNoKeyring)
		}
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+b.table+` (
		subject bytea PRIMARY KEY,
		record  bytea NOT NULL
	)`); err != nil {
		return nil, fmt.Errorf("shred: create %s: %w", b.table, err)
	}
	k, err := newKeyring(ctx, b, master, opts.Options)
	if err != nil {
		return nil, fmt.Errorf("shred: open keyring %s: %w", b.table, err)
	}
	return k, nil
}

type pgBackend struct {
	pool  *pgxpool.Pool
	table string
}

// The check value's row: a subject column no hash (32 bytes) can equal.
var pgCheckKey = []byte("check")

func (b *pgBackend) check(ctx context.Context, v []byte) ([]byte, error) {
	if _, err := b.pool.Exec(ctx, `INSERT INTO `+b.table+` (subject, record) VALUES ($1, $2) ON CONFLICT DO NOTHING`, pgCheckKey, v); err != nil {
		return nil, err
	}
	var got []byte
	err := b.pool.QueryRow(ctx, `SELECT record FROM `+b.table+` WHERE subject = $1`, pgCheckKey).Scan(&got)
	return got, err
}

func (b *pgBackend) get(ctx context.Context, hs []hash) (map[hash][]byte, error) {
	out := make(map[hash][]byte, len(hs))
	for len(hs) > 0 {
		n := min(len(hs), 10_000)
		keys := make([][]byte, n)
		for i := range n {
			keys[i] = hs[i][:]
		}
		hs = hs[n:]
		rows, err := b.pool.Query(ctx, `SELECT subject, record FROM `+b.table+` WHERE subject = ANY($1)`, keys)
		if err != nil {
			return nil, err
		}
		var subject, record []byte
		_, err = pgx.ForEachRow(rows, []any{&subject, &record}, func() error {
			var h hash
			if len(subject) != len(h) {
				return errCorrupt
			}
			copy(h[:], subject)
			out[h] = record
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (b *pgBackend) create(ctx context.Context, recs map[hash][]byte) (map[hash][]byte, error) {
	subjects := make([][]byte, 0, len(recs))
	records := make([][]byte, 0, len(recs))
	hs := make([]hash, 0, len(recs))
	for h, v := range recs {
		hs = append(hs, h)
		subjects = append(subjects, h[:])
		records = append(records, v)
	}
	// Another process may have made some of these keys first: theirs
	// stay, and are what is returned.
	if _, err := b.pool.Exec(ctx, `INSERT INTO `+b.table+` (subject, record)
		SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT DO NOTHING`, subjects, records); err != nil {
		return nil, err
	}
	return b.get(ctx, hs)
}

func (b *pgBackend) bury(ctx context.Context, h hash, tomb []byte) error {
	if _, err := b.pool.Exec(ctx, `INSERT INTO `+b.table+` (subject, record) VALUES ($1, $2)
		ON CONFLICT (subject) DO UPDATE SET record = EXCLUDED.record`, h[:], tomb); err != nil {
		return err
	}
	// Reclaim the old row version now rather than at autovacuum's
	// leisure; a failure (a long transaction holding it) is not the
	// forgetting's: the key is destroyed for every reader already.
	_, _ = b.pool.Exec(ctx, `VACUUM `+b.table)
	return nil
}

func (b *pgBackend) close() error { return nil }
