package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/backend"
)

// An append's outcome.
const (
	statusWritten = iota
	statusDuplicate
	statusIDTaken
	statusConflict
	statusTombstoned
)

// appendReq is one Append on its way to an appender.
type appendReq struct {
	stream string
	expect eventstore.ExpectedVersion
	events []eventstore.NewEvent // with their ids
	metas  []*string             // each event's meta as JSON, nil if none
	bytes  int
	done   chan struct{}

	status   int
	first    uint64 // first seq written (statusConflict: the stream's version)
	last     uint64
	firstPos uint64
	inBatch  bool // firstPos is counted from the head before the batch
	err      error
}

// Append implements eventstore.Store. Appends of this process are written
// by a few appender goroutines, each taking whatever appends are waiting
// into one transaction: its events take the positions after the head,
// and it commits holding the head's lock (see writeBatch).
func (s *Store) Append(ctx context.Context, stream string, expect eventstore.ExpectedVersion, events []eventstore.NewEvent) (eventstore.AppendResult, error) {
	if err := s.limits.ValidateAppend(stream, expect, events); err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("append to %q: %w", stream, err)
	}
	if err := checkCtx(ctx); err != nil {
		return eventstore.AppendResult{}, err
	}
	n := len(events)
	// The request keeps copies of the events: an append whose context
	// ends returns while it may still be queued, and its caller may then
	// reuse the slice.
	req := &appendReq{
		stream: stream, expect: expect, events: make([]eventstore.NewEvent, n), done: make(chan struct{}),
		metas: make([]*string, n),
	}
	for i := range events {
		ev := &events[i]
		if ev.ID.IsZero() {
			ev.ID = eventstore.NewID() // the caller learns the id, so a retry of the same slice is idempotent
		}
		req.events[i] = eventstore.NewEvent{ID: ev.ID, Type: ev.Type, Version: ev.Version, Tags: slices.Clone(ev.Tags), Data: bytes.Clone(ev.Data)}
		if len(ev.Meta) > 0 {
			b, err := json.Marshal(ev.Meta)
			if err != nil {
				return eventstore.AppendResult{}, fmt.Errorf("append to %q: meta: %w", stream, err)
			}
			m := string(b)
			req.metas[i] = &m
		}
		req.bytes += backend.EventSize(ev)
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
	switch req.status {
	case statusWritten, statusDuplicate:
		return eventstore.AppendResult{
			Stream: stream, FirstSeq: req.first, LastSeq: req.last,
			FirstPosition: req.firstPos, LastPosition: req.firstPos + (req.last - req.first),
			Duplicate: req.status == statusDuplicate,
		}, nil
	case statusIDTaken:
		return eventstore.AppendResult{}, fmt.Errorf("append to %q: %w", stream, eventstore.ErrDuplicateEventID)
	case statusConflict:
		return eventstore.AppendResult{}, &eventstore.ConflictError{Stream: stream, Expected: expect, Actual: req.first}
	case statusTombstoned:
		return eventstore.AppendResult{}, fmt.Errorf("append to %q: %w", stream, eventstore.ErrStreamTombstoned)
	default:
		return eventstore.AppendResult{}, fmt.Errorf("pgstore: append to %q: unknown status %d", stream, req.status)
	}
}

const (
	// appenders is how many batches a process has in flight. One commits
	// while the next waits for the head's lock with its reads already
	// sent, so the wait costs no round trip.
	appenders = 2
	// sharedFor is how long after it last heard of another process's
	// append a process counts the log as shared (see appender).
	sharedFor       = time.Second
	maxBatchAppends = 1024
	maxBatchEvents  = 20_000
	maxBatchBytes   = 8 << 20
	// maxRemembered bounds the streams whose versions a process
	// remembers.
	maxRemembered = 1 << 18
)

// appender writes batches of waiting appends until the store closes.
//
// Alone on the log, a process keeps two batches in flight: one commits
// while the next waits for the head's lock with its reads already sent.
// While other processes append too (this process heard of one within
// sharedFor), their batches already queue at the head's lock, and a
// second batch of this process's would only split its waiting appends
// into smaller transactions: as many commits, each with its fixed cost at
// PostgreSQL, for fewer appends each — PostgreSQL's CPU per append grew
// with the number of writing processes. Then the appenders take turns
// (oneBatch), and what arrives while a batch is out joins the next one:
// group commit across the appenders of a process.
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
		turn := s.shared()
		if turn {
			// Holding its first append, this appender waits for the
			// other's batch to commit, then takes what queued meanwhile.
			s.oneBatch.Lock()
		}
		size, events := batch[0].bytes, len(batch[0].events)
	more:
		for len(batch) < maxBatchAppends && size < maxBatchBytes && events < maxBatchEvents {
			select {
			case req := <-s.reqs:
				batch = append(batch, req)
				size += req.bytes
				events += len(req.events)
			default:
				break more
			}
		}
		s.takeOff()
		s.writeBatch(ctx, batch)
		s.inFlight.Add(-1)
		if turn {
			s.oneBatch.Unlock()
		}
	}
}

// takeOff counts a batch leaving, for tests.
func (s *Store) takeOff() {
	s.batches.Add(1)
	n := s.inFlight.Add(1)
	for {
		m := s.maxInFlight.Load()
		if n <= m || s.maxInFlight.CompareAndSwap(m, n) {
			return
		}
	}
}

// heardForeign records that another process appended just now.
func (s *Store) heardForeign() { s.foreignAt.Store(time.Now().UnixNano()) }

// shared reports whether another process appended within sharedFor.
func (s *Store) shared() bool {
	at := s.foreignAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < sharedFor
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

// writeBatch writes appends in one transaction. If every append's stream
// version can be guessed (guess), the transaction is written in one round
// trip that checks the guesses under the streams' locks; if one was wrong
// or an id is stored already, it rolls back and the batch is written
// again having read both (writeTx). If that fails as a whole, each append
// is tried alone, looking up all its ids, so one bad append cannot fail
// the others.
func (s *Store) writeBatch(ctx context.Context, batch []*appendReq) {
	err := errNoGuess
	if versions, ok := s.guess(batch); ok {
		err = s.writeGuessed(ctx, batch, versions)
		if err == nil {
			s.guessed.Add(1)
		} else {
			s.guessesFailed.Add(1)
		}
	}
	if err != nil && ctx.Err() == nil {
		err = s.writeTx(ctx, batch, false)
	}
	if err != nil && ctx.Err() == nil {
		for _, req := range batch {
			req.err = s.writeTx(ctx, []*appendReq{req}, true)
		}
	} else {
		for _, req := range batch {
			req.err = err
		}
	}
	for _, req := range batch {
		if req.err != nil && ctx.Err() != nil {
			req.err = eventstore.ErrClosed // the batch was cut short by Close
		}
		close(req.done)
	}
}

// errNoGuess sends a batch to writeTx: its versions are unknown, or it
// has an append that would not be written as guessed.
var errNoGuess = errors.New("pgstore: versions not guessed")

// guess returns a version for each of the batch's streams: the one this
// process last saw, else the first append's expectation. An append with
// Any to a stream not seen has none to guess.
func (s *Store) guess(batch []*appendReq) (map[string]uint64, bool) {
	versions := make(map[string]uint64, len(batch))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, req := range batch {
		if _, ok := versions[req.stream]; ok {
			continue
		}
		if v, ok := s.versions[req.stream]; ok {
			versions[req.stream] = v
			continue
		}
		switch req.expect {
		case eventstore.Any:
			return nil, false
		case eventstore.NoStream:
			versions[req.stream] = 0
		default:
			versions[req.stream] = uint64(req.expect)
		}
	}
	return versions, true
}

// stored is where an event id already lies. An event written earlier in
// the same batch has no position yet: pos is its offset in the batch.
type stored struct {
	stream   string
	seq, pos uint64
	inBatch  bool
}

// rows are what a batch writes, column by column.
type rows struct {
	total   uint64   // events
	touched []string // streams written, sorted
	tagSet  map[string]struct{}

	evStreams []string // events
	evSeqs    []int64
	evIDs     [][16]byte
	evTypes   []string
	evVers    []int32
	evTags    []string // joined by \x1f
	evMetas   []*string
	evData    [][]byte

	offsets    []int64 // appends: where each begins, counted from the head
	appStreams []string
	firsts     []int64
	counts     []int32
	appTags    []string

	tagNames []string // event_tags
	tagOffs  []int64
}

// build decides each append in order (see decide) against the ids found
// stored and the streams' versions, which it moves, and lays out the rows
// of those written.
func build(batch []*appendReq, found map[[16]byte]stored, versions map[string]uint64) *rows {
	r := &rows{}
	for _, req := range batch {
		if !decide(req, found, versions, r.total) {
			continue
		}
		var appTags []string
		for i := range req.events {
			ev := &req.events[i]
			off := int64(r.total) + int64(i)
			found[ev.ID] = stored{req.stream, req.first + uint64(i), uint64(off) + 1, true}
			data := ev.Data
			if data == nil {
				data = []byte{}
			}
			r.evStreams = append(r.evStreams, req.stream)
			r.evSeqs = append(r.evSeqs, int64(req.first)+int64(i))
			r.evIDs = append(r.evIDs, ev.ID)
			r.evTypes = append(r.evTypes, ev.Type)
			r.evVers = append(r.evVers, int32(ev.Version))
			r.evTags = append(r.evTags, strings.Join(ev.Tags, "\x1f"))
			r.evMetas = append(r.evMetas, req.metas[i])
			r.evData = append(r.evData, data)
			for _, t := range ev.Tags {
				r.tagNames = append(r.tagNames, t)
				r.tagOffs = append(r.tagOffs, off)
				if !slices.Contains(appTags, t) {
					appTags = append(appTags, t)
				}
				if r.tagSet == nil {
					r.tagSet = make(map[string]struct{})
				}
				r.tagSet[t] = struct{}{}
			}
		}
		r.offsets = append(r.offsets, int64(r.total))
		r.appStreams = append(r.appStreams, req.stream)
		r.firsts = append(r.firsts, int64(req.first))
		r.counts = append(r.counts, int32(len(req.events)))
		r.appTags = append(r.appTags, strings.Join(appTags, "\x1f"))
		r.total += uint64(len(req.events))
		r.touched = append(r.touched, req.stream)
	}
	slices.Sort(r.touched)
	r.touched = slices.Compact(r.touched)
	return r
}

// genericPlans makes the rest of an append's transaction run its
// prepared statements on their generic plans. PostgreSQL otherwise plans
// three of them afresh at every execution (the custom plan of
// `stream = ANY($1)` with a one-element array looks cheaper than the
// generic one, so the plan cache never settles): pg_stat_statements
// showed more time planning them than running them. Their generic plans
// are index lookups whatever the tables' size (written so, see lookupIDs
// and queueRecord); the setting ends with the transaction, so reads keep
// PostgreSQL's choice.
const genericPlans = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true)`

// insertEvents writes a batch's events in one statement, for the
// one-round-trip path (writeTx copies them in a round trip of its own).
const insertEvents = `INSERT INTO events (stream, seq, id, type, version, tags, meta, data)
	SELECT u.stream, u.seq, u.id, u.type, u.version, string_to_array(u.tags, E'\x1f'), u.meta, u.data
	FROM unnest($1::text[], $2::bigint[], $3::uuid[], $4::text[], $5::integer[], $6::text[], $7::text[], $8::bytea[])
		AS u(stream, seq, id, type, version, tags, meta, data)`

// writeGuessed writes a batch in one round trip, its streams' versions
// guessed: it begins, locks the streams' rows in stream order and checks
// their versions (expect_versions fails the transaction otherwise),
// inserts the events — a stored id fails it on the unique index — and
// records the appends as writeTx does, committing. It fails, having
// rolled back, if the guesses would not all be written (errNoGuess) or
// the transaction failed.
func (s *Store) writeGuessed(ctx context.Context, batch []*appendReq, versions map[string]uint64) error {
	streams := make([]string, 0, len(versions))
	for st := range versions {
		streams = append(streams, st)
	}
	slices.Sort(streams)
	expected := make([]int64, len(streams))
	for i, st := range streams {
		expected[i] = int64(versions[st])
	}
	r := build(batch, make(map[[16]byte]stored), versions)
	for _, req := range batch {
		if req.status != statusWritten {
			return errNoGuess // a conflict or a duplicate: answered from what is stored
		}
	}
	unknown := s.unknown(streams)

	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	release := releaser(conn)
	defer release()
	var head int64
	b := &pgx.Batch{}
	// Without BEGIN and COMMIT the batch is one implicit transaction,
	// committed at its end: two statements fewer.
	explicit := s.opts.beforeCommit != nil
	if explicit {
		b.Queue(`BEGIN`)
	}
	b.Queue(genericPlans)
	if len(unknown) > 0 {
		b.Queue(`INSERT INTO streams SELECT u, 0 FROM unnest($1::text[]) u ON CONFLICT DO NOTHING`, unknown)
	}
	b.Queue(`WITH locked AS (SELECT stream, version FROM streams WHERE stream = ANY($1) ORDER BY stream FOR UPDATE)
		SELECT expect_versions(count(*) = cardinality($1::text[])
			AND coalesce(bool_and(l.version = ($2::bigint[])[array_position($1::text[], l.stream)]), true))
		FROM locked l`, streams, expected)
	b.Queue(insertEvents, r.evStreams, r.evSeqs, r.evIDs, r.evTypes, r.evVers, r.evTags, r.evMetas, r.evData)
	s.queueRecord(b, r, versions, &head)
	if explicit {
		err = s.commit(ctx, conn, b, batch)
	} else {
		err = conn.SendBatch(ctx, b).Close()
	}
	if err != nil {
		if conn.Conn().PgConn().TxStatus() != 'I' {
			// Rolled back here, the connection goes back to the pool.
			_, _ = conn.Exec(ctx, `ROLLBACK`)
		}
		s.forget(streams)
		return err
	}
	release() // before finish: see releaser
	s.finish(ctx, batch, r, versions, uint64(head))
	return nil
}

// releaser returns a func that gives conn back to the pool once, however
// often it is called. An appender gives its connection back as soon as
// its transaction has committed, before it announces the commit:
// announcing may read the log on a connection of its own, and with both
// appenders holding theirs while they waited for one more, a pool of two
// connections waited for ever (a CI run's goroutine dump: TestCrushControl
// in lab/bench, MaxConns 2, both appenders in publish waiting to acquire).
func releaser(conn *pgxpool.Conn) func() {
	var once sync.Once
	return func() { once.Do(conn.Release) }
}

// unknown returns the streams this process has not seen a row of.
func (s *Store) unknown(streams []string) []string {
	var out []string
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range streams {
		if _, ok := s.versions[st]; !ok {
			out = append(out, st)
		}
	}
	return out
}

// remember records the streams' versions as of a commit. Two appenders
// may record one stream out of order: the higher version is kept.
func (s *Store) remember(versions map[string]uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st, v := range versions {
		if old, ok := s.versions[st]; ok && old >= v {
			continue
		}
		if len(s.versions) >= maxRemembered {
			clear(s.versions)
		}
		s.versions[st] = v
	}
}

// forget drops versions guessed wrong.
func (s *Store) forget(streams []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range streams {
		delete(s.versions, st)
	}
}

// queueRecord queues what follows the events in an append's transaction:
// the streams' new versions, then — from here to the commit the log is
// locked — the head moved past the batch (its new value into head), one
// row per append at the positions after the old head, the tags, and the
// NOTIFY.
func (s *Store) queueRecord(b *pgx.Batch, r *rows, versions map[string]uint64, head *int64) {
	if r.total == 0 {
		return
	}
	moved := make([]int64, len(r.touched))
	for i, st := range r.touched {
		moved[i] = int64(versions[st])
	}
	// Not UPDATE … FROM unnest: its generic plan scans streams.
	b.Queue(`UPDATE streams SET version = ($2::bigint[])[array_position($1::text[], stream)] WHERE stream = ANY($1)`, r.touched, moved)
	// From here to the commit the log is locked.
	b.Queue(`UPDATE head SET position = position + $1 RETURNING position`, int64(r.total)).QueryRow(func(row pgx.Row) error { return row.Scan(head) })
	if s.opts.Clock != nil {
		// A test's clock: commit times come from it.
		b.Queue(`INSERT INTO appends (position, stream, first_seq, count, tags, time)
		SELECT h.position - $6 + u.off + 1, u.stream, u.first, u.n, string_to_array(u.tags, E'\x1f'), $7::timestamptz
		FROM head h, unnest($1::bigint[], $2::text[], $3::bigint[], $4::integer[], $5::text[]) AS u(off, stream, first, n, tags)`,
			r.offsets, r.appStreams, r.firsts, r.counts, r.appTags, int64(r.total), s.opts.Clock())
	} else {
		b.Queue(`INSERT INTO appends (position, stream, first_seq, count, tags, time)
			SELECT h.position - $6 + u.off + 1, u.stream, u.first, u.n, string_to_array(u.tags, E'\x1f'), clock_timestamp()
			FROM head h, unnest($1::bigint[], $2::text[], $3::bigint[], $4::integer[], $5::text[]) AS u(off, stream, first, n, tags)`,
			r.offsets, r.appStreams, r.firsts, r.counts, r.appTags, int64(r.total))
	}
	if len(r.tagNames) > 0 {
		b.Queue(`INSERT INTO event_tags (tag, position) SELECT u.tag, h.position - $3 + u.off + 1
			FROM head h, unnest($1::text[], $2::bigint[]) AS u(tag, off)`, r.tagNames, r.tagOffs, int64(r.total))
	}
	// The payload (see notice) names this process, whose follower leaves
	// the stretch to the announce in finish.
	b.Queue(`SELECT pg_notify($1, position::text || ' ' || $2 || ' ' || (position - $3)::text || $4) FROM head`,
		s.headCh, s.instance, int64(r.total), noticeLists(r.touched, r.tagSet))
}

// commit sends b and the COMMIT after it (the test hook beforeCommit in
// between, if set).
func (s *Store) commit(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch, batch []*appendReq) error {
	if s.opts.beforeCommit == nil {
		b.Queue(`COMMIT`)
	}
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	if s.opts.beforeCommit == nil {
		return nil
	}
	for _, req := range batch {
		if req.status == statusWritten {
			if err := s.opts.beforeCommit(ctx, req.stream); err != nil {
				return err
			}
		}
	}
	_, err := conn.Exec(ctx, `COMMIT`)
	return err
}

// finish, once a batch committed, remembers its streams' versions, gives
// its appends their positions and announces them to this process's
// subscribers.
func (s *Store) finish(ctx context.Context, batch []*appendReq, r *rows, versions map[string]uint64, head uint64) {
	s.remember(versions)
	if r.total == 0 {
		return
	}
	from := head - r.total
	for _, req := range batch {
		if req.inBatch {
			req.firstPos += from
		}
	}
	s.announce(ctx, from, head, r.touched, r.tagSet)
}

var eventCopyColumns = []string{"stream", "seq", "id", "type", "version", "tags", "meta", "data"}

// writeTx runs a batch of appends as one transaction in three round trips.
//
// The first begins it, makes sure each of its streams has a row (version
// 0 if new), locks those rows in stream order — appends to one stream
// from other processes wait here, so a stream's seqs and positions grow
// together — and reads their versions and whichever of the batch's event
// ids are stored already: with allIDs false only each append's first id,
// and all the ids of an append whose first one is stored (a retry, most
// likely); another of its ids stored already fails the batch on the
// unique index, and writeBatch tries each append again with allIDs. Here
// the appends are decided in order: duplicate, id taken, version
// conflict, or written.
//
// Then the written events are copied in, with no lock on the log, in
// parallel with other transactions. The third round trip moves the
// streams' versions; then it takes the head row's lock (waiting for the
// transaction that holds it to commit), records each append at the
// positions after the head, moves the head and commits still holding the
// lock. So transactions commit in the order of their positions: a reader
// that sees an event sees every event before it, and the log never grows
// in the middle. The lock is held for a few narrow rows per batch and the
// commit, not for the events.
func (s *Store) writeTx(ctx context.Context, batch []*appendReq, allIDs bool) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection left inside a transaction (an error below) is closed
	// on release rather than reused.
	release := releaser(conn)
	defer release()

	versions := make(map[string]uint64, len(batch))
	var ids [][16]byte
	for _, req := range batch {
		versions[req.stream] = 0
		if allIDs {
			for i := range req.events {
				ids = append(ids, req.events[i].ID)
			}
		} else {
			ids = append(ids, req.events[0].ID)
		}
	}
	streams := make([]string, 0, len(versions))
	for st := range versions {
		streams = append(streams, st)
	}
	slices.Sort(streams) // every transaction locks its streams in one order: no deadlocks
	unknown := s.unknown(streams)
	found := make(map[[16]byte]stored)
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(genericPlans)
	if len(unknown) > 0 {
		b.Queue(`INSERT INTO streams SELECT u, 0 FROM unnest($1::text[]) u ON CONFLICT DO NOTHING`, unknown)
	}
	b.Queue(`SELECT stream, version FROM streams WHERE stream = ANY($1) ORDER BY stream FOR UPDATE`, streams).Query(func(rs pgx.Rows) error {
		var st string
		var v int64
		_, err := pgx.ForEachRow(rs, []any{&st, &v}, func() error {
			versions[st] = uint64(v)
			return nil
		})
		return err
	})
	b.Queue(lookupIDs, ids).Query(func(rs pgx.Rows) error { return scanStored(rs, found) })
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	if !allIDs && len(found) > 0 {
		var more [][16]byte
		for _, req := range batch {
			if _, ok := found[req.events[0].ID]; ok {
				for i := range req.events[1:] {
					more = append(more, req.events[1+i].ID)
				}
			}
		}
		if len(more) > 0 {
			rs, err := conn.Query(ctx, lookupIDs, more)
			if err != nil {
				return err
			}
			if err := scanStored(rs, found); err != nil {
				return err
			}
		}
	}

	r := build(batch, found, versions)
	if r.total > 0 {
		// Binary COPY: a round trip of its own, and still a fifth faster
		// than INSERT … SELECT FROM unnest for batches of 100.
		if _, err := conn.Conn().CopyFrom(ctx, pgx.Identifier{"events"}, eventCopyColumns, r.copySource()); err != nil {
			return err
		}
	}
	var head int64
	b = &pgx.Batch{}
	s.queueRecord(b, r, versions, &head)
	if err := s.commit(ctx, conn, b, batch); err != nil {
		return err
	}
	release() // before finish: see releaser
	s.finish(ctx, batch, r, versions, uint64(head))
	return nil
}

// copySource gives the events' rows to COPY, in eventCopyColumns.
func (r *rows) copySource() pgx.CopyFromSource {
	return pgx.CopyFromSlice(len(r.evIDs), func(i int) ([]any, error) {
		tags := []string{}
		if r.evTags[i] != "" {
			tags = strings.Split(r.evTags[i], "\x1f")
		}
		return []any{r.evStreams[i], r.evSeqs[i], r.evIDs[i], r.evTypes[i], r.evVers[i], tags, r.evMetas[i], r.evData[i]}, nil
	})
}

// lookupIDs finds where events lie by id. Statements are prepared once
// per connection, and PostgreSQL may keep a generic plan made while the
// tables were small; the LIMITs keep the lookups nested loops over the
// indexes (a scan of events per batch otherwise, as it grows).
const lookupIDs = `SELECT u.id, e.stream, e.seq, a.position + (e.seq - a.first_seq)
	FROM unnest($1::uuid[]) u(id)
	CROSS JOIN LATERAL (SELECT stream, seq FROM events e WHERE e.id = u.id LIMIT 1) e
	CROSS JOIN LATERAL (SELECT position, first_seq FROM appends a
		WHERE a.stream = e.stream AND a.first_seq <= e.seq ORDER BY a.first_seq DESC LIMIT 1) a`

// scanStored reads rows of lookupIDs into found.
func scanStored(rs pgx.Rows, found map[[16]byte]stored) error {
	var id [16]byte
	var st string
	var seq, pos int64
	_, err := pgx.ForEachRow(rs, []any{&id, &st, &seq, &pos}, func() error {
		found[id] = stored{stream: st, seq: uint64(seq), pos: uint64(pos)}
		return nil
	})
	return err
}

// decide decides an append against the ids already stored or written
// earlier in the batch and the versions of the streams, and gives it its
// seqs and, if written (it reports so), its first position counted from
// the head: after+1 (writeTx adds the head once it knows it).
func decide(req *appendReq, found map[[16]byte]stored, versions map[string]uint64, after uint64) bool {
	n := uint64(len(req.events))
	hits := uint64(0)
	var base stored // where the append's first event lies, if a retry
	same := true
	for i := range req.events {
		st, ok := found[req.events[i].ID]
		if !ok {
			continue
		}
		hits++
		at := stored{st.stream, st.seq - uint64(i), st.pos - uint64(i), st.inBatch}
		if hits == 1 {
			base = at
		} else if at != base {
			same = false
		}
	}
	if hits > 0 {
		// A retry of an append already written is answered as the
		// original was; ids of some other append are refused.
		if hits == n && same && base.stream == req.stream {
			req.status, req.first, req.last, req.firstPos, req.inBatch = statusDuplicate, base.seq, base.seq+n-1, base.pos, base.inBatch
		} else {
			req.status = statusIDTaken
		}
		return false
	}
	// One id twice in the append: the unique index would refuse it.
	if n > 1 {
		seen := make(map[[16]byte]struct{}, n)
		for i := range req.events {
			if _, dup := seen[req.events[i].ID]; dup {
				req.status = statusIDTaken
				return false
			}
			seen[req.events[i].ID] = struct{}{}
		}
	}
	v := versions[req.stream]
	if v&tombBit != 0 {
		req.status = statusTombstoned
		return false
	}
	ok := true
	switch req.expect {
	case eventstore.Any:
	case eventstore.NoStream:
		ok = v == 0
	default:
		ok = v == uint64(req.expect)
	}
	if !ok {
		req.status, req.first = statusConflict, v
		return false
	}
	req.status, req.first, req.last, req.firstPos, req.inBatch = statusWritten, v+1, v+n, after+1, true
	versions[req.stream] = v + n
	return true
}
