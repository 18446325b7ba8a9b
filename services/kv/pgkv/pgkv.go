// Package pgkv is the PostgreSQL backend of the kv repository, on pgx.
//
// One table, kv(id, version, value), in the schema named by the URL's
// search_path (default "logbook"). Ids are compared bytewise (COLLATE "C"),
// so the ids under "a" are the range ["a/", "a0") of the primary key and a
// cascading delete is one range scan.
//
// Add is one INSERT … ON CONFLICT DO NOTHING RETURNING: the ids it does not
// return existed, and the transaction is rolled back. Update and Delete
// first lock the rows they name (SELECT … FOR UPDATE, in id order so that
// concurrent batches never deadlock), which in READ COMMITTED returns each
// row's latest committed version; the versions are compared in Go and the
// writes follow in the same transaction, so no other write can come in
// between.
package pgkv

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/logbook/logbook/services/kv"
)

// Backend is the PostgreSQL kv backend.
type Backend struct {
	pool *pgxpool.Pool
}

// Options configure the backend.
type Options struct {
	// MaxConns bounds the pool (default pgxpool's).
	MaxConns int32
}

// Open connects to the database at url and creates the table if needed.
func Open(ctx context.Context, url string, o Options) (*Backend, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &kv.InvalidError{Reason: "pgkv: " + err.Error()}
	}
	schema := cfg.ConnConfig.RuntimeParams["search_path"]
	if schema == "" {
		schema = "logbook"
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: pgkv: %w", kv.ErrUnavailable, err)
	}
	if _, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()+`;
		CREATE TABLE IF NOT EXISTS kv (
			id      text COLLATE "C" PRIMARY KEY,
			version bigint NOT NULL,
			value   bytea NOT NULL
		)`); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w: pgkv: create table: %w", kv.ErrUnavailable, err)
	}
	return &Backend{pool: pool}, nil
}

// Pool is the connection pool.
func (b *Backend) Pool() *pgxpool.Pool { return b.pool }

// Close closes the pool.
func (b *Backend) Close() error { b.pool.Close(); return nil }

// Get reads the key.
func (b *Backend) Get(ctx context.Context, id string) (kv.Entry, bool, error) {
	e := kv.Entry{ID: id}
	var v int64
	err := b.pool.QueryRow(ctx, `SELECT version, value FROM kv WHERE id = $1`, id).Scan(&v, &e.Value)
	if errors.Is(err, pgx.ErrNoRows) {
		return kv.Entry{}, false, nil
	}
	if err != nil {
		return kv.Entry{}, false, err
	}
	e.Version = uint64(v)
	if e.Value == nil {
		e.Value = []byte{}
	}
	return e, true, nil
}

func nonNil(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

// Add adds the items atomically.
func (b *Backend) Add(ctx context.Context, items []kv.Item) error {
	ids := make([]string, len(items))
	vals := make([][]byte, len(items))
	for i, it := range items {
		ids[i], vals[i] = it.ID, nonNil(it.Value)
	}
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `INSERT INTO kv (id, version, value)
			SELECT id, 1, value FROM unnest($1::text[], $2::bytea[]) AS u(id, value)
			ON CONFLICT (id) DO NOTHING RETURNING id`, ids, vals)
		if err != nil {
			return err
		}
		added, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(added) == len(items) {
			return nil
		}
		slices.Sort(added)
		for i, it := range items {
			if _, ok := slices.BinarySearch(added, it.ID); !ok {
				return &kv.BatchError{Index: i, Err: kv.Exists(it.ID)}
			}
		}
		return errors.New("pgkv: insert returned fewer rows with every id present")
	})
}

// lock locks the existing rows among ids and returns their versions.
func lock(ctx context.Context, tx pgx.Tx, ids []string) (map[string]uint64, error) {
	rows, err := tx.Query(ctx, `SELECT id, version FROM kv WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE`, ids)
	if err != nil {
		return nil, err
	}
	cur := make(map[string]uint64, len(ids))
	var id string
	var v int64
	_, err = pgx.ForEachRow(rows, []any{&id, &v}, func() error {
		cur[id] = uint64(v)
		return nil
	})
	return cur, err
}

// Update compares-and-sets the items atomically.
func (b *Backend) Update(ctx context.Context, items []kv.Item) ([]uint64, error) {
	ids := make([]string, len(items))
	vals := make([][]byte, len(items))
	versions := make([]uint64, len(items))
	for i, it := range items {
		ids[i], vals[i], versions[i] = it.ID, nonNil(it.Value), it.Version+1
	}
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		cur, err := lock(ctx, tx, ids)
		if err != nil {
			return err
		}
		for i, it := range items {
			v, ok := cur[it.ID]
			switch {
			case !ok:
				return &kv.BatchError{Index: i, Err: kv.NotFound(it.ID)}
			case v != it.Version:
				return &kv.BatchError{Index: i, Err: kv.Stale(it.ID, it.Version, v)}
			}
		}
		_, err = tx.Exec(ctx, `UPDATE kv SET version = kv.version + 1, value = u.value
			FROM unnest($1::text[], $2::bytea[]) AS u(id, value) WHERE kv.id = u.id`, ids, vals)
		return err
	})
	if err != nil {
		return nil, err
	}
	return versions, nil
}

// Delete deletes the key and everything under it.
func (b *Backend) Delete(ctx context.Context, id string, version uint64) error {
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		cur, err := lock(ctx, tx, []string{id})
		if err != nil {
			return err
		}
		v, ok := cur[id]
		switch {
		case !ok:
			return kv.NotFound(id)
		case v != version:
			return kv.Stale(id, version, v)
		}
		_, err = tx.Exec(ctx, `DELETE FROM kv WHERE id = $1 OR (id >= $2 AND id < $3)`, id, id+"/", id+"0")
		return err
	})
}
