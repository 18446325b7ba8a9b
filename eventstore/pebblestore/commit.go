package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/logbook/logbook/eventstore"
)

// The write path.
//
//	Append (caller's goroutine): validate, fill in ids, encode records
//	  -> reqs -> sequencer: expected version, seq and position, one Pebble
//	     batch for many appends, ApplyNoSyncWait
//	  -> groups -> syncer: wait for the WAL fsync, raise the durable head,
//	     wake subscribers, answer the writers.
//
// Invariants, kept here:
//   - positions are assigned by the sequencer alone, consecutively, in the
//     order batches are applied, so the log has no gaps and commit order is
//     position order;
//   - the events of one append go into one batch, so a crash keeps all of
//     them or none (Pebble applies a WAL batch atomically on recovery);
//   - the durable head only moves to the end of a group after that group's
//     fsync, and groups are synced in order (the syncer takes them FIFO
//     and Pebble syncs its WAL in order), so every position at or below the
//     head is durable.
//
// While the syncer waits for one group's fsync, the sequencer is already
// building the next: that overlap, plus many appends per fsync, is where
// the throughput comes from.

const (
	maxGroupReqs  = 4096
	maxGroupBytes = 32 << 20
)

type appendReq struct {
	stream    string
	expect    eventstore.ExpectedVersion
	events    []eventstore.NewEvent
	clientIDs bool   // some event ids came from the caller and must be checked
	recs      []byte // encoded records, back to back
	ends      []int  // recs[ends[i-1]:ends[i]] is event i

	result eventstore.AppendResult
	err    error
	done   chan struct{}
}

func (r *appendReq) rec(i int) []byte {
	start := 0
	if i > 0 {
		start = r.ends[i-1]
	}
	return r.recs[start:r.ends[i]]
}

type group struct {
	batch   *pebble.Batch
	reqs    []*appendReq
	lastPos uint64 // 0 if the group wrote nothing
	streams []string
	tags    map[string]struct{}
	ids     map[eventstore.ID]idLoc // client ids written by this group
	err     error                   // the whole group failed
}

type idLoc struct {
	stream   string
	seq, pos uint64
}

// sequencerState is touched only by the sequencer goroutine.
type sequencerState struct {
	nextPos  uint64
	versions map[string]uint64 // cache of stream versions, including applied but not yet synced appends
	key      []byte            // scratch
}

// Append implements eventstore.Store.
func (s *Store) Append(ctx context.Context, stream string, expect eventstore.ExpectedVersion, events []eventstore.NewEvent) (eventstore.AppendResult, error) {
	if err := s.limits.ValidateAppend(stream, expect, events); err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("append to %q: %w", stream, err)
	}
	if err := checkCtx(ctx); err != nil {
		return eventstore.AppendResult{}, err
	}
	req := &appendReq{stream: stream, expect: expect, events: events, done: make(chan struct{})}
	size := 0
	for i := range events {
		size += encodedSize(stream, &events[i])
	}
	req.recs = make([]byte, 0, size)
	req.ends = make([]int, len(events))
	for i := range events {
		ev := events[i]
		if ev.ID.IsZero() {
			ev.ID = eventstore.NewID()
			events[i].ID = ev.ID // the caller learns the id, and a retry of the same slice is idempotent
		} else {
			req.clientIDs = true
		}
		req.recs = encodeEvent(req.recs, stream, &ev)
		req.ends[i] = len(req.recs)
	}

	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return eventstore.AppendResult{}, eventstore.ErrClosed
	}
	s.reqs <- req
	s.mu.RUnlock()

	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	select {
	case <-req.done:
		return req.result, req.err
	case <-done:
		// The append may still commit; like any database, a cancelled
		// write has an unknown outcome. Retrying with the same event ids
		// is safe.
		return eventstore.AppendResult{}, ctx.Err()
	}
}

// sequence is the sequencer goroutine.
func (s *Store) sequence() {
	defer close(s.groups)
	for req := range s.reqs {
		g := &group{}
		s.admit(g, req)
	drain:
		for len(g.reqs) < maxGroupReqs && (g.batch == nil || g.batch.Len() < maxGroupBytes) {
			select {
			case r, ok := <-s.reqs:
				if !ok {
					break drain
				}
				s.admit(g, r)
			default:
				break drain
			}
		}
		if g.batch != nil && g.err == nil {
			var err error
			if s.opts.NoSync {
				err = s.db.Apply(g.batch, pebble.NoSync)
			} else {
				err = s.db.ApplyNoSyncWait(g.batch, pebble.Sync)
			}
			if err != nil {
				s.fail(err)
				g.err = s.failure()
				// Positions handed out to this group are lost with it;
				// the store refuses writes from now on, so no gap can
				// become visible.
			}
		}
		s.groups <- g
	}
}

// admit decides one append and adds its writes to the group's batch.
func (s *Store) admit(g *group, req *appendReq) {
	g.reqs = append(g.reqs, req)
	if err := s.failure(); err != nil {
		req.err = err
		return
	}
	if req.clientIDs {
		res, dup, err := s.checkIDs(g, req)
		if err != nil {
			req.err = fmt.Errorf("append to %q: %w", req.stream, err)
			return
		}
		if dup {
			req.result = res
			return
		}
	}
	cur, err := s.version(req.stream)
	if err != nil {
		req.err = fmt.Errorf("append to %q: reading stream version: %w", req.stream, err)
		return
	}
	if !req.expect.Satisfied(cur) {
		req.err = &eventstore.ConflictError{Stream: req.stream, Expected: req.expect, Actual: cur}
		return
	}
	if g.batch == nil {
		g.batch = s.db.NewBatchWithSize(len(req.recs) + len(req.events)*(48+2*len(req.stream)))
	}
	now := time.Now().UnixNano()
	st := &s.seq
	seq := cur
	firstPos := st.nextPos
	var posBuf [8]byte
	for i := range req.events {
		ev := &req.events[i]
		seq++
		pos := st.nextPos
		st.nextPos++
		rec := req.rec(i)
		patchSeqTime(rec, seq, now)
		binary.BigEndian.PutUint64(posBuf[:], pos)
		st.key = eventKey(st.key[:0], pos)
		_ = g.batch.Set(st.key, rec, nil)
		st.key = streamKey(st.key[:0], req.stream, seq)
		_ = g.batch.Set(st.key, posBuf[:], nil)
		st.key = idKey(st.key[:0], ev.ID)
		_ = g.batch.Set(st.key, posBuf[:], nil)
		for _, tag := range ev.Tags {
			st.key = tagKey(st.key[:0], tag, pos)
			_ = g.batch.Set(st.key, nil, nil)
			if g.tags == nil {
				g.tags = make(map[string]struct{})
			}
			g.tags[tag] = struct{}{}
		}
		if req.clientIDs {
			if g.ids == nil {
				g.ids = make(map[eventstore.ID]idLoc)
			}
			g.ids[ev.ID] = idLoc{stream: req.stream, seq: seq, pos: pos}
		}
	}
	s.setVersion(req.stream, seq)
	g.lastPos = st.nextPos - 1
	g.streams = append(g.streams, req.stream)
	req.result = eventstore.AppendResult{
		Stream:        req.stream,
		FirstSeq:      cur + 1,
		LastSeq:       seq,
		FirstPosition: firstPos,
		LastPosition:  g.lastPos,
	}
}

// checkIDs looks up the caller-given event ids. None stored: a new append.
// All stored, by one earlier append to the same stream, in the same order:
// a retry, answered with the original result. Anything else is refused.
func (s *Store) checkIDs(g *group, req *appendReq) (eventstore.AppendResult, bool, error) {
	found := 0
	var first, prev idLoc
	for i := range req.events {
		id := req.events[i].ID
		loc, ok, err := s.lookupID(g, id)
		if err != nil {
			return eventstore.AppendResult{}, false, err
		}
		if !ok {
			if found > 0 {
				return eventstore.AppendResult{}, false, fmt.Errorf("%w: event %d id %s is new but earlier ids of the append were stored", eventstore.ErrDuplicateEventID, i, id)
			}
			continue
		}
		if found != i {
			return eventstore.AppendResult{}, false, fmt.Errorf("%w: event %d id %s was stored (stream %q seq %d) but earlier ids of the append were not", eventstore.ErrDuplicateEventID, i, id, loc.stream, loc.seq)
		}
		if loc.stream != req.stream {
			return eventstore.AppendResult{}, false, fmt.Errorf("%w: event id %s belongs to stream %q", eventstore.ErrDuplicateEventID, id, loc.stream)
		}
		if found > 0 && (loc.seq != prev.seq+1 || loc.pos != prev.pos+1) {
			return eventstore.AppendResult{}, false, fmt.Errorf("%w: event ids of the append were stored by different appends", eventstore.ErrDuplicateEventID)
		}
		if found == 0 {
			first = loc
		}
		prev = loc
		found++
	}
	if found == 0 {
		return eventstore.AppendResult{}, false, nil
	}
	return eventstore.AppendResult{
		Stream:        req.stream,
		FirstSeq:      first.seq,
		LastSeq:       prev.seq,
		FirstPosition: first.pos,
		LastPosition:  prev.pos,
		Duplicate:     true,
	}, true, nil
}

func (s *Store) lookupID(g *group, id eventstore.ID) (idLoc, bool, error) {
	if loc, ok := g.ids[id]; ok {
		return loc, true, nil
	}
	st := &s.seq
	st.key = idKey(st.key[:0], id)
	v, closer, err := s.db.Get(st.key)
	if errors.Is(err, pebble.ErrNotFound) {
		return idLoc{}, false, nil
	}
	if err != nil {
		return idLoc{}, false, err
	}
	pos := be64(v)
	_ = closer.Close()
	st.key = eventKey(st.key[:0], pos)
	rec, closer, err := s.db.Get(st.key)
	if err != nil {
		return idLoc{}, false, fmt.Errorf("event %d named by id %s: %w", pos, id, err)
	}
	defer closer.Close()
	var in interner
	ev, err := decodeEvent(pos, rec, &in)
	if err != nil {
		return idLoc{}, false, err
	}
	return idLoc{stream: ev.Stream, seq: ev.Seq, pos: pos}, true, nil
}

// version returns the stream's version as the sequencer sees it: including
// appends applied but not yet synced.
func (s *Store) version(stream string) (uint64, error) {
	if v, ok := s.seq.versions[stream]; ok {
		return v, nil
	}
	v, err := s.lastSeq(stream, ^uint64(0))
	if err != nil {
		return 0, err
	}
	s.setVersion(stream, v)
	return v, nil
}

func (s *Store) setVersion(stream string, v uint64) {
	m := s.seq.versions
	if _, ok := m[stream]; !ok && len(m) >= s.opts.VersionCacheSize {
		// Drop about half, in Go's random map order: cheap, and a dropped
		// version is just read back from the stream index.
		n := len(m) / 2
		for k := range m {
			delete(m, k)
			n--
			if n == 0 {
				break
			}
		}
	}
	m[stream] = v
}

// syncLoop is the syncer goroutine.
func (s *Store) syncLoop() {
	defer close(s.done)
	for g := range s.groups {
		if g.batch != nil {
			if g.err == nil && !s.opts.NoSync {
				if err := g.batch.SyncWait(); err != nil {
					s.fail(err)
					g.err = s.failure()
				}
			}
			if g.err != nil {
				for _, r := range g.reqs {
					if r.err == nil {
						r.err = g.err
					}
				}
			} else if g.lastPos > 0 {
				s.durable.Store(g.lastPos)
				s.notify.publish(g.streams, g.tags)
			}
			_ = g.batch.Close()
		}
		for _, r := range g.reqs {
			close(r.done)
		}
	}
}
