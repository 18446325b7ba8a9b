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
//
// A value put from a stream (AddFrom, UpdateFrom) that is larger than
// InlineMax goes into a large object (the row's lo column names it, and
// its value is empty), written a chunk at a time in the transaction that
// writes the row, so the process never holds it whole; Open reads it back
// a chunk at a time, opened read-only, which PostgreSQL reads as it was
// when it was opened, whatever is written meanwhile. Replacing or deleting the row unlinks
// the large object in the same transaction.
package pgkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/logbook/logbook/services/kv"
)

// Backend is the PostgreSQL kv backend.
type Backend struct {
	pool *pgxpool.Pool
	// streams holds a slot for each large object being written or read:
	// each holds one of the pool's connections for as long as its
	// client sends or takes the value.
	streams chan struct{}
}

// Options configure the backend.
type Options struct {
	// MaxConns bounds the pool (default pgxpool's).
	MaxConns int32
	// MaxStreams bounds the large objects written or read at once
	// (default half the pool, at least 1): each holds a connection until
	// its client has sent or taken the value, so the rest of the pool
	// stays free for other requests. One more waits for a slot, as long
	// as its context allows.
	MaxStreams int
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
			value   bytea NOT NULL,
			lo      oid
		)`); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w: pgkv: create table: %w", kv.ErrUnavailable, err)
	}
	// A table made before values streamed has no lo column. ALTER TABLE
	// takes the table's strongest lock even when there is nothing to do,
	// so only when there is.
	var hasLO bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
		WHERE attrelid = 'kv'::regclass AND attname = 'lo' AND NOT attisdropped)`).Scan(&hasLO); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w: pgkv: %w", kv.ErrUnavailable, err)
	}
	if !hasLO {
		if _, err := pool.Exec(ctx, `ALTER TABLE kv ADD COLUMN IF NOT EXISTS lo oid`); err != nil {
			pool.Close()
			return nil, fmt.Errorf("%w: pgkv: add the lo column: %w", kv.ErrUnavailable, err)
		}
	}
	streams := o.MaxStreams
	if streams <= 0 {
		streams = max(1, int(pool.Config().MaxConns)/2)
	}
	return &Backend{pool: pool, streams: make(chan struct{}, streams)}, nil
}

// InlineMax is the largest value put from a stream that is stored in its
// row; a larger one goes into a large object. Values put whole (Add,
// Update) are always stored in their row.
const InlineMax = 1 << 20

// chunk is how much of a streamed value is read or written at once.
const chunk = 1 << 20

// Pool is the connection pool.
func (b *Backend) Pool() *pgxpool.Pool { return b.pool }

// Close closes the pool.
func (b *Backend) Close() error { b.pool.Close(); return nil }

// Get reads the key.
func (b *Backend) Get(ctx context.Context, id string) (kv.Entry, bool, error) {
	e := kv.Entry{ID: id}
	var v int64
	err := b.pool.QueryRow(ctx, `SELECT version, CASE WHEN lo IS NULL THEN value ELSE lo_get(lo) END FROM kv WHERE id = $1`, id).Scan(&v, &e.Value)
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
		if _, err := tx.Exec(ctx, `SELECT lo_unlink(lo) FROM kv WHERE id = ANY($1::text[]) AND lo IS NOT NULL`, ids); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE kv SET version = kv.version + 1, value = u.value, lo = NULL
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
		if _, err := tx.Exec(ctx, `SELECT lo_unlink(lo) FROM kv WHERE (id = $1 OR (id >= $2 AND id < $3)) AND lo IS NOT NULL`, id, id+"/", id+"0"); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM kv WHERE id = $1 OR (id >= $2 AND id < $3)`, id, id+"/", id+"0")
		return err
	})
}

// head reads src up to InlineMax bytes and one more: a value that fits
// in its row (large false), or the start of one that does not.
func head(src io.Reader) (p []byte, large bool, err error) {
	p, err = io.ReadAll(io.LimitReader(src, InlineMax+1))
	return p, len(p) > InlineMax, err
}

// writeLO writes start and then the rest of src into a new large object
// of tx, a chunk at a time, and returns its oid. A failed read of src is
// returned as it is (the transaction is then rolled back, and the large
// object with it).
func writeLO(ctx context.Context, tx pgx.Tx, start []byte, src io.Reader) (uint32, error) {
	los := tx.LargeObjects()
	oid, err := los.Create(ctx, 0)
	if err != nil {
		return 0, err
	}
	obj, err := los.Open(ctx, oid, pgx.LargeObjectModeWrite)
	if err != nil {
		return 0, err
	}
	if _, err := obj.Write(start); err != nil {
		return 0, err
	}
	// The struct wrappers keep io.CopyBuffer from bypassing the buffer.
	if _, err := io.CopyBuffer(struct{ io.Writer }{obj}, struct{ io.Reader }{src}, make([]byte, chunk)); err != nil {
		return 0, err
	}
	return oid, obj.Close()
}

// AddFrom adds a key whose value is read from src: in its row if it is
// at most InlineMax bytes, else into a large object, a chunk at a time.
func (b *Backend) AddFrom(ctx context.Context, id string, src io.Reader) error {
	start, large, err := head(src)
	if err != nil {
		return err
	}
	if !large {
		return b.Add(ctx, []kv.Item{{ID: id, Value: start}})
	}
	release, err := b.stream(ctx)
	if err != nil {
		return err
	}
	defer release()
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		// The row first: a key that exists is refused before the
		// stream is read, and a concurrent add of it waits on the row.
		tag, err := tx.Exec(ctx, `INSERT INTO kv (id, version, value) VALUES ($1, 1, '') ON CONFLICT (id) DO NOTHING`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return kv.Exists(id)
		}
		oid, err := writeLO(ctx, tx, start, src)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE kv SET lo = $2 WHERE id = $1`, id, oid)
		return err
	})
}

// UpdateFrom compares-and-sets a key whose value is read from src, as
// AddFrom stores it. A value of more than InlineMax bytes is written with
// its row locked and its version compared before more than InlineMax
// bytes of the stream are read.
func (b *Backend) UpdateFrom(ctx context.Context, id string, version uint64, src io.Reader) (uint64, error) {
	start, large, err := head(src)
	if err != nil {
		return 0, err
	}
	if !large {
		vs, err := b.Update(ctx, []kv.Item{{ID: id, Version: version, Value: start}})
		if err != nil {
			return 0, err
		}
		return vs[0], nil
	}
	release, err := b.stream(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		var cur int64
		err := tx.QueryRow(ctx, `SELECT version FROM kv WHERE id = $1 FOR UPDATE`, id).Scan(&cur)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return kv.NotFound(id)
		case err != nil:
			return err
		case uint64(cur) != version:
			return kv.Stale(id, version, uint64(cur))
		}
		if _, err := tx.Exec(ctx, `SELECT lo_unlink(lo) FROM kv WHERE id = $1 AND lo IS NOT NULL`, id); err != nil {
			return err
		}
		oid, err := writeLO(ctx, tx, start, src)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE kv SET version = version + 1, value = '', lo = $2 WHERE id = $1`, id, oid)
		return err
	})
	if err != nil {
		return 0, err
	}
	return version + 1, nil
}

// stream waits for a stream slot (see Options.MaxStreams) and returns
// its release.
func (b *Backend) stream(ctx context.Context) (func(), error) {
	select {
	case b.streams <- struct{}{}:
		return func() { <-b.streams }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Open reads the key's value as a stream: a value in its row whole, a
// large object a chunk at a time as the reader is read. The large object
// is opened read-only, which PostgreSQL reads as it was when it was
// opened, whatever is written meanwhile; its transaction holds one of the
// pool's connections, and a stream slot, until the reader is closed.
func (b *Backend) Open(ctx context.Context, id string) (kv.Reader, bool, error) {
	const q = `SELECT version, lo, CASE WHEN lo IS NULL THEN value END FROM kv WHERE id = $1`
	var (
		v     int64
		lo    *uint32
		value []byte
	)
	inline := func() (kv.Reader, bool, error) {
		return kv.Reader{ID: id, Version: uint64(v), Size: int64(len(value)), ReadCloser: io.NopCloser(bytes.NewReader(value))}, true, nil
	}
	err := b.pool.QueryRow(ctx, q, id).Scan(&v, &lo, &value)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return kv.Reader{}, false, nil
	case err != nil:
		return kv.Reader{}, false, err
	case lo == nil:
		return inline()
	}
	release, err := b.stream(ctx)
	if err != nil {
		return kv.Reader{}, false, err
	}
	tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		release()
		return kv.Reader{}, false, err
	}
	end := func() {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		release()
	}
	// Read the row again in the transaction: it may have changed.
	err = tx.QueryRow(ctx, q, id).Scan(&v, &lo, &value)
	if err != nil || lo == nil {
		end()
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return kv.Reader{}, false, nil
		case err != nil:
			return kv.Reader{}, false, err
		}
		return inline()
	}
	los := tx.LargeObjects()
	obj, err := los.Open(ctx, *lo, pgx.LargeObjectModeRead)
	var size int64
	if err == nil {
		if size, err = obj.Seek(0, io.SeekEnd); err == nil {
			_, err = obj.Seek(0, io.SeekStart)
		}
	}
	if err != nil {
		end()
		return kv.Reader{}, false, err
	}
	return kv.Reader{ID: id, Version: uint64(v), Size: size, ReadCloser: &loReader{obj: obj, end: end}}, true, nil
}

// loReader is an open large object; Close ends its transaction and
// frees its stream slot.
type loReader struct {
	obj  *pgx.LargeObject
	end  func()
	done bool
}

func (r *loReader) Read(p []byte) (int, error) {
	// One round trip per chunk at most: pgx splits larger reads.
	return r.obj.Read(p[:min(len(p), chunk)])
}

func (r *loReader) Close() error {
	if !r.done {
		r.done = true
		r.end()
	}
	return nil
}
