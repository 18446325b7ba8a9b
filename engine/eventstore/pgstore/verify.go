package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/logbook/logbook/engine/eventstore/verify"
)

// ErrNotStore is Verify's error for a schema that holds no store.
var ErrNotStore = errors.New("not a logbook event store")

// Verify checks the store in the database at url (its schema: schema,
// else the URL's search_path, else "logbook") and reports what is wrong.
// It only reads, in one repeatable-read transaction, so that it sees one
// state of the log even while processes append; it creates nothing (Open
// would create the schema). The error is for a store it could not check
// at all; what is wrong inside one is in the report.
//
// Positions here come from the head row, moved under its lock by each
// append's transaction, not from a sequence: a rolled-back transaction
// leaves no gap, so the log is gap-free and Verify checks it. The checks,
// each a function of its own (pgChecks):
//   - the head row is the last position of the log;
//   - the appends (the log's index: an append of n events at position p
//     covers p … p+n-1) are contiguous from 1, and each one's events are
//     there;
//   - every event lies in an append;
//   - each stream's version is its event count and its last sequence
//     number, and its appends follow one another (1, 2, 3, … in log order);
//   - the tag index holds exactly the events' tags at their positions;
//   - no snapshot lies beyond its stream's version.
//
// Checksums are PostgreSQL's: with data checksums on (initdb -k), every
// page these queries read is checked, and a failure is reported as
// corrupt; pg_amcheck checks the indexes too.
func Verify(ctx context.Context, url, schema string) (*verify.Report, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: verify: %w", err)
	}
	if schema == "" {
		schema = cfg.RuntimeParams["search_path"]
	}
	if schema == "" {
		schema = "logbook"
	}
	if !schemaName.MatchString(schema) {
		return nil, fmt.Errorf("pgstore: verify: schema %q: want lower-case letters, digits and _", schema)
	}
	cfg.RuntimeParams["search_path"] = schema
	cfg.RuntimeParams["application_name"] = "logbook verify"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: verify: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("pgstore: verify: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var missing []string
	for _, table := range []string{"events", "appends", "streams", "event_tags", "head", "snapshots"} {
		var ok bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, schema+"."+table).Scan(&ok); err != nil {
			return nil, fmt.Errorf("pgstore: verify: %w", err)
		}
		if !ok {
			missing = append(missing, table)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("pgstore: verify: schema %s: %w (no table %v)", schema, ErrNotStore, missing)
	}
	r := verify.New()
	if err := tx.QueryRow(ctx, `SELECT (SELECT position FROM head), (SELECT count(*) FROM events), (SELECT count(*) FROM streams)`).Scan(&r.Head, &r.Events, &r.Streams); err != nil {
		if err := pgCorruption(r, err); err != nil {
			return nil, fmt.Errorf("pgstore: verify: %w", err)
		}
	}
	for _, check := range pgChecks {
		if err := check(ctx, tx, r); err != nil {
			if err := pgCorruption(r, err); err != nil {
				return r, fmt.Errorf("pgstore: verify: %w", err)
			}
		}
	}
	return r, nil
}

// pgCorruption turns PostgreSQL's data-corrupted errors (a page that
// fails its checksum) into a problem, and returns any other error.
func pgCorruption(r *verify.Report, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "XX001" || pe.Code == "XX002") {
		r.Add(verify.Corrupt, 0, "", "%s", pe.Message)
		return nil
	}
	return err
}

// A pgCheck adds the problems of one invariant to r.
type pgCheck func(ctx context.Context, tx pgx.Tx, r *verify.Report) error

var pgChecks = []pgCheck{pgCheckHead, pgCheckContiguous, pgCheckAppendsHaveEvents, pgCheckEventsInAppends, pgCheckStreams, pgCheckTags, pgCheckSnapshots}

// maxRows bounds the rows of problems one check reads.
const maxRows = verify.MaxProblems

// each runs query and calls fn on each row's values.
func each(ctx context.Context, tx pgx.Tx, query string, fn func(vals []any)) error {
	rows, err := tx.Query(ctx, query+fmt.Sprintf(" LIMIT %d", maxRows))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return err
		}
		fn(vals)
	}
	return rows.Err()
}

func u64(v any) uint64 {
	switch x := v.(type) {
	case int64:
		return uint64(max(x, 0))
	case int32:
		return uint64(max(x, 0))
	}
	return 0
}

func str(v any) string { s, _ := v.(string); return s }

func pgCheckHead(ctx context.Context, tx pgx.Tx, r *verify.Report) error {
	var last uint64
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(position + count - 1), 0) FROM appends`).Scan(&last); err != nil {
		return err
	}
	if last != r.Head {
		r.Add(verify.Head, r.Head, "", "the head row says %d, the last append ends at %d", r.Head, last)
	}
	return nil
}

func pgCheckContiguous(ctx context.Context, tx pgx.Tx, r *verify.Report) error {
	// Once anything was removed, the sweep may have deleted whole
	// appends: a gap between appends is then no longer a sign of loss
	// (which positions were removed is not recorded), and only overlaps
	// are checked; the per-stream checks still find a lost event.
	removed, err := removedBefore(ctx, tx, "''")
	if err != nil {
		return err
	}
	gaps := "true"
	if removed != "0" {
		gaps = "NOT EXISTS (SELECT 1 FROM stream_removals)"
	}
	return each(ctx, tx, `SELECT position, expect FROM (
		SELECT position, coalesce(lag(position + count) OVER (ORDER BY position), 1) AS expect FROM appends) x
		WHERE position < expect OR (position > expect AND `+gaps+`) ORDER BY position`, func(v []any) {
		pos, want := u64(v[0]), u64(v[1])
		if pos > want {
			r.Add(verify.Gap, want, "", "positions %d to %d lie in no append", want, pos-1)
		} else {
			r.Add(verify.Gap, pos, "", "the append at %d overlaps the one before (which ends at %d)", pos, want-1)
		}
	})
}

// removedBefore is an SQL expression for the first seq of the stream in
// column col that deletion and retention left stored or visible (0 or 1:
// all of them): events below it may be gone, by design. A store made
// before deletion existed has no stream_removals table: nothing removed.
func removedBefore(ctx context.Context, tx pgx.Tx, col string) (string, error) {
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('stream_removals') IS NOT NULL`).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		return "0", nil
	}
	return hiddenBefore(col), nil
}

func pgCheckAppendsHaveEvents(ctx context.Context, tx pgx.Tx, r *verify.Report) error {
	before, err := removedBefore(ctx, tx, "a.stream")
	if err != nil {
		return err
	}
	// An append's events below its stream's truncation point may have
	// been swept; the rest must all be there.
	return each(ctx, tx, `SELECT position, stream, count, n, want FROM (
		SELECT a.position, a.stream, a.count, (SELECT count(*) FROM events e
			WHERE e.stream = a.stream AND e.seq >= a.first_seq AND e.seq < a.first_seq + a.count) AS n,
			greatest(0, a.first_seq + a.count - greatest(a.first_seq, `+before+`)) AS want
		FROM appends a) x WHERE n <> count AND n <> want ORDER BY position`, func(v []any) {
		r.Add(verify.Gap, u64(v[0]), str(v[1]), "the append of %d events there has %d of them", u64(v[2]), u64(v[3]))
	})
}

func pgCheckEventsInAppends(ctx context.Context, tx pgx.Tx, r *verify.Report) error {
	return each(ctx, tx, `SELECT e.stream, e.seq FROM events e WHERE NOT EXISTS (
		SELECT 1 FROM appends a WHERE a.stream = e.stream AND a.first_seq <= e.seq AND e.seq < a.first_seq + a.count)
		ORDER BY e.stream, e.seq`, func(v []any) {
		r.Add(verify.StreamIndex, 0, str(v[0]), "event %d lies in no append: it has no position", u64(v[1]))
	})
}

func pgCheckStreams(ctx context.Context, tx pgx.Tx, r *verify.Report) error {
	before, err := removedBefore(ctx, tx, "coalesce(s.stream, c.stream)")
	if err != nil {
		return err
	}
	// A stream's stored events are seqs lo … version, without a hole; lo
	// is 1 unless removals took the events below it (truncation, a
	// deletion: then none may be left). A hard delete marks the version
	// with a bit of its own.
	err = each(ctx, tx, `SELECT stream, version, n, maxseq FROM (
		SELECT coalesce(s.stream, c.stream) AS stream, coalesce(s.version, 0) & ~`+fmt.Sprint(tombBit)+`::bigint AS version,
			coalesce(c.n, 0) AS n, coalesce(c.maxseq, 0) AS maxseq, coalesce(c.minseq, 1) AS minseq, `+before+` AS before
		FROM streams s FULL JOIN (SELECT stream, count(*) AS n, max(seq) AS maxseq, min(seq) AS minseq FROM events GROUP BY stream) c ON c.stream = s.stream) x
		WHERE (n > 0 AND (version <> maxseq OR n <> maxseq - minseq + 1 OR (minseq > 1 AND minseq > before)))
			OR (n = 0 AND version <> 0 AND before <= version)
		ORDER BY 1`, func(v []any) {
		r.Add(verify.StreamVersion, 0, str(v[0]), "version %d, %d events, the last numbered %d", u64(v[1]), u64(v[2]), u64(v[3]))
	})
	if err != nil {
		return err
	}
	// A truncated stream's first append left may start past 1.
	before2, err := removedBefore(ctx, tx, "x.stream")
	if err != nil {
		return err
	}
	return each(ctx, tx, `SELECT stream, position, first_seq, expect FROM (
		SELECT stream, position, first_seq, coalesce(lag(first_seq + count) OVER (PARTITION BY stream ORDER BY position), 1) AS expect FROM appends) x
		WHERE first_seq <> expect AND NOT (expect = 1 AND first_seq <= `+before2+`) ORDER BY position`, func(v []any) {
		r.Add(verify.StreamVersion, u64(v[1]), str(v[0]), "the append there starts at event %d, the stream's appends before it end at %d", u64(v[2]), u64(v[3])-1)
	})
}

// tagsWanted is every (tag, position) the events' tags call for.
const tagsWanted = `SELECT DISTINCT t AS tag, a.position + (e.seq - a.first_seq) AS position
	FROM appends a JOIN events e ON e.stream = a.stream AND e.seq >= a.first_seq AND e.seq < a.first_seq + a.count, unnest(e.tags) AS t`

func pgCheckTags(ctx context.Context, tx pgx.Tx, r *verify.Report) error {
	err := each(ctx, tx, `SELECT tag, position FROM (`+tagsWanted+` EXCEPT SELECT tag, position FROM event_tags) x ORDER BY position`, func(v []any) {
		r.Add(verify.TagIndex, u64(v[1]), "", "tag %q has no tag-index entry", str(v[0]))
	})
	if err != nil {
		return err
	}
	return each(ctx, tx, `SELECT tag, position FROM (SELECT tag, position FROM event_tags EXCEPT `+tagsWanted+`) x ORDER BY position`, func(v []any) {
		r.Add(verify.TagIndex, u64(v[1]), "", "tag %q names an event without that tag", str(v[0]))
	})
}

func pgCheckSnapshots(ctx context.Context, tx pgx.Tx, r *verify.Report) error {
	return each(ctx, tx, `SELECT n.stream, n.seq, coalesce(s.version, 0) FROM snapshots n LEFT JOIN streams s ON s.stream = n.stream
		WHERE n.seq > coalesce(s.version, 0) ORDER BY n.stream`, func(v []any) {
		r.Add(verify.Snapshot, 0, str(v[0]), "snapshot at event %d, beyond the stream's version %d", u64(v[1]), u64(v[2]))
	})
}
