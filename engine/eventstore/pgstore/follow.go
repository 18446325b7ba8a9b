package pgstore

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// recentAppends is how many sequenced appends a process remembers, for
// appends that register for their positions after the follower passed
// them.
const recentAppends = 1 << 16

// follow keeps this process's view of the head current: it LISTENs for
// the sequencer's notifications and polls as a safety net, and for each
// new stretch of the log it wakes the subscriptions of the streams and
// tags in it and the appends waiting for their positions.
func (s *Store) follow(ctx context.Context) {
	for ctx.Err() == nil {
		err := s.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		_ = err // the connection broke: reconnect, polling meanwhile
		s.advance(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(s.opts.Poll):
		}
	}
}

func (s *Store) listen(ctx context.Context) error {
	conn, err := s.dedicated(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{s.headCh}.Sanitize()); err != nil {
		return err
	}
	s.advance(ctx) // what committed before LISTEN took effect
	for {
		wctx, cancel := context.WithTimeout(ctx, s.opts.Poll)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && wctx.Err() == nil:
			return err
		case err == nil:
			if h, perr := strconv.ParseUint(n.Payload, 10, 64); perr == nil && h <= s.knownHead() {
				continue
			}
		}
		s.advance(ctx)
	}
}

func (s *Store) knownHead() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.known
}

// advance reads the head and publishes everything up to it. Only the
// follower goroutine calls it, so stretches are published in order.
func (s *Store) advance(ctx context.Context) {
	var head int64
	if err := s.pool.QueryRow(ctx, `SELECT position FROM head`).Scan(&head); err != nil {
		return
	}
	s.publishUpTo(ctx, uint64(head))
}

// publishUpTo publishes everything up to head, in stretches of at most
// 10,000 positions.
func (s *Store) publishUpTo(ctx context.Context, head uint64) {
	for ctx.Err() == nil {
		from := s.knownHead()
		if head <= from {
			return
		}
		if err := s.publish(ctx, from, min(head, from+10_000), head); err != nil {
			return
		}
	}
}

// dedicated opens a connection outside the pool, for a session that
// LISTENs or holds a lock. Its waits end by deadline rather than by a
// cancel request, which PostgreSQL could deliver to the session's next
// statement instead.
func (s *Store) dedicated(ctx context.Context) (*pgx.Conn, error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// span is where one append's events lie in the log.
type span struct {
	append      int64
	first, last uint64
}

// publish announces positions (from, to] of a log whose head is head: it
// reads which appends, streams and tags they hold, resolves waiting
// appends and wakes subscriptions. The head only ever moves to the end of
// a whole append, but a stretch that ends before it may cut an append in
// two: that append is carried over to the next stretch, and answered
// only once all of it has been seen.
func (s *Store) publish(ctx context.Context, from, to, head uint64) error {
	rows, err := s.pool.Query(ctx, `SELECT append_no, position, stream, tags FROM events
		WHERE position > $1 AND position <= $2 ORDER BY position`, int64(from), int64(to))
	if err != nil {
		return err
	}
	st, err := collect(rows)
	if err != nil {
		return err
	}
	s.announce(from, to, head, st)
	return nil
}

// stretch is what a stretch of the log holds: its appends, streams and
// tags.
type stretch struct {
	spans   []span
	streams []string
	tags    map[string]struct{}
}

// collect reads rows of (append_no, position, stream, tags) in position
// order.
func collect(rows pgx.Rows) (stretch, error) {
	defer rows.Close()
	st := stretch{tags: make(map[string]struct{})}
	var a, pos int64
	var stream string
	var evTags []string
	for rows.Next() {
		if err := rows.Scan(&a, &pos, &stream, &evTags); err != nil {
			return st, err
		}
		if n := len(st.spans); n > 0 && st.spans[n-1].append == a {
			st.spans[n-1].last = uint64(pos)
		} else {
			st.spans = append(st.spans, span{a, uint64(pos), uint64(pos)})
		}
		if len(st.streams) == 0 || st.streams[len(st.streams)-1] != stream {
			st.streams = append(st.streams, stream)
		}
		for _, t := range evTags {
			st.tags[t] = struct{}{}
		}
	}
	return st, rows.Err()
}

// announce publishes stretch (from, to] unless someone else has: see
// publish.
func (s *Store) announce(from, to, head uint64, st stretch) {
	spans := st.spans
	s.mu.Lock()
	if s.known != from {
		s.mu.Unlock()
		return // someone else published this stretch
	}
	s.known = to
	if c := s.carry; c != nil && len(spans) > 0 && spans[0].append == c.append {
		spans[0].first = c.first
	}
	s.carry = nil
	if to < head && len(spans) > 0 {
		last := spans[len(spans)-1]
		s.carry = &last
		spans = spans[:len(spans)-1]
	}
	for _, sp := range spans {
		if w, ok := s.waiters[sp.append]; ok {
			w.first, w.last = sp.first, sp.last
			close(w.done)
			delete(s.waiters, sp.append)
		}
		s.recent[sp.append] = [2]uint64{sp.first, sp.last}
		s.order = append(s.order, sp.append)
	}
	if over := len(s.order) - recentAppends; over > 0 {
		for _, a := range s.order[:over] {
			delete(s.recent, a)
		}
		s.order = append(s.order[:0], s.order[over:]...)
	}
	s.mu.Unlock()
	s.notify.Publish(st.streams, st.tags)
}
