package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// maxEventsPerPass bounds one sequencer transaction (give or take the
// rest of its last append).
const maxEventsPerPass = 20_000

// sequencer competes for the sequencer's advisory lock and, while it holds
// it, gives committed appends their positions. The lock belongs to a
// session, so when this process dies or its connection breaks, another
// process's sequencer takes over within a retry interval.
func (s *Store) sequencer(ctx context.Context) {
	for ctx.Err() == nil {
		_ = s.sequenceWhileLeader(ctx) // lost the lock, or never had it: try again
		s.sequencing.Store(false)
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (s *Store) sequenceWhileLeader(ctx context.Context) error {
	conn, err := s.dedicated(ctx)
	if err != nil {
		return err
	}
	// The session holds the lock: closing it releases the lock.
	defer conn.Close(context.Background())
	var leader bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, s.lockKey).Scan(&leader); err != nil || !leader {
		return err
	}
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{s.kickCh}.Sanitize()); err != nil {
		return err
	}
	s.sequencing.Store(true)
	last := int64(-1)
	for {
		// Drain the local kick first: a commit after this point kicks
		// again, and if this pass misses it the next one sees it.
		select {
		case <-s.kickLocal:
		default:
		}
		head, err := s.pass(ctx, conn)
		if err != nil {
			return err
		}
		// Another pass right away while passes find work: under load
		// the next batch has committed meanwhile.
		if moved := head > last; moved {
			last = head
			continue
		}
		if err := s.waitForKick(ctx, conn); err != nil {
			return err
		}
	}
}

// pass runs one sequencer transaction and returns the head after it. It
// publishes the stretch it positioned from the rows the pass returns, if
// this process has published everything before it (it normally has: the
// head moves only here); otherwise the follower reads it as usual.
func (s *Store) pass(ctx context.Context, conn *pgx.Conn) (int64, error) {
	rows, err := conn.Query(ctx, `SELECT append_no, position, stream, tags FROM sequence_events($1, $2)`, maxEventsPerPass, s.headCh)
	if err != nil {
		return 0, err
	}
	st, err := collect(rows)
	if err != nil {
		return 0, err
	}
	if len(st.spans) == 0 {
		return int64(s.knownHead()), nil
	}
	first, head := st.spans[0].first, st.spans[len(st.spans)-1].last
	s.announce(first-1, head, head, st)
	s.publishUpTo(ctx, head) // if announce found this process behind
	return int64(head), nil
}

// waitForKick sleeps until a writer of this process or (by NOTIFY) of
// another one has committed, or a short poll interval passes: the poll
// covers kicks lost with a broken connection.
func (s *Store) waitForKick(ctx context.Context, conn *pgx.Conn) error {
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-s.kickLocal:
			cancel()
		case <-stop:
		}
	}()
	_, err := conn.WaitForNotification(wctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && wctx.Err() == nil {
		return err
	}
	if conn.IsClosed() {
		return errors.New("pgstore: sequencer connection closed")
	}
	return nil
}
