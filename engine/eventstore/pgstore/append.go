package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/logbook/logbook/engine/eventstore"
)

const (
	statusWritten   = 0
	statusDuplicate = 1
	statusIDTaken   = 2
	statusConflict  = 3
)

// appendReq is one Append on its way to an appender.
type appendReq struct {
	stream string
	expect eventstore.ExpectedVersion
	args   []any
	bytes  int
	done   chan struct{}

	status   int32
	first    int64
	last     int64
	appendNo int64
	err      error
}

// Append implements eventstore.Store. Appends of this process are written
// by a few appender goroutines, each taking whatever appends are waiting
// into one pipelined round trip and one transaction (appends to one
// stream keep their order); then the append waits for the sequencer to
// give its events positions.
func (s *Store) Append(ctx context.Context, stream string, expect eventstore.ExpectedVersion, events []eventstore.NewEvent) (eventstore.AppendResult, error) {
	if err := s.limits.ValidateAppend(stream, expect, events); err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("append to %q: %w", stream, err)
	}
	if err := checkCtx(ctx); err != nil {
		return eventstore.AppendResult{}, err
	}
	n := len(events)
	ids := make([][16]byte, n)
	types := make([]string, n)
	versions := make([]int32, n)
	tags := make([]string, n)
	metas := make([]*string, n)
	datas := make([][]byte, n)
	size := 0
	for i := range events {
		ev := &events[i]
		if ev.ID.IsZero() {
			ev.ID = eventstore.NewID() // the caller learns the id, so a retry of the same slice is idempotent
		}
		ids[i] = ev.ID
		types[i] = ev.Type
		versions[i] = int32(ev.Version)
		// Tags cannot hold control characters (Limits.ValidateTag), so
		// the unit separator joins them safely.
		tags[i] = strings.Join(ev.Tags, "\x1f")
		if len(ev.Meta) > 0 {
			b, err := json.Marshal(ev.Meta)
			if err != nil {
				return eventstore.AppendResult{}, fmt.Errorf("append to %q: meta: %w", stream, err)
			}
			m := string(b)
			metas[i] = &m
		}
		datas[i] = ev.Data
		if datas[i] == nil {
			datas[i] = []byte{}
		}
		size += eventstore.EventSize(ev)
	}
	req := &appendReq{
		stream: stream, expect: expect, bytes: size, done: make(chan struct{}),
		args: []any{stream, int64(expect), ids, types, versions, tags, metas, datas},
	}
	if err := s.enter(); err != nil {
		return eventstore.AppendResult{}, err
	}
	s.leave()
	select {
	case s.reqs <- req:
	case <-ctx.Done():
		return eventstore.AppendResult{}, ctx.Err()
	case <-s.closing:
		return eventstore.AppendResult{}, eventstore.ErrClosed
	}
	select {
	case <-req.done:
	case <-ctx.Done():
		// The append may still commit; retrying with the same event ids
		// is safe.
		return eventstore.AppendResult{}, ctx.Err()
	case <-s.closing:
		select {
		case <-req.done:
		default:
			return eventstore.AppendResult{}, eventstore.ErrClosed // its outcome is unknown
		}
	}
	if req.err != nil {
		return eventstore.AppendResult{}, s.fail(fmt.Sprintf("append to %q", stream), req.err)
	}
	res := eventstore.AppendResult{Stream: stream, FirstSeq: uint64(req.first), LastSeq: uint64(req.last)}
	switch req.status {
	case statusWritten:
	case statusDuplicate:
		res.Duplicate = true
	case statusIDTaken:
		return eventstore.AppendResult{}, fmt.Errorf("append to %q: %w", stream, eventstore.ErrDuplicateEventID)
	case statusConflict:
		// The appends that moved the stream may not be sequenced yet. A
		// caller that reloads the stream on a conflict (the aggregate
		// runtime does) must find them, or it would conflict again.
		if err := s.awaitVersion(ctx, stream, uint64(req.first)); err != nil {
			return eventstore.AppendResult{}, err
		}
		return eventstore.AppendResult{}, &eventstore.ConflictError{Stream: stream, Expected: expect, Actual: uint64(req.first)}
	default:
		return eventstore.AppendResult{}, fmt.Errorf("pgstore: append to %q: unknown status %d", stream, req.status)
	}
	if res.Duplicate {
		// The original append was most likely sequenced long ago, before
		// this process started or beyond what it remembers: ask the
		// table first.
		fp, lp, ok, err := s.storedPositions(ctx, stream, res.FirstSeq, res.LastSeq)
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		if ok {
			res.FirstPosition, res.LastPosition = fp, lp
			return res, nil
		}
	}
	firstPos, lastPos, err := s.positions(ctx, req.appendNo, stream, res.FirstSeq, res.LastSeq)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	res.FirstPosition, res.LastPosition = firstPos, lastPos
	return res, nil
}

const (
	appenders       = 8
	maxBatchAppends = 256
	maxBatchBytes   = 8 << 20
	appendEventsSQL = `SELECT status, first_seq, last_seq, append FROM append_events($1, $2, $3, $4, $5, $6, $7, $8)`
)

// appender writes batches of waiting appends until the store closes.
func (s *Store) appender(ctx context.Context) {
	var batch []*appendReq
	for {
		batch = batch[:0]
		select {
		case req := <-s.reqs:
			batch = append(batch, req)
		case <-ctx.Done():
			s.drainReqs()
			return
		}
		size := batch[0].bytes
	more:
		for len(batch) < maxBatchAppends && size < maxBatchBytes {
			select {
			case req := <-s.reqs:
				batch = append(batch, req)
				size += req.bytes
			default:
				break more
			}
		}
		s.writeBatch(ctx, batch)
	}
}

// drainReqs fails the appends still queued at Close.
func (s *Store) drainReqs() {
	for {
		select {
		case req := <-s.reqs:
			req.err = eventstore.ErrClosed
			close(req.done)
		default:
			return
		}
	}
}

// writeBatch writes appends in one transaction. Sorting by stream makes
// every batch take its row locks in the same order, so concurrent batches
// wait for each other but never deadlock; the sort is stable, so appends
// to one stream keep their order. If the batch fails as a whole (the
// unique index caught two concurrent appends of the same ids, say), each
// append is retried alone, so one bad append cannot fail the others.
func (s *Store) writeBatch(ctx context.Context, batch []*appendReq) {
	slices.SortStableFunc(batch, func(a, b *appendReq) int { return strings.Compare(a.stream, b.stream) })
	err := s.sendBatch(ctx, batch)
	if err != nil && len(batch) > 1 {
		for _, req := range batch {
			s.writeAlone(ctx, req)
		}
		return
	}
	if err != nil {
		s.writeAlone(ctx, batch[0])
		return
	}
	s.finish(ctx, batch)
}

func (s *Store) writeAlone(ctx context.Context, req *appendReq) {
	err := s.sendBatch(ctx, []*appendReq{req})
	// Two appends with the same ids raced past the duplicate check: the
	// loser's insert waited for the winner and hit the unique index. Now
	// the check sees the winner.
	for try := 0; try < 3 && isUniqueViolation(err, "events_id"); try++ {
		err = s.sendBatch(ctx, []*appendReq{req})
	}
	req.err = err
	s.finish(ctx, []*appendReq{req})
}

// finish answers the appends of a batch and wakes the sequencer.
func (s *Store) finish(ctx context.Context, batch []*appendReq) {
	wrote := false
	for _, req := range batch {
		if req.err != nil && ctx.Err() != nil {
			req.err = eventstore.ErrClosed // the batch was cut short by Close
		}
		wrote = wrote || (req.err == nil && req.status == statusWritten)
		close(req.done)
	}
	if wrote {
		s.kick()
	}
}

// sendBatch runs the appends as one pipelined batch, which PostgreSQL
// runs as one implicit transaction: one round trip, one commit.
func (s *Store) sendBatch(ctx context.Context, batch []*appendReq) error {
	b := &pgx.Batch{}
	for _, req := range batch {
		b.Queue(appendEventsSQL, req.args...).QueryRow(func(row pgx.Row) error {
			return row.Scan(&req.status, &req.first, &req.last, &req.appendNo)
		})
	}
	if s.opts.beforeCommit == nil {
		return s.pool.SendBatch(ctx, b).Close()
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		for _, req := range batch {
			if req.status == statusWritten {
				if err := s.opts.beforeCommit(ctx, req.stream); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// awaitVersion waits until the stream's readable version reaches v.
func (s *Store) awaitVersion(ctx context.Context, stream string, v uint64) error {
	for {
		changed := s.notify.Changed(eventstore.OfStream(stream))
		cur, err := s.StreamVersion(ctx, stream)
		if err != nil || cur >= v {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.opts.Poll):
		}
	}
}

func isUniqueViolation(err error, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == constraint
}

// positions waits until the sequencer has given append appendNo its
// positions. The follower resolves waiters as it reads each new stretch
// of the log; an append it has already passed is found in recent, and as
// a last resort (recent forgets) in the table itself.
func (s *Store) positions(ctx context.Context, appendNo int64, stream string, first, last uint64) (uint64, uint64, error) {
	s.mu.Lock()
	if p, ok := s.recent[appendNo]; ok {
		s.mu.Unlock()
		return p[0], p[1], nil
	}
	w, ok := s.waiters[appendNo]
	if !ok {
		w = &waiter{done: make(chan struct{})}
		s.waiters[appendNo] = w
	}
	s.mu.Unlock()

	check := time.NewTimer(time.Second)
	defer check.Stop()
	for {
		select {
		case <-w.done:
			return w.first, w.last, w.err
		case <-ctx.Done():
			// The waiter stays: the follower removes it when the append
			// is sequenced. The append itself has committed.
			return 0, 0, ctx.Err()
		case <-check.C:
			fp, lp, ok, err := s.storedPositions(ctx, stream, first, last)
			if err != nil {
				return 0, 0, err
			}
			if ok {
				s.mu.Lock()
				if s.waiters[appendNo] == w {
					delete(s.waiters, appendNo)
				}
				s.mu.Unlock()
				return fp, lp, nil
			}
			check.Reset(time.Second)
		}
	}
}

// storedPositions reads the positions of a stream's seqs first and last,
// if the sequencer has given them.
func (s *Store) storedPositions(ctx context.Context, stream string, first, last uint64) (uint64, uint64, bool, error) {
	var fp, lp *int64
	err := s.pool.QueryRow(ctx, `SELECT (SELECT position FROM events WHERE stream = $1 AND seq = $2),
		(SELECT position FROM events WHERE stream = $1 AND seq = $3)`, stream, int64(first), int64(last)).Scan(&fp, &lp)
	if err != nil {
		return 0, 0, false, s.fail("read positions", err)
	}
	if fp == nil || lp == nil {
		return 0, 0, false, nil
	}
	return uint64(*fp), uint64(*lp), true, nil
}

// kick wakes the sequencer after a commit: directly when it runs in this
// process, else with a NOTIFY outside the append's transaction (a NOTIFY
// inside it would take PostgreSQL's global notify lock across the commit
// and serialize every writer). Kicks coalesce: at most one NOTIFY is in
// flight per process.
func (s *Store) kick() {
	if s.sequencing.Load() {
		select {
		case s.kickLocal <- struct{}{}:
		default:
		}
		return
	}
	s.kicks.Add(1)
	if !s.kicking.CompareAndSwap(false, true) {
		return // the sender in flight sees this kick's count and sends again
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for {
			n := s.kicks.Load()
			// A lost kick only costs the sequencer's poll interval.
			_, _ = s.pool.Exec(ctx, `SELECT pg_notify($1, '')`, s.kickCh)
			s.kicking.Store(false)
			// Kicks that came during the send left it to this sender:
			// send once more, unless a new sender has taken over.
			if s.kicks.Load() == n || !s.kicking.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}
