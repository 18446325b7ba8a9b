package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/backend"
)

// Deleting and expiring (eventstore.Deleter).
//
// A removal is logical at once: DeleteStream and TruncateStream lock the
// stream's row in streams (as appends do, so they are ordered with the
// appends to the stream), and record in stream_removals the first seq
// readers see from now on; a hard delete also sets bit 62 of the stream's
// version, which every append decides against, so it is refused. Reads
// join stream_removals and skip what lies below that seq. The sweep then
// DELETEs the removed events, with their tag index rows, in batches of
// SweepBatch at most SweepRate events a second, and the append rows left
// with no event; PostgreSQL's autovacuum makes the space reusable (and a
// VACUUM FULL, or pg_repack, gives it back to the operating system: left
// to the operator, since it locks the table).

// tombBit marks a hard-deleted stream's version.
const tombBit = uint64(1) << 62

// hiddenBefore is the first seq a reader sees of the stream in column
// expression col.
func hiddenBefore(col string) string {
	return `coalesce((SELECT r.before FROM stream_removals r WHERE r.stream = ` + col + `), 0)`
}

type removal struct {
	truncate bool
	mode     eventstore.DeleteMode
	before   uint64
	// rule, for a truncation by a retention rule, is that rule: the
	// truncation is made only if the rule still holds, read with a share
	// lock that SetRetention's change of it waits for.
	rule *eventstore.Retention
}

// errRuleChanged is what a truncation by a retention rule returns when
// the rule was changed or cleared since the sweep read it.
var errRuleChanged = errors.New("retention rule changed")

// retentionKey is a rule's row key in the retention table.
func retentionKey(r eventstore.Retention) (kind, name string) {
	if r.Prefix != "" {
		return "p", r.Prefix
	}
	return "s", r.Stream
}

// DeleteStream implements eventstore.Deleter.
func (s *Store) DeleteStream(ctx context.Context, stream string, mode eventstore.DeleteMode) error {
	if err := s.limits.ValidateStreamID(stream); err != nil {
		return fmt.Errorf("delete stream: %w", err)
	}
	if mode != eventstore.DeleteSoft && mode != eventstore.DeleteHard {
		return fmt.Errorf("delete stream %q: unknown mode %v", stream, mode)
	}
	return s.remove(ctx, stream, removal{mode: mode})
}

// TruncateStream implements eventstore.Deleter.
func (s *Store) TruncateStream(ctx context.Context, stream string, before uint64) error {
	return s.truncate(ctx, stream, before, nil)
}

// truncate is TruncateStream, by retention rule if rule is not nil.
func (s *Store) truncate(ctx context.Context, stream string, before uint64, rule *eventstore.Retention) error {
	if err := s.limits.ValidateStreamID(stream); err != nil {
		return fmt.Errorf("truncate stream: %w", err)
	}
	return s.remove(ctx, stream, removal{truncate: true, before: before, rule: rule})
}

func (s *Store) remove(ctx context.Context, stream string, op removal) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	if err := checkCtx(ctx); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if op.rule != nil {
			kind, name := retentionKey(*op.rule)
			var age, count int64
			err := tx.QueryRow(ctx, `SELECT max_age, max_count FROM retention WHERE kind = $1 AND name = $2 FOR SHARE`, kind, name).Scan(&age, &count)
			if errors.Is(err, pgx.ErrNoRows) || err == nil && (time.Duration(age) != op.rule.MaxAge || uint64(count) != min(op.rule.MaxCount, 1<<62)) {
				return errRuleChanged
			}
			if err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO streams VALUES ($1, 0) ON CONFLICT DO NOTHING`, stream); err != nil {
			return err
		}
		var raw int64
		if err := tx.QueryRow(ctx, `SELECT version FROM streams WHERE stream = $1 FOR UPDATE`, stream).Scan(&raw); err != nil {
			return err
		}
		var before int64
		var mode int16
		err := tx.QueryRow(ctx, `SELECT before, mode FROM stream_removals WHERE stream = $1`, stream).Scan(&before, &mode)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		tomb := uint64(raw)&tombBit != 0
		cur := uint64(raw) &^ tombBit
		visible := uint64(max(before, 1))
		switch {
		case !op.truncate && op.mode == eventstore.DeleteHard:
			before, mode = int64(tombBit), int16(eventstore.DeleteHard)
			if _, err := tx.Exec(ctx, `UPDATE streams SET version = $2 WHERE stream = $1`, stream, int64(cur|tombBit)); err != nil {
				return err
			}
		case tomb:
			return eventstore.ErrStreamTombstoned
		case !op.truncate:
			before, mode = int64(max(visible, cur+1)), int16(eventstore.DeleteSoft)
		default:
			b := min(op.before, cur+1)
			if b <= visible {
				return nil // nothing more to hide
			}
			before = int64(b)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO stream_removals VALUES ($1, $2, $3, true)
			ON CONFLICT (stream) DO UPDATE SET before = excluded.before, mode = excluded.mode, pending = true`, stream, before, mode); err != nil {
			return err
		}
		if !op.truncate {
			if _, err := tx.Exec(ctx, `DELETE FROM snapshots WHERE stream = $1`, stream); err != nil {
				return err
			}
		}
		return nil
	})
	s.forget([]string{stream})
	if errors.Is(err, errRuleChanged) {
		return err
	}
	if errors.Is(err, eventstore.ErrStreamTombstoned) {
		return fmt.Errorf("remove from %q: %w", stream, err)
	}
	return s.fail(fmt.Sprintf("remove from %q", stream), err)
}

// removedErr is what a read that found nothing in a stream returns:
// ErrStreamTombstoned or ErrStreamDeleted if it is hard- or soft-deleted
// (and not recreated since).
func (s *Store) removedErr(ctx context.Context, stream string) error {
	var before, version int64
	var mode int16
	err := s.pool.QueryRow(ctx, `SELECT r.before, r.mode, s.version FROM stream_removals r JOIN streams s USING (stream) WHERE r.stream = $1`, stream).Scan(&before, &mode, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return s.fail(fmt.Sprintf("read stream %q", stream), err)
	}
	switch {
	case eventstore.DeleteMode(mode) == eventstore.DeleteHard:
		return fmt.Errorf("read stream %q: %w", stream, eventstore.ErrStreamTombstoned)
	case eventstore.DeleteMode(mode) == eventstore.DeleteSoft && uint64(version)&^tombBit < uint64(before):
		return fmt.Errorf("read stream %q: %w", stream, eventstore.ErrStreamDeleted)
	}
	return nil
}

// SetRetention implements eventstore.Deleter.
func (s *Store) SetRetention(ctx context.Context, r eventstore.Retention) error {
	if err := r.Validate(); err != nil {
		return err
	}
	kind, name := retentionKey(r)
	if err := s.limits.ValidateStreamID(name); err != nil {
		return fmt.Errorf("set retention: %w", err)
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	var err error
	if r.MaxAge == 0 && r.MaxCount == 0 {
		_, err = s.pool.Exec(ctx, `DELETE FROM retention WHERE kind = $1 AND name = $2`, kind, name)
	} else {
		_, err = s.pool.Exec(ctx, `INSERT INTO retention VALUES ($1, $2, $3, $4)
			ON CONFLICT (kind, name) DO UPDATE SET max_age = excluded.max_age, max_count = excluded.max_count`,
			kind, name, int64(r.MaxAge), int64(min(r.MaxCount, 1<<62)))
	}
	return s.fail("set retention", err)
}

// Retentions implements eventstore.Deleter.
func (s *Store) Retentions(ctx context.Context) ([]eventstore.Retention, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	rows, err := s.pool.Query(ctx, `SELECT kind::text, name, max_age, max_count FROM retention ORDER BY kind DESC, name`)
	if err != nil {
		return nil, s.fail("retentions", err)
	}
	var out []eventstore.Retention
	var kind, name string
	var age, count int64
	_, err = pgx.ForEachRow(rows, []any{&kind, &name, &age, &count}, func() error {
		r := eventstore.Retention{MaxAge: time.Duration(age), MaxCount: uint64(count)}
		if kind == "s" {
			r.Stream = name
		} else {
			r.Prefix = name
		}
		out = append(out, r)
		return nil
	})
	return out, s.fail("retentions", err)
}

func (s *Store) now() time.Time {
	if s.opts.Clock != nil {
		return s.opts.Clock()
	}
	return time.Now()
}

// Sweep implements eventstore.Deleter: one pass of the background work.
func (s *Store) Sweep(ctx context.Context) (eventstore.SweepStats, error) {
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
	var stats eventstore.SweepStats
	rules, err := s.Retentions(ctx)
	if err != nil {
		return stats, err
	}
	for _, r := range rules {
		// Each truncation checks that r still holds: a rule changed or
		// cleared once SetRetention has returned is not applied; the
		// next pass applies what holds then.
		truncate := func(ctx context.Context, stream string, before uint64) error {
			return s.truncate(ctx, stream, before, &r)
		}
		retain := func(stream string) error {
			ok, err := backend.Retain(ctx, s, truncate, r, stream, s.now())
			if ok {
				stats.Truncated++
			}
			return err
		}
		if r.Stream != "" {
			err = retain(r.Stream)
		} else {
			err = s.streamsWithPrefix(ctx, r.Prefix, retain)
		}
		if errors.Is(err, errRuleChanged) {
			continue
		}
		if err != nil {
			return stats, err
		}
	}
	after := ""
	for {
		pending, err := s.pendingPage(ctx, after)
		if err != nil {
			return stats, err
		}
		for _, p := range pending {
			for {
				n, done, err := s.reclaim(ctx, p.stream, p.before)
				stats.Removed += n
				if err != nil {
					return stats, err
				}
				if done {
					break
				}
				if err := s.sweepPause(ctx, n); err != nil {
					return stats, err
				}
			}
		}
		if len(pending) < 100 {
			break
		}
		after = pending[len(pending)-1].stream
	}
	if err := s.enter(); err != nil {
		return stats, err
	}
	defer s.leave()
	err = s.pool.QueryRow(ctx, `SELECT count(*) FROM stream_removals WHERE pending`).Scan(&stats.Pending)
	return stats, s.fail("sweep", err)
}

type pendingStream struct {
	stream string
	before uint64
}

func (s *Store) pendingPage(ctx context.Context, after string) ([]pendingStream, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	rows, err := s.pool.Query(ctx, `SELECT stream, before FROM stream_removals WHERE pending AND stream > $1 ORDER BY stream LIMIT 100`, after)
	if err != nil {
		return nil, s.fail("sweep", err)
	}
	var out []pendingStream
	var st string
	var b int64
	_, err = pgx.ForEachRow(rows, []any{&st, &b}, func() error {
		out = append(out, pendingStream{st, uint64(b)})
		return nil
	})
	return out, s.fail("sweep", err)
}

// reclaim deletes up to SweepBatch events of stream below before, with
// their tag rows; done once none is left, when it also deletes the
// stream's append rows left empty and clears pending (unless the stream
// was truncated further meanwhile).
func (s *Store) reclaim(ctx context.Context, stream string, before uint64) (int, bool, error) {
	if err := s.enter(); err != nil {
		return 0, false, err
	}
	defer s.leave()
	if err := checkCtx(ctx); err != nil {
		return 0, false, err
	}
	var n int
	err := s.pool.QueryRow(ctx, `WITH gone AS (
			DELETE FROM events WHERE stream = $1 AND seq IN (
				SELECT seq FROM events WHERE stream = $1 AND seq < $2 ORDER BY seq LIMIT $3)
			RETURNING seq, tags
		), pos AS (
			SELECT g.tags, a.position + (g.seq - a.first_seq) AS position FROM gone g
			CROSS JOIN LATERAL (SELECT position, first_seq FROM appends a
				WHERE a.stream = $1 AND a.first_seq <= g.seq ORDER BY a.first_seq DESC LIMIT 1) a
		), untag AS (
			DELETE FROM event_tags t USING pos p, unnest(p.tags) AS tg(tag)
			WHERE t.tag = tg.tag AND t.position = p.position
		)
		SELECT count(*) FROM gone`, stream, int64(min(before, 1<<62)), s.opts.SweepBatch).Scan(&n)
	if err != nil {
		return 0, false, s.fail(fmt.Sprintf("sweep %q", stream), err)
	}
	if n == s.opts.SweepBatch {
		return n, false, nil
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM appends WHERE stream = $1 AND first_seq + count <= $2`, stream, int64(min(before, 1<<62))); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE stream_removals SET pending = false WHERE stream = $1 AND before = $2`, stream, int64(min(before, 1<<62)))
		return err
	})
	return n, true, s.fail(fmt.Sprintf("sweep %q", stream), err)
}

// streamsWithPrefix calls fn with every stream whose id starts with
// prefix, a page at a time.
func (s *Store) streamsWithPrefix(ctx context.Context, prefix string, fn func(string) error) error {
	after := ""
	for {
		var names []string
		err := func() error {
			if err := s.enter(); err != nil {
				return err
			}
			defer s.leave()
			rows, err := s.pool.Query(ctx, `SELECT stream FROM streams
				WHERE stream >= $1 AND stream < $1 || chr(1114111) AND starts_with(stream, $1) AND stream > $2 AND version > 0
				ORDER BY stream LIMIT 1000`, prefix, after)
			if err != nil {
				return s.fail("list streams by prefix", err)
			}
			names, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return s.fail("list streams by prefix", err)
		}()
		if err != nil {
			return err
		}
		for _, name := range names {
			if err := fn(name); err != nil {
				return err
			}
		}
		if len(names) < 1000 {
			return nil
		}
		after = names[len(names)-1]
	}
}

// sweepPause spaces the sweep's batches so that it removes at most
// SweepRate events a second.
func (s *Store) sweepPause(ctx context.Context, n int) error {
	return backend.SweepPause(ctx, s.closing, n, s.opts.SweepRate)
}

// sweeper runs Sweep every SweepInterval until Close.
func (s *Store) sweeper(ctx context.Context) {
	t := time.NewTicker(s.opts.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, eventstore.ErrClosed) {
			slog.Default().Error("event store sweep failed", "err", err)
		}
	}
}
