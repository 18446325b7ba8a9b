package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/priority"
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
	clientIDs bool     // some event ids came from the caller and must be checked
	hashes    []uint64 // the events' ids hashed for the recent-id table (recentIDs.hashOf)
	recs      []byte   // encoded records, back to back
	ends      []int    // recs[ends[i-1]:ends[i]] is event i
	// tags are the events' tags back to back, tags[tagEnds[i-1]:tagEnds[i]]
	// event i's (both nil if no event has any). The request keeps nothing
	// of the caller's events slice: an append whose context ends returns
	// while it may still be queued, and its caller may then reuse the
	// slice, so the sequencer works from these copies and the records.
	tags    []string
	tagEnds []int
	op      *stateOp // a removal instead of an append (delete.go)

	result eventstore.AppendResult
	err    error
	// Exactly one of these tells the writer the outcome, from the syncer:
	// done is closed for Append, which waits on it; cb is called for
	// AppendAsync.
	done chan struct{}
	cb   func(eventstore.AppendResult, error)
}

// count is the number of events the append writes.
func (r *appendReq) count() int { return len(r.ends) }

// id is event i's id, from its record.
func (r *appendReq) id(i int) eventstore.ID { return eventstore.ID(r.rec(i)[offID:fixedBytes]) }

// tagsOf is event i's tags.
func (r *appendReq) tagsOf(i int) []string {
	if r.tagEnds == nil {
		return nil
	}
	start := 0
	if i > 0 {
		start = r.tagEnds[i-1]
	}
	return r.tags[start:r.tagEnds[i]]
}

func (r *appendReq) rec(i int) []byte {
	start := 0
	if i > 0 {
		start = r.ends[i-1]
	}
	return r.recs[start:r.ends[i]]
}

type group struct {
	batch    *pebble.Batch
	reqs     []*appendReq
	firstPos uint64 // 0 if the group wrote nothing
	lastPos  uint64
	streams  []string
	tags     map[string]struct{}
	err      error // the whole group failed
	index    []indexEntry
	arena    []byte // backing store of index keys
	// A removal ends its group (delete.go): the sequencer then holds
	// stateMu (locked), applies the batch with a synchronous commit
	// (synced) and publishes the stream's new truncation point.
	locked  bool
	synced  bool
	publish *pendingChange
}

// indexEntry is a stream or tag index key waiting to be added to the
// group's batch. Event keys go into the batch as they come (positions only
// grow); index keys are sorted first, because Pebble's memtable inserts a
// batch in order and an insert next to the previous one skips the search
// from the top of the skiplist. With many small appends to many streams,
// unsorted index keys made the memtable insert the costliest step.
type indexEntry struct {
	key []byte
	pos uint64 // value of a stream key; 0 for a tag key, whose value is empty
}

// maxSpareArena bounds the arena kept from one group for the next.
const maxSpareArena = 1 << 20

func (g *group) keyArena(n int) []byte {
	if cap(g.arena)-len(g.arena) < n {
		g.arena = make([]byte, 0, max(n, 16<<10))
	}
	return g.arena[len(g.arena):len(g.arena)]
}

func (g *group) addIndex(key []byte, pos uint64) {
	g.arena = g.arena[:len(g.arena)+len(key)]
	g.index = append(g.index, indexEntry{key: key, pos: pos})
}

// flushIndex adds the sorted index keys to the batch.
func (g *group) flushIndex() {
	slices.SortFunc(g.index, func(a, b indexEntry) int { return bytes.Compare(a.key, b.key) })
	var v [8]byte
	for _, e := range g.index {
		if e.key[0] == prefixTag {
			_ = g.batch.Set(e.key, nil, nil)
			continue
		}
		binary.BigEndian.PutUint64(v[:], e.pos)
		_ = g.batch.Set(e.key, v[:], nil)
	}
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
	// A group's index keys and their arena, kept for the next group once
	// the batch holds copies of them: a fresh 16 KiB arena per group was
	// the store's largest allocation under many small appends.
	arena []byte
	index []indexEntry
}

// Append implements eventstore.Store.
func (s *Store) Append(ctx context.Context, stream string, expect eventstore.ExpectedVersion, events []eventstore.NewEvent) (eventstore.AppendResult, error) {
	req, err := s.prepare(ctx, stream, expect, events)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	req.done = make(chan struct{})
	return s.enqueue(ctx, req)
}

// AppendAsync implements eventstore.AsyncAppender: done is called by the
// syncer once the append's group is durable or has failed, as Append's
// waiting goroutine would have been woken, or at once, on the caller's
// goroutine, when the append is refused before it is queued. It never
// blocks: when the queue is full (the sequencer is behind the disk) a
// goroutine of its own waits to queue it, as Append's caller would.
func (s *Store) AppendAsync(stream string, expect eventstore.ExpectedVersion, events []eventstore.NewEvent, done func(eventstore.AppendResult, error)) {
	req, err := s.prepare(context.Background(), stream, expect, events)
	if err != nil {
		done(eventstore.AppendResult{}, err)
		return
	}
	req.cb = done
	switch err := s.send(context.Background(), req, false); {
	case errors.Is(err, errQueueFull):
		go func() {
			if err := s.send(context.Background(), req, true); err != nil {
				done(eventstore.AppendResult{}, err)
			}
		}()
	case err != nil:
		done(eventstore.AppendResult{}, err)
	}
}

// prepare checks an append and encodes its records for the sequencer.
func (s *Store) prepare(ctx context.Context, stream string, expect eventstore.ExpectedVersion, events []eventstore.NewEvent) (*appendReq, error) {
	if err := s.limits.ValidateAppend(stream, expect, events); err != nil {
		return nil, fmt.Errorf("append to %q: %w", stream, err)
	}
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	// A failed store refuses at once: its write path may be parked (a WAL
	// file that could not be created) and would never answer.
	if err := s.failure(); err != nil {
		return nil, err
	}
	// Throughput work (a context from priority.Throughput) lets running
	// foreground work go first.
	priority.YieldFor(ctx)
	req := &appendReq{stream: stream, expect: expect}
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
		req.tags = append(req.tags, ev.Tags...)
		if len(req.tags) > 0 {
			if req.tagEnds == nil {
				req.tagEnds = make([]int, len(events))
			}
			req.tagEnds[i] = len(req.tags)
		}
	}
	req.hashes = make([]uint64, len(events))
	for i := range events {
		req.hashes[i] = s.recent.hashOf(req.id(i))
	}
	return req, nil
}

// errQueueFull is send's answer when it may not wait and the queue is
// full.
var errQueueFull = errors.New("pebblestore: the append queue is full")

// send hands req to the sequencer. The queue is full only when the
// sequencer is stuck behind the disk: then send waits, if wait, until
// there is room, and gives up when ctx ends or at Close, unqueued — the
// append did not happen.
func (s *Store) send(ctx context.Context, req *appendReq, wait bool) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if err := s.failure(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return eventstore.ErrClosed
	}
	select {
	case s.reqs <- req:
	default:
		if !wait {
			s.mu.RUnlock()
			return errQueueFull
		}
		select {
		case s.reqs <- req:
		case <-ctxDone(ctx):
			s.mu.RUnlock()
			return ctx.Err()
		case <-s.closing:
			s.mu.RUnlock()
			return eventstore.ErrClosed
		}
	}
	s.mu.RUnlock()
	if s.opts.queued != nil {
		s.opts.queued(req.stream)
	}
	return nil
}

// enqueue hands req to the sequencer and waits for its outcome.
func (s *Store) enqueue(ctx context.Context, req *appendReq) (eventstore.AppendResult, error) {
	if err := s.send(ctx, req, true); err != nil {
		return eventstore.AppendResult{}, err
	}
	select {
	case <-req.done:
		return req.result, req.err
	case <-ctxDone(ctx):
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
		g := &group{arena: s.seq.arena[:0], index: s.seq.index[:0]}
		s.seq.arena, s.seq.index = nil, nil
		s.admit(g, req)
	drain:
		for req.op == nil && len(g.reqs) < maxGroupReqs && (g.batch == nil || g.batch.Len() < maxGroupBytes) {
			select {
			case r, ok := <-s.reqs:
				if !ok {
					break drain
				}
				s.admit(g, r)
				if r.op != nil {
					break drain
				}
			default:
				break drain
			}
		}
		if g.batch != nil && g.err == nil {
			g.flushIndex()
			if cap(g.arena) <= maxSpareArena {
				s.seq.arena = g.arena[:0]
			}
			if cap(g.index) <= maxSpareArena/16 {
				clear(g.index) // the keys point into the arena
				s.seq.index = g.index[:0]
			}
			g.arena, g.index = nil, nil
			var err error
			if s.opts.NoSync {
				err = s.db.Apply(g.batch, pebble.NoSync)
			} else if g.locked {
				// A removal is durable before a reader can see it.
				err = s.db.Apply(g.batch, pebble.Sync)
				g.synced = true
			} else {
				err = s.db.ApplyNoSyncWait(g.batch, pebble.Sync)
			}
			if err != nil {
				s.fail(err)
				g.err = s.failure()
				// Positions handed out to this group are lost with it;
				// the store refuses writes from now on, so no gap can
				// become visible.
			} else if g.publish != nil {
				s.setPending(g.publish.stream, g.publish.before)
			}
		}
		if g.locked {
			s.stateMu.Unlock()
		}
		s.trimVersions()
		s.groups <- g
	}
}

// admit decides one append and adds its writes to the group's batch.
func (s *Store) admit(g *group, req *appendReq) {
	if req.op != nil {
		s.admitOp(g, req)
		return
	}
	g.reqs = append(g.reqs, req)
	if err := s.failure(); err != nil {
		req.err = err
		return
	}
	cur, err := s.version(req.stream)
	if err != nil {
		req.err = fmt.Errorf("append to %q: reading stream version: %w", req.stream, err)
		return
	}
	if cur&tombBit != 0 {
		req.err = fmt.Errorf("append to %q: %w", req.stream, eventstore.ErrStreamTombstoned)
		return
	}
	if req.clientIDs {
		res, dup, err := s.checkIDs(g, req, cur)
		if err != nil {
			req.err = fmt.Errorf("append to %q: %w", req.stream, err)
			return
		}
		if dup {
			req.result = res
			return
		}
	}
	if !req.expect.Satisfied(cur) {
		req.err = &eventstore.ConflictError{Stream: req.stream, Expected: req.expect, Actual: cur}
		return
	}
	if g.batch == nil {
		g.batch = s.db.NewBatchWithSize(len(req.recs) + req.count()*(48+2*len(req.stream)))
	}
	now := s.now().UnixNano()
	st := &s.seq
	firstPos := st.nextPos
	for i := range req.count() {
		rec := req.rec(i)
		seq, pos := cur+1+uint64(i), firstPos+uint64(i)
		patchSeqTime(rec, seq, now)
		st.key = eventKey(st.key[:0], pos)
		_ = g.batch.Set(st.key, rec, nil)
		g.addIndex(streamKey(g.keyArena(len(req.stream)+10), req.stream, seq), pos)
		for _, tag := range req.tagsOf(i) {
			g.addIndex(tagKey(g.keyArena(len(tag)+10), tag, pos), 0)
			if g.tags == nil {
				g.tags = make(map[string]struct{})
			}
			g.tags[tag] = struct{}{}
		}
		s.recent.addHash(req.hashes[i], pos)
	}
	n := uint64(req.count())
	if g.firstPos == 0 {
		g.firstPos = firstPos
	}
	st.nextPos += n
	s.setVersion(req.stream, cur+n)
	g.lastPos = st.nextPos - 1
	g.streams = append(g.streams, req.stream)
	req.result = eventstore.AppendResult{
		Stream:        req.stream,
		FirstSeq:      cur + 1,
		LastSeq:       cur + n,
		FirstPosition: firstPos,
		LastPosition:  g.lastPos,
	}
}

// checkIDs decides whether an append with caller-given ids is a retry of
// one already stored. Two places can hold the original:
//
//   - the recent-id table, which remembers the last RecentIDs events
//     written, whatever their stream or expected version;
//   - the stream itself, right after the expected version: if an append
//     expecting version E finds the stream past E, its original (if it was
//     stored) is exactly the events E+1, E+2, … — a point read, however old.
//
// An append whose exact expected version is satisfied cannot have been
// stored before (it would have moved the version past E), so beyond the
// recent table it needs no lookup at all. That keeps the common path free
// of random index reads; only Any appends rely on the recent table alone.
func (s *Store) checkIDs(g *group, req *appendReq, cur uint64) (eventstore.AppendResult, bool, error) {
	var locs []idLoc // allocated on the first hit: most appends have none
	found := 0
	for i := range req.count() {
		id := req.id(i)
		var loc idLoc
		var err error
		_, ok := s.recent.findHash(req.hashes[i], func(pos uint64) bool {
			var same bool
			loc, same, err = s.locate(g, pos, id)
			if errors.Is(err, pebble.ErrNotFound) && s.floor.Load() > 0 {
				err = nil
				return false // removed since (delete.go): no longer a retry to recognize
			}
			return same || err != nil
		})
		if err != nil {
			return eventstore.AppendResult{}, false, err
		}
		if !ok {
			continue
		}
		if locs == nil {
			locs = make([]idLoc, req.count())
		}
		locs[i] = loc
		found++
	}
	if found < req.count() && !req.expect.Satisfied(cur) && req.expect != eventstore.Any {
		base := uint64(0)
		if req.expect >= 0 {
			base = uint64(req.expect)
		}
		if cur > base {
			at := make([]idLoc, req.count())
			n, err := s.storedAt(req, base+1, at)
			if err != nil {
				return eventstore.AppendResult{}, false, err
			}
			if found == 0 || n == req.count() {
				locs, found = at, n
			}
		}
	}
	if found == 0 {
		return eventstore.AppendResult{}, false, nil
	}
	for i, loc := range locs {
		id := req.id(i)
		switch {
		case loc.stream == "":
			return eventstore.AppendResult{}, false, fmt.Errorf("%w: event %d id %s is new but other ids of the append were stored", eventstore.ErrDuplicateEventID, i, id)
		case loc.stream != req.stream:
			return eventstore.AppendResult{}, false, fmt.Errorf("%w: event id %s belongs to stream %q", eventstore.ErrDuplicateEventID, id, loc.stream)
		case i > 0 && (loc.seq != locs[i-1].seq+1 || loc.pos != locs[i-1].pos+1):
			return eventstore.AppendResult{}, false, fmt.Errorf("%w: event ids of the append were stored by different appends", eventstore.ErrDuplicateEventID)
		}
	}
	return eventstore.AppendResult{
		Stream:        req.stream,
		FirstSeq:      locs[0].seq,
		LastSeq:       locs[len(locs)-1].seq,
		FirstPosition: locs[0].pos,
		LastPosition:  locs[len(locs)-1].pos,
		Duplicate:     true,
	}, true, nil
}

// locate finds the stream and seq of the event at pos, and whether its id
// is id (the recent-id table keeps only part of the ids' hashes): in the
// group being built, whose batch is not applied yet, or else in Pebble,
// whose reads from the sequencer see batches applied but not yet synced.
func (s *Store) locate(g *group, pos uint64, id eventstore.ID) (idLoc, bool, error) {
	if g.firstPos != 0 && pos >= g.firstPos {
		for _, r := range g.reqs {
			res := r.result
			if r.err == nil && !res.Duplicate && res.FirstPosition <= pos && pos <= res.LastPosition {
				i := pos - res.FirstPosition
				return idLoc{stream: r.stream, seq: res.FirstSeq + i, pos: pos}, r.id(int(i)) == id, nil
			}
		}
	}
	rec, closer, err := s.db.Get(eventKey(nil, pos))
	if err != nil {
		return idLoc{}, false, fmt.Errorf("event %d of the recent-id table: %w", pos, err)
	}
	defer closer.Close()
	var in interner
	ev, err := decodeEvent(pos, rec, &in)
	if err != nil {
		return idLoc{}, false, err
	}
	return idLoc{stream: ev.Stream, seq: ev.Seq, pos: pos}, ev.ID == id, nil
}

// storedAt compares the append's ids with the stream's events from seq
// on, filling locs for those that match; it reads Pebble directly, so it
// also sees appends applied but not yet synced.
func (s *Store) storedAt(req *appendReq, seq uint64, locs []idLoc) (int, error) {
	prefix := streamPrefix(nil, req.stream)
	iter, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: streamKey(nil, req.stream, seq),
		UpperBound: prefixEnd(prefix),
	})
	if err != nil {
		return 0, err
	}
	var positions []uint64
	for ok := iter.First(); ok && len(positions) < req.count(); ok = iter.Next() {
		positions = append(positions, be64(iter.Value()))
	}
	if err := iter.Close(); err != nil {
		return 0, err
	}
	evs, err := s.loadEvents(req.stream, positions)
	if err != nil {
		return 0, err
	}
	found := 0
	for i := range evs {
		if evs[i].ID == req.id(i) {
			locs[i] = idLoc{stream: req.stream, seq: evs[i].Seq, pos: evs[i].Position}
			found++
		}
	}
	return found, nil
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
	// A stream whose events were removed keeps its version in its state.
	st, err := s.loadState(stream)
	if err != nil {
		return 0, err
	}
	v = max(v, st.version)
	if st.mode == eventstore.DeleteHard {
		v = st.version | tombBit
	}
	s.setVersion(stream, v)
	return v, nil
}

func (s *Store) setVersion(stream string, v uint64) {
	s.seq.versions[stream] = v
}

// trimVersions bounds the version cache. It runs between groups, after the
// group's batch is applied: a version dropped in the middle of a group would
// be read back from the stream index, which does not hold the group's
// writes yet, and the stream's next append would reuse sequence numbers.
func (s *Store) trimVersions() {
	m := s.seq.versions
	if len(m) <= s.opts.VersionCacheSize {
		return
	}
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

// syncLoop is the syncer goroutine.
func (s *Store) syncLoop() {
	defer close(s.done)
	for g := range s.groups {
		if g.batch != nil {
			if g.err == nil && !s.opts.NoSync && !g.synced {
				if err := g.batch.SyncWait(); err != nil {
					s.fail(err)
					g.err = s.failure()
				}
			}
			if g.err == nil {
				// An earlier group's fsync failed: positions before
				// this group's may not be on disk, so the head must not
				// move past them, even if this group's own sync passed.
				g.err = s.failure()
			}
			if g.err != nil {
				for _, r := range g.reqs {
					if r.err == nil {
						r.err = g.err
					}
				}
			} else if g.lastPos > 0 {
				s.durable.Store(g.lastPos)
				s.notify.Publish(g.streams, g.tags)
			}
			_ = g.batch.Close()
		} else if err := s.failure(); err != nil {
			// Nothing of its own to sync, but a duplicate answer may rest
			// on an earlier group's writes whose fsync has just failed.
			for _, r := range g.reqs {
				if r.err == nil {
					r.err = err
				}
			}
		}
		for _, r := range g.reqs {
			if r.cb != nil {
				r.cb(r.result, r.err)
			} else {
				close(r.done)
			}
		}
	}
}
