package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/engine/eventstore"
)

// An append's outcome.
const (
	statusWritten = iota
	statusDuplicate
	statusIDTaken
	statusConflict
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
	req := &appendReq{
		stream: stream, expect: expect, events: events, done: make(chan struct{}),
		metas: make([]*string, n),
	}
	for i := range events {
		ev := &events[i]
		if ev.ID.IsZero() {
			ev.ID = eventstore.NewID() // the caller learns the id, so a retry of the same slice is idempotent
		}
		if len(ev.Meta) > 0 {
			b, err := json.Marshal(ev.Meta)
			if err != nil {
				return eventstore.AppendResult{}, fmt.Errorf("append to %q: meta: %w", stream, err)
			}
			m := string(b)
			req.metas[i] = &m
		}
		req.bytes += eventstore.EventSize(ev)
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
	default:
		return eventstore.AppendResult{}, fmt.Errorf("pgstore: append to %q: unknown status %d", stream, req.status)
	}
}

const (
	// appenders is how many batches a process has in flight. One commits
	// while the next waits for the head's lock with its reads already
	// sent, so the wait costs no round trip.
	appenders       = 2
	maxBatchAppends = 1024
	maxBatchEvents  = 20_000
	maxBatchBytes   = 8 << 20
	// maxExisting bounds the streams a process remembers having rows.
	maxExisting = 1 << 18
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

// writeBatch writes appends in one transaction. If the transaction fails
// as a whole, each append is tried alone, looking up all its ids, so one
// bad append cannot fail the others.
func (s *Store) writeBatch(ctx context.Context, batch []*appendReq) {
	err := s.writeTx(ctx, batch, false)
	if err != nil {
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

// stored is where an event id already lies. An event written earlier in
// the same batch has no position yet: pos is its offset in the batch.
type stored struct {
	stream   string
	seq, pos uint64
	inBatch  bool
}

var eventCopyColumns = []string{"stream", "seq", "id", "type", "version", "tags", "meta", "data"}

// rows are what a batch writes: events for COPY, the rest for unnest.
type rows struct {
	events [][]any // eventCopyColumns

	offsets    []int64 // appends: where each begins, counted from the head
	appStreams []string
	firsts     []int64
	counts     []int32
	appTags    []string

	tagNames []string // event_tags
	tagOffs  []int64
}

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
// parallel with other transactions. The second round trip moves the
// streams' versions; then it
// takes the head row's lock (waiting for the transaction that holds it to
// commit), records each append at the positions after the head, moves the
// head and commits still holding the lock. So transactions commit in the
// order of their positions: a reader that sees an event sees every event
// before it, and the log never grows in the middle. The lock is held for
// a few narrow rows per batch and the commit, not for the events.
func (s *Store) writeTx(ctx context.Context, batch []*appendReq, allIDs bool) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection left inside a transaction (an error below) is closed
	// on release rather than reused.
	defer conn.Release()

	streamSet := make(map[string]uint64, len(batch))
	var ids [][16]byte
	for _, req := range batch {
		streamSet[req.stream] = 0
		if allIDs {
			for i := range req.events {
				ids = append(ids, req.events[i].ID)
			}
		} else {
			ids = append(ids, req.events[0].ID)
		}
	}
	streams := make([]string, 0, len(streamSet))
	for st := range streamSet {
		streams = append(streams, st)
	}
	slices.Sort(streams) // every transaction locks its streams in one order: no deadlocks
	var unknown []string // streams that may not have a row yet
	s.mu.Lock()
	for _, st := range streams {
		if _, ok := s.existing[st]; !ok {
			unknown = append(unknown, st)
		}
	}
	s.mu.Unlock()
	found := make(map[[16]byte]stored)
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	if len(unknown) > 0 {
		b.Queue(`INSERT INTO streams SELECT u, 0 FROM unnest($1::text[]) u ON CONFLICT DO NOTHING`, unknown)
	}
	b.Queue(`SELECT stream, version FROM streams WHERE stream = ANY($1) ORDER BY stream FOR UPDATE`, streams).Query(func(rs pgx.Rows) error {
		var st string
		var v int64
		_, err := pgx.ForEachRow(rs, []any{&st, &v}, func() error {
			streamSet[st] = uint64(v)
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

	var total uint64
	var r rows
	var tagSet map[string]struct{}
	var touched []string
	for _, req := range batch {
		if !decide(req, found, streamSet, total) {
			continue
		}
		var appTags []string
		for i := range req.events {
			ev := &req.events[i]
			off := int64(total) + int64(i)
			found[ev.ID] = stored{req.stream, req.first + uint64(i), uint64(off) + 1, true}
			data := ev.Data
			if data == nil {
				data = []byte{}
			}
			tags := ev.Tags
			if tags == nil {
				tags = []string{}
			}
			r.events = append(r.events, []any{req.stream, int64(req.first) + int64(i), ev.ID, ev.Type, int32(ev.Version), tags, req.metas[i], data})
			for _, t := range ev.Tags {
				r.tagNames = append(r.tagNames, t)
				r.tagOffs = append(r.tagOffs, off)
				if !slices.Contains(appTags, t) {
					appTags = append(appTags, t)
				}
				if tagSet == nil {
					tagSet = make(map[string]struct{})
				}
				tagSet[t] = struct{}{}
			}
		}
		r.offsets = append(r.offsets, int64(total))
		r.appStreams = append(r.appStreams, req.stream)
		r.firsts = append(r.firsts, int64(req.first))
		r.counts = append(r.counts, int32(len(req.events)))
		r.appTags = append(r.appTags, strings.Join(appTags, "\x1f"))
		total += uint64(len(req.events))
		touched = append(touched, req.stream)
	}

	var head int64
	b = &pgx.Batch{}
	if total > 0 {
		// Binary COPY: a round trip of its own, and still a fifth faster
		// than INSERT … SELECT FROM unnest for batches of 100.
		if _, err := conn.Conn().CopyFrom(ctx, pgx.Identifier{"events"}, eventCopyColumns, pgx.CopyFromRows(r.events)); err != nil {
			return err
		}
		touched = slices.Compact(touched) // a stream's appends are adjacent: the batch's order is theirs
		slices.Sort(touched)
		touched = slices.Compact(touched)
		versions := make([]int64, len(touched))
		for i, st := range touched {
			versions[i] = int64(streamSet[st])
		}
		// Not UPDATE … FROM unnest: its generic plan scans streams.
		b.Queue(`UPDATE streams SET version = ($2::bigint[])[array_position($1::text[], stream)] WHERE stream = ANY($1)`, touched, versions)
		// From here to the commit the log is locked.
		b.Queue(`UPDATE head SET position = position + $1 RETURNING position`, int64(total)).QueryRow(func(r pgx.Row) error { return r.Scan(&head) })
		b.Queue(`INSERT INTO appends (position, stream, first_seq, count, tags, time)
			SELECT h.position - $6 + u.off + 1, u.stream, u.first, u.n, string_to_array(u.tags, E'\x1f'), clock_timestamp()
			FROM head h, unnest($1::bigint[], $2::text[], $3::bigint[], $4::integer[], $5::text[]) AS u(off, stream, first, n, tags)`,
			r.offsets, r.appStreams, r.firsts, r.counts, r.appTags, int64(total))
		if len(r.tagNames) > 0 {
			b.Queue(`INSERT INTO event_tags (tag, position) SELECT u.tag, h.position - $3 + u.off + 1
				FROM head h, unnest($1::text[], $2::bigint[]) AS u(tag, off)`, r.tagNames, r.tagOffs, int64(total))
		}
		// The payload names this process, whose follower leaves the
		// stretch to the announce below.
		b.Queue(`SELECT pg_notify($1, position::text || ' ' || $2) FROM head`, s.headCh, s.instance)
	}
	if s.opts.beforeCommit == nil {
		b.Queue(`COMMIT`)
	}
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	if s.opts.beforeCommit != nil {
		for _, req := range batch {
			if req.status == statusWritten {
				if err := s.opts.beforeCommit(ctx, req.stream); err != nil {
					return err
				}
			}
		}
		if _, err := conn.Exec(ctx, `COMMIT`); err != nil {
			return err
		}
	}
	if len(unknown) > 0 && total > 0 {
		s.mu.Lock()
		for _, st := range touched {
			if len(s.existing) >= maxExisting {
				clear(s.existing)
			}
			s.existing[st] = struct{}{}
		}
		s.mu.Unlock()
	}
	if total > 0 {
		from := uint64(head) - total
		for _, req := range batch {
			if req.inBatch {
				req.firstPos += from
			}
		}
		s.announce(ctx, from, uint64(head), touched, tagSet)
	}
	return nil
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
