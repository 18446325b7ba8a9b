package pgstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/backend"
)

// The columns of an event, from events e and the append a it belongs to.
const eventColumns = `e.stream, e.seq, a.position + (e.seq - a.first_seq), e.id, e.type, e.version, e.tags, e.meta, e.data, a.time`

// ofAppend joins each event e to its append a.
const ofAppend = `CROSS JOIN LATERAL (SELECT position, first_seq, time FROM appends a
	WHERE a.stream = e.stream AND a.first_seq <= e.seq ORDER BY a.first_seq DESC LIMIT 1) a`

func (s *Store) clampMax(max int) int {
	if max <= 0 || max > s.opts.MaxReadBatch {
		return s.opts.MaxReadBatch
	}
	return max
}

func (s *Store) query(ctx context.Context, op string, sql string, args ...any) ([]eventstore.Event, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, s.fail(op, err)
	}
	out, err := scanEvents(rows)
	if err != nil {
		return nil, s.fail(op, err)
	}
	return out, nil
}

func scanEvents(rows pgx.Rows) ([]eventstore.Event, error) {
	defer rows.Close()
	var out []eventstore.Event
	var seq, pos int64
	var version int32
	var meta *string
	for rows.Next() {
		var ev eventstore.Event
		if err := rows.Scan(&ev.Stream, &seq, &pos, &ev.ID, &ev.Type, &version, &ev.Tags, &meta, &ev.Data, &ev.Time); err != nil {
			return nil, err
		}
		ev.Seq, ev.Position, ev.Version = uint64(seq), uint64(pos), int(version)
		if len(ev.Tags) == 0 {
			ev.Tags = nil
		}
		if meta != nil {
			if err := json.Unmarshal([]byte(*meta), &ev.Meta); err != nil {
				return nil, fmt.Errorf("event %d: meta: %w", pos, err)
			}
		}
		out = append(out, ev)
	}
	return out, rows.Err()
}

// Head implements eventstore.Store.
func (s *Store) Head(ctx context.Context) (uint64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	var h int64
	if err := s.pool.QueryRow(ctx, `SELECT position FROM head`).Scan(&h); err != nil {
		return 0, s.fail("head", err)
	}
	return uint64(h), nil
}

// ReadAll implements eventstore.Store. It walks appends in position
// order from the one that holds from, and each one's events.
func (s *Store) ReadAll(ctx context.Context, from uint64, max int) ([]eventstore.Event, error) {
	if from == 0 {
		from = 1
	}
	max = s.clampMax(max)
	for {
		evs, err := s.query(ctx, fmt.Sprintf("read all from %d", from),
			`SELECT `+eventColumns+`
			FROM (SELECT * FROM appends WHERE position >= coalesce((SELECT max(position) FROM appends WHERE position <= $1), $1)
				ORDER BY position LIMIT $2) a
			CROSS JOIN LATERAL (SELECT * FROM events e WHERE e.stream = a.stream AND e.seq >= a.first_seq AND e.seq < a.first_seq + a.count
				AND e.seq >= a.first_seq + ($1 - a.position) AND e.seq >= `+hiddenBefore("a.stream")+` ORDER BY e.seq) e
			ORDER BY a.position, e.seq LIMIT $2`,
			int64(min(from, 1<<62)), max)
		if err != nil || len(evs) > 0 {
			return evs, err
		}
		// Nothing: the end of the log, or a page of appends whose events
		// were all removed (delete.go); then read on from the first
		// append with an event to show, or past the page if none has one.
		// An append committed since the read above has events to show,
		// so it is never jumped over.
		next, err := s.pastPage(ctx, `SELECT coalesce(
			min(a.position + greatest($1 - a.position, 0)) FILTER (WHERE EXISTS (SELECT 1 FROM events e
				WHERE e.stream = a.stream AND e.seq >= a.first_seq AND e.seq < a.first_seq + a.count
				AND e.seq >= a.first_seq + ($1 - a.position) AND e.seq >= `+hiddenBefore("a.stream")+`)),
			max(a.position + a.count))
			FROM (SELECT * FROM appends
			WHERE position >= coalesce((SELECT max(position) FROM appends WHERE position <= $1), $1)
			ORDER BY position LIMIT $2) a`, from, max)
		if err != nil || next <= from {
			return nil, err
		}
		from = next
	}
}

// pastPage runs sql, which returns the position after the page a read
// from from scanned (NULL if it scanned none).
func (s *Store) pastPage(ctx context.Context, sql string, from uint64, args ...any) (uint64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	var next *int64
	if err := s.pool.QueryRow(ctx, sql, append([]any{int64(min(from, 1<<62))}, args...)...).Scan(&next); err != nil {
		return 0, s.fail("read past removed events", err)
	}
	if next == nil {
		return 0, nil
	}
	return uint64(*next), nil
}

// ReadStream implements eventstore.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]eventstore.Event, error) {
	if err := s.limits.ValidateStreamID(stream); err != nil {
		return nil, fmt.Errorf("read stream: %w", err)
	}
	if from == 0 {
		from = 1
	}
	evs, err := s.query(ctx, fmt.Sprintf("read stream %q", stream),
		`SELECT `+eventColumns+` FROM (SELECT * FROM events WHERE stream = $1 AND seq >= $2 AND seq >= `+hiddenBefore("$1")+` ORDER BY seq LIMIT $3) e `+ofAppend+` ORDER BY e.seq`,
		stream, int64(min(from, 1<<62)), s.clampMax(max))
	if err == nil && len(evs) == 0 {
		err = s.readRemoved(ctx, stream)
	}
	return evs, err
}

// ReadStreamBackward implements eventstore.Store.
func (s *Store) ReadStreamBackward(ctx context.Context, stream string, from uint64, max int) ([]eventstore.Event, error) {
	if err := s.limits.ValidateStreamID(stream); err != nil {
		return nil, fmt.Errorf("read stream backward: %w", err)
	}
	if from == 0 || from > 1<<62 {
		from = 1 << 62
	}
	evs, err := s.query(ctx, fmt.Sprintf("read stream %q backward", stream),
		`SELECT `+eventColumns+` FROM (SELECT * FROM events WHERE stream = $1 AND seq <= $2 AND seq >= `+hiddenBefore("$1")+` ORDER BY seq DESC LIMIT $3) e `+ofAppend+` ORDER BY e.seq DESC`,
		stream, int64(from), s.clampMax(max))
	if err == nil && len(evs) == 0 {
		err = s.readRemoved(ctx, stream)
	}
	return evs, err
}

// ReadTag implements eventstore.Store.
func (s *Store) ReadTag(ctx context.Context, tag string, from uint64, max int) ([]eventstore.Event, error) {
	if err := s.limits.ValidateTag(tag); err != nil {
		return nil, fmt.Errorf("read tag: %w", err)
	}
	if from == 0 {
		from = 1
	}
	max = s.clampMax(max)
	for {
		evs, err := s.query(ctx, fmt.Sprintf("read tag %q", tag),
			`SELECT e.stream, e.seq, t.position, e.id, e.type, e.version, e.tags, e.meta, e.data, a.time
			FROM (SELECT position FROM event_tags WHERE tag = $1 AND position >= $2 ORDER BY position LIMIT $3) t
			CROSS JOIN LATERAL (SELECT * FROM appends a WHERE a.position <= t.position ORDER BY a.position DESC LIMIT 1) a
			JOIN events e ON e.stream = a.stream AND e.seq = a.first_seq + (t.position - a.position)
			WHERE e.seq >= `+hiddenBefore("e.stream")+`
			ORDER BY t.position`,
			tag, int64(min(from, 1<<62)), max)
		if err != nil || len(evs) > 0 {
			return evs, err
		}
		// As in ReadAll: on to the first tagged event to show, or past
		// the page if none is.
		next, err := s.pastPage(ctx, `SELECT coalesce(
			min(t.position) FILTER (WHERE EXISTS (SELECT 1 FROM appends a
				JOIN events e ON e.stream = a.stream AND e.seq = a.first_seq + (t.position - a.position)
				WHERE a.position = (SELECT max(position) FROM appends x WHERE x.position <= t.position)
				AND e.seq >= `+hiddenBefore("e.stream")+`)),
			max(t.position) + 1)
			FROM (SELECT position FROM event_tags
			WHERE tag = $2 AND position >= $1 ORDER BY position LIMIT $3) t`, from, tag, max)
		if err != nil || next <= from {
			return nil, err
		}
		from = next
	}
}

// ListStreams implements eventstore.Store. A stream's row is made, at
// version 0, by an append that may then conflict: such a row is not a
// stream.
func (s *Store) ListStreams(ctx context.Context, after string, max int) ([]string, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	// A deleted stream, or one truncated past its end, is not listed.
	rows, err := s.pool.Query(ctx, `SELECT s.stream FROM streams s WHERE s.stream > $1 AND s.version > 0
		AND NOT EXISTS (SELECT 1 FROM stream_removals r WHERE r.stream = s.stream AND r.before > (s.version & 4611686018427387903))
		ORDER BY s.stream LIMIT $2`, after, s.clampMax(max))
	if err != nil {
		return nil, s.fail("list streams", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, s.fail("list streams", err)
	}
	return names, nil
}

// StreamVersion implements eventstore.Store.
func (s *Store) StreamVersion(ctx context.Context, stream string) (uint64, error) {
	if err := s.limits.ValidateStreamID(stream); err != nil {
		return 0, fmt.Errorf("stream version: %w", err)
	}
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	var v int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT version FROM streams WHERE stream = $1), 0)`, stream).Scan(&v)
	if err != nil {
		return 0, s.fail(fmt.Sprintf("version of %q", stream), err)
	}
	return uint64(v) &^ tombBit, nil
}

// readRemoved is removedErr for a read (with the store entered).
func (s *Store) readRemoved(ctx context.Context, stream string) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	return s.removedErr(ctx, stream)
}

// ReadFiltered implements backend.Tail.
func (s *Store) ReadFiltered(ctx context.Context, f eventstore.Filter, cursor uint64, max int) ([]eventstore.Event, error) {
	return backend.ReadFiltered(ctx, s, f, cursor, max)
}

// Changed implements backend.Tail. The first call starts following the
// log.
func (s *Store) Changed(f eventstore.Filter) <-chan struct{} {
	s.startFollowing()
	return s.notify.Changed(f)
}

// Subscribe implements eventstore.Store.
func (s *Store) Subscribe(ctx context.Context, f eventstore.Filter, from uint64) (eventstore.Subscription, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if err := s.limits.ValidateFilter(f); err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	return backend.NewSubscription(s, f, from, 0), nil
}

// SaveSnapshot implements eventstore.Store. A snapshot never replaces a
// newer one.
func (s *Store) SaveSnapshot(ctx context.Context, snap eventstore.Snapshot) error {
	if err := s.limits.ValidateSnapshot(snap); err != nil {
		return fmt.Errorf("save snapshot: %w", err)
	}
	if err := checkCtx(ctx); err != nil {
		return err
	}
	v, err := s.StreamVersion(ctx, snap.Stream)
	if err != nil {
		return err
	}
	if snap.Seq > v {
		return backend.SnapshotBeyondVersion(snap, v)
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	data := snap.Data
	if data == nil {
		data = []byte{}
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO snapshots AS o VALUES ($1, $2, $3, $4)
		ON CONFLICT (stream) DO UPDATE SET seq = excluded.seq, version = excluded.version, data = excluded.data
		WHERE o.seq <= excluded.seq`, snap.Stream, int64(snap.Seq), int32(snap.Version), data)
	return s.fail(fmt.Sprintf("save snapshot of %q", snap.Stream), err)
}

// LoadSnapshot implements eventstore.Store.
func (s *Store) LoadSnapshot(ctx context.Context, stream string) (eventstore.Snapshot, bool, error) {
	if err := s.limits.ValidateStreamID(stream); err != nil {
		return eventstore.Snapshot{}, false, fmt.Errorf("load snapshot: %w", err)
	}
	if err := s.enter(); err != nil {
		return eventstore.Snapshot{}, false, err
	}
	defer s.leave()
	snap := eventstore.Snapshot{Stream: stream}
	var seq int64
	var version int32
	err := s.pool.QueryRow(ctx, `SELECT seq, version, data FROM snapshots WHERE stream = $1`, stream).Scan(&seq, &version, &snap.Data)
	if err == pgx.ErrNoRows {
		return eventstore.Snapshot{}, false, nil
	}
	if err != nil {
		return eventstore.Snapshot{}, false, s.fail(fmt.Sprintf("load snapshot of %q", stream), err)
	}
	snap.Seq, snap.Version = uint64(seq), int(version)
	return snap, true, nil
}
