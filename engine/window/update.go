package window

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/logbook/logbook/engine/eventstore"
)

// Applying a batch of events: the buckets and sessions they open and
// touch, late events, the key numbering, and the buckets that close.

// isClosed tells whether a window ending at end is past its grace.
func (a *Aggregation) isClosed(end int64) bool {
	return a.def.closedAt(end, a.st)
}

// update is the PebbleView's update function.
func (a *Aggregation) update(b *pebble.Batch, events []eventstore.Event) error {
	r := &a.rec
	stBefore, asideBefore := a.st, a.aside
	a.now = a.opts.Now() // once a batch: the clock for setAside
	a.pending, a.vals, a.dists, a.kept = a.pending[:0], a.vals[:0], a.dists[:0], 0
	for i := range events {
		if i%yieldEvery == yieldEvery-1 {
			a.yield.Yield()
		}
		r.Time = time.Time{}
		clear(r.Dims)
		clear(r.Values)
		clear(r.Distinct)
		if !a.def.Extract(&events[i], r) {
			continue
		}
		if r.Time.IsZero() {
			return fmt.Errorf("window %s: event %d (%s): Extract set no time", a.def.Name, events[i].Position, events[i].Type)
		}
		if len(r.Dims) != len(a.def.Dims) || len(r.Values) != len(a.def.Values) || len(r.Distinct) != len(a.def.Distinct) {
			return fmt.Errorf("window %s: Extract resized the record", a.def.Name)
		}
		if a.setAside(&events[i], r.Time) {
			continue
		}
		t := r.Time.UnixNano()
		if t > a.st {
			a.st = t
		}
		key := a.in.key(r.Dims)
		var err error
		switch a.def.Window.Kind {
		case KindTumbling:
			size := a.sizes[0]
			start := floorDiv(t, size)
			late := a.isClosed(start + size)
			if late {
				a.late++
			}
			vi := a.keep(r)
			for level, size := range a.sizes {
				s := floorDiv(t, size)
				if err = a.touch(b, key, uint8(level), s, s+size, late, vi); err != nil {
					break
				}
			}
		case KindHopping:
			size, adv := a.sizes[0], int64(a.def.Window.Advance)
			anyLate := false
			vi := a.keep(r)
			for s := floorDiv(t, adv); s > t-size; s -= adv {
				late := a.isClosed(s + size)
				anyLate = anyLate || late
				if err = a.touch(b, key, 0, s, s+size, late, vi); err != nil {
					break
				}
			}
			if anyLate {
				a.late++
			}
		case KindSession:
			err = a.session(b, key, t, r)
		}
		if err != nil {
			return err
		}
	}
	a.applyPending()
	// Buckets past their grace leave memory; their last state is in this
	// batch or an earlier one. One with deltas is compacted to its base
	// in this batch, so that the closed past reads as one value per
	// bucket.
	topClosed := false
	for len(a.closing) > 0 && a.isClosed(a.closing[0].end) {
		c := heap.Pop(&a.closing).(closing)
		bk := a.open[c.key]
		if bk == nil || bk.maxEnd != c.end {
			continue // a session bucket whose windows grew since
		}
		delete(a.open, c.key)
		if a.last[bk.level] == bk {
			a.last[bk.level] = nil
		}
		if a.def.Window.Kind == KindSession {
			for dims, s := range bk.entries {
				a.dropSession(dims, s)
				a.closedSession(dims, bk.start, s.end)
			}
		} else {
			a.retired = append(a.retired, bk)
		}
		if bk.seq > 0 {
			bk.compact = true
			a.markDirty(bk)
		}
		if int(bk.level) == len(a.sizes)-1 {
			topClosed = true
		}
	}
	for _, bk := range a.dirty {
		a.yield.Yield()
		bk.dirty = false
		if err := a.writeBucket(b, bk); err != nil {
			return err
		}
	}
	clear(a.dirty) // no pointer to a closed bucket outlives the batch
	a.dirty = a.dirty[:0]
	for _, bk := range a.retired {
		clear(bk.byID)
		bk.changed = nil
		if len(a.freeIDs) < 8 {
			a.freeIDs = append(a.freeIDs, bk.byID[:0])
		}
		bk.byID = nil
	}
	clear(a.retired)
	a.retired = a.retired[:0]
	if topClosed {
		a.renumber()
	}
	if a.st != stBefore {
		if err := b.Set(streamTimeKey, appendTime(nil, a.st), nil); err != nil {
			return err
		}
	}
	if a.aside != asideBefore {
		if err := b.Set(asideKey, binary.BigEndian.AppendUint64(nil, a.aside), nil); err != nil {
			return err
		}
	}
	return nil
}

// MinTime and MaxTime bound the event times an aggregation takes: the
// times whose Unix nanoseconds fit in an int64 (about 1678 to 2262).
var (
	MinTime = time.Unix(0, math.MinInt64+1).UTC()
	MaxTime = time.Unix(0, math.MaxInt64).UTC()
)

// setAside tells whether the event ev, of time t, is set aside rather
// than applied: t is more than MaxSkew ahead of the clock (the event's
// commit time, never later than Now), or outside [MinTime, MaxTime].
// Such an event is counted and logged (the first of a batch), not
// applied: one event must not move stream time into the future, and
// failing the batch would stop the aggregation at it for good.
func (a *Aggregation) setAside(ev *eventstore.Event, t time.Time) bool {
	clock := a.now
	if !ev.Time.IsZero() && ev.Time.Before(clock) {
		clock = ev.Time
	}
	var why string
	switch {
	case t.Before(MinTime) || t.After(MaxTime):
		why = "outside the years 1678 to 2262 that event times can hold"
	case t.After(clock.Add(a.opts.MaxSkew)):
		why = fmt.Sprintf("more than %s ahead of the clock (%s)", a.opts.MaxSkew, clock.UTC().Format(time.RFC3339Nano))
	default:
		return false
	}
	a.aside++
	a.asideB++
	if a.asideB > 1 {
		return true // one line a batch: a flood of such events is counted, not logged each
	}
	a.opts.Logger.Warn("window: event set aside", "aggregation", a.def.Name, "position", ev.Position,
		"type", ev.Type, "time", t.UTC().Format(time.RFC3339Nano), "reason", why)
	return true
}

// renumberMin is the number of keys the interner holds beyond twice
// the keys of the open buckets before it is renumbered (a variable for
// tests).
var renumberMin = 1 << 16

// renumber numbers the keys of the open buckets afresh when the
// interner holds many more keys than they do, so that it does not grow
// with every key ever seen. It runs when a bucket of the top level
// closes (when many keys may have left memory), after the batch's
// buckets are written.
func (a *Aggregation) renumber() {
	if a.in.len() <= renumberMin {
		return
	}
	remap := make([]int32, a.in.len())
	for i := range remap {
		remap[i] = -1
	}
	open := 0
	for _, bk := range a.open {
		bk.each(func(s *state) {
			if remap[s.key] < 0 {
				remap[s.key] = 0
				open++
			}
		})
	}
	if a.in.len() <= 2*open+renumberMin {
		return
	}
	in := newInterner(len(a.def.Dims))
	for i := range remap {
		remap[i] = -1
	}
	for _, bk := range a.open {
		var err error
		bk.each(func(s *state) {
			if err == nil && remap[s.key] < 0 {
				remap[s.key], err = in.encoded([]byte(s.dims), &a.parts, &a.names)
			}
		})
		if err != nil {
			return // cannot happen: the keys were encoded here; keep the old numbers
		}
	}
	var moved []*state
	for _, bk := range a.open {
		moved = moved[:0]
		bk.each(func(s *state) { moved = append(moved, s) })
		clear(bk.byID)
		for _, s := range moved {
			s.key = remap[s.key]
			s.dims = in.keys[s.key]
			if bk.entries == nil {
				bk.n--
				bk.put(s)
			}
		}
	}
	a.in = in
	a.renumbered++
}

// newState returns an empty state for a new window of level. Most
// events create a window, so states and their stats come from chunks:
// one allocation per few hundred windows instead of three per window,
// which cut the collector's share of the ingest. Each level has its own
// chunks, so that the states of a chunk close at about the same time and
// the chunk is freed with them: a day's state must not keep alive the
// minutes' states made beside it. States of closed windows are left to
// the collector rather than reused: a new window's state then lies next
// to the one made before it, in memory the allocator has just cleared,
// where a reused one was a cache miss to clear and another to fill
// (docs/benchmarks.md, "Windows: two passes a batch").
func (a *Aggregation) newState(level uint8, end int64) *state {
	c := &a.chunks[level]
	if len(c.states) == 0 {
		c.states = make([]state, 256)
	}
	s := &c.states[0]
	c.states = c.states[1:]
	n := 3 * len(a.def.Values)
	if n <= len(s.inl) {
		s.end, s.stats = end, s.inl[:n:n]
	} else {
		if len(c.floats) < n {
			c.floats = make([]float64, max(n, 4096))
		}
		s.end, s.stats, c.floats = end, c.floats[:n:n], c.floats[n:]
	}
	for i := 0; i < n; i += 3 {
		s.stats[i+1], s.stats[i+2] = math.Inf(1), math.Inf(-1)
	}
	if len(a.def.Distinct) > 0 {
		s.distinct = make([]distinctSet, len(a.def.Distinct))
	}
	return s
}

func (a *Aggregation) markDirty(bk *bucket) {
	if !bk.dirty {
		bk.dirty = true
		a.dirty = append(a.dirty, bk)
	}
}

// markChanged records that s, an entry of bk, changed in this batch.
func (a *Aggregation) markChanged(bk *bucket, s *state) {
	if !s.dirty {
		s.dirty = true
		bk.changed = append(bk.changed, s)
	}
	a.markDirty(bk)
}

// bucket returns the open bucket of level at start, made if new; nil
// if it is closed (and so not in memory).
func (a *Aggregation) bucket(level uint8, start, end int64) *bucket {
	if bk := a.last[level]; bk != nil && bk.start == start {
		return bk
	}
	a.key = baseKey(a.key[:0], level, start)
	bk := a.open[string(a.key)]
	if bk == nil {
		if a.isClosed(end) {
			return nil
		}
		// Open buckets are all in memory: this one is new. Sized like
		// the last one of its level, it rarely grows.
		bk = &bucket{key: string(a.key), level: level, start: start, maxEnd: end}
		if a.def.Window.Kind == KindSession {
			hint := 0
			if prev := a.last[level]; prev != nil {
				hint = prev.n
			}
			bk.entries = make(map[string]*state, hint)
		} else {
			// Sized for the keys numbered so far, it rarely grows.
			var ids []*state
			if n := len(a.freeIDs); n > 0 {
				ids, a.freeIDs = a.freeIDs[n-1], a.freeIDs[:n-1]
			}
			if cap(ids) < a.in.len() {
				ids = make([]*state, a.in.len(), a.in.len()+a.in.len()/8)
			}
			bk.byID = ids[:max(len(ids), a.in.len())]
		}
		a.open[bk.key] = bk
		heap.Push(&a.closing, closing{end: end, key: bk.key})
	}
	a.last[level] = bk
	return bk
}

// A batch of tumbling or hopping windows is applied in two passes. The
// first, in the log's order, decides for each event its key, its
// windows and whether it is late, opening buckets (and counting events
// in closed windows late) as it goes: every decision that depends on
// stream time is made there, as the event arrives. It records each
// addition to an open window as a pending one. The second adds the events to their windows grouped by
// key, in the log's order within a key: the hour and day windows of a
// key, which do not fit a cache for tens of thousands of keys, are
// then read once for all that key's events in the batch instead of
// once per event. A window's events are added in the same order either
// way, so its sums are the same to the last bit. The sort needs the
// keys to number at most four times the additions; the catch-up batches
// of 65,536 events that `logbook bench windows` applies are sorted, a
// live ingest's small batches mostly are not (and gain little: a key
// has few events in them).

// A pending is one event's addition to one open window, recorded by the
// first pass for the second.
type pending struct {
	bk   *bucket
	key  int32
	vi   int32 // the event's values in a.vals (and a.dists)
	late bool
}

// keep stores r's values and distinct values for the second pass and
// returns their index.
func (a *Aggregation) keep(r *Record) int32 {
	vi := a.kept
	a.kept++
	a.vals = append(a.vals, r.Values...)
	a.dists = append(a.dists, r.Distinct...)
	return vi
}

// touch records that the event with values vi falls in the window
// [start, end) of level and key, or counts it late there if that window
// has closed (tumbling and hopping windows).
func (a *Aggregation) touch(b *pebble.Batch, key int32, level uint8, start, end int64, late bool, vi int32) error {
	bk := a.bucket(level, start, end)
	if bk == nil {
		// A closed window: only its late count changes, in a key of its
		// own (rewriting the bucket would cost a bucket per late event).
		if !late {
			return fmt.Errorf("window %s: event for closed window not counted late", a.def.Name)
		}
		return a.countLate(b, key, level, start, end)
	}
	a.pending = append(a.pending, pending{bk: bk, key: key, vi: vi, late: late})
	return nil
}

// applyPending is the second pass: it makes the batch's pending
// additions to their windows, grouped by key when the keys are few
// enough to count.
func (a *Aggregation) applyPending() {
	ts := a.pending
	if n := a.in.len(); len(ts) > 1 && n <= 4*len(ts) {
		// A counting sort by key: stable, so a key's additions keep the
		// log's order.
		counts := resize(a.counts, n+1)
		clear(counts)
		for i := range ts {
			counts[ts[i].key+1]++
		}
		for k := 1; k <= n; k++ {
			counts[k] += counts[k-1]
		}
		sorted := resize(a.sorted, len(ts))
		for i := range ts {
			k := ts[i].key
			sorted[counts[k]] = ts[i]
			counts[k]++
		}
		a.counts, a.sorted, ts = counts, sorted, sorted
	}
	nv, nd := len(a.def.Values), len(a.def.Distinct)
	r := &a.addRec
	for i := range ts {
		if i%yieldEvery == yieldEvery-1 {
			a.yield.Yield()
		}
		t := &ts[i]
		bk := t.bk
		s := bk.get(t.key)
		if s == nil {
			s = a.newState(bk.level, bk.maxEnd)
			s.dims, s.key = a.in.keys[t.key], t.key
			bk.put(s)
		}
		if t.late {
			s.late++
		} else {
			r.Values = a.vals[int(t.vi)*nv : int(t.vi)*nv+nv]
			r.Distinct = a.dists[int(t.vi)*nd : int(t.vi)*nd+nd]
			s.add(r, a.exact)
		}
		a.markChanged(bk, s)
	}
	// Drop the pointers to buckets, which may close, and to the events'
	// strings, so that none outlives the batch.
	clear(a.pending)
	clear(a.sorted)
	a.sorted = a.sorted[:0] // a batch that is not sorted has none to clear
	clear(a.dists)
}

// resize returns s with length n, reallocated only if it is too short.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}

// countLate adds a late event to the late key of a closed window, read
// and written through the batch (which sees its own writes).
func (a *Aggregation) countLate(b *pebble.Batch, key int32, level uint8, start, end int64) error {
	a.key = append(bucketKey(a.key[:0], prefixLate, level, start), a.in.keys[key]...)
	n := uint64(0)
	v, closer, err := b.Get(a.key)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return err
	default:
		if len(v) > 8 {
			n, _ = binary.Uvarint(v[8:])
		}
		closer.Close()
	}
	a.val = binary.AppendUvarint(appendTime(a.val[:0], end), n+1)
	return b.Set(a.key, a.val, nil)
}

// session adds an event at t to its key's sessions: its own window is
// [t, t+gap); every open session it overlaps merges with it into one,
// as in Kafka Streams, which merges before it decides lateness. Closed
// sessions are final, so two cases differ from Kafka Streams (which
// would reopen or extend a session there):
//   - an event whose own window has closed joins the open session it
//     falls inside; outside every open one it is late, counted in a
//     window of its own, [t, t+gap);
//   - an event whose own window is open but overlaps a closed session is
//     late, counted in that session.
func (a *Aggregation) session(b *pebble.Batch, key int32, t int64, r *Record) error {
	gap := int64(a.def.Window.Gap)
	dims := a.in.keys[key]
	list := a.sessions[dims]
	ownClosed := a.isClosed(t + gap)
	var hits []*session
	start, end := t, t+gap
	closedStart, closedEnd, closedHit := int64(0), int64(0), false
	for _, s := range list {
		switch {
		case ownClosed:
			// Only an open session holding t takes it (and it does not
			// grow: t + gap is before its end).
			if s.b.start <= t && t < s.end && !a.isClosed(s.end) {
				hits = append(hits, s)
				start, end = s.b.start, s.end
			}
		case s.b.start < t+gap && t < s.end:
			// Closed sessions may linger in memory until the end of the
			// batch; they take no more events.
			if a.isClosed(s.end) {
				closedStart, closedEnd, closedHit = s.b.start, s.end, true
			} else {
				hits = append(hits, s)
				start, end = min(start, s.b.start), max(end, s.end)
			}
		}
	}
	if !ownClosed && !closedHit {
		if c, ok := a.recent[dims]; ok && c.start < t+gap && t < c.end {
			closedStart, closedEnd, closedHit = c.start, c.end, true
		}
	}
	switch {
	case closedHit:
		a.late++
		return a.countLate(b, key, 0, closedStart, closedEnd)
	case ownClosed && len(hits) == 0:
		// Counted in a window of its own whatever closed sessions are
		// still in memory: the answer must not depend on where the
		// batches of the log happened to end.
		a.late++
		return a.countLate(b, key, 0, t, t+gap)
	}
	var target *session
	for _, s := range hits {
		if s.b.start == start {
			target = s
		}
	}
	if target == nil {
		bk := a.bucket(0, start, end)
		if bk == nil {
			return fmt.Errorf("window %s: open session in a closed bucket", a.def.Name)
		}
		st := bk.entries[dims]
		if st == nil {
			st = a.newState(0, end)
			st.dims, st.key = dims, key
			bk.put(st)
		}
		target = &session{b: bk, dims: dims, state: st}
		a.sessions[dims] = append(a.sessions[dims], target)
	}
	for _, s := range hits {
		if s == target {
			continue
		}
		target.merge(s.state, a.exact)
		delete(s.b.entries, s.dims)
		s.b.n--
		a.markDirty(s.b)
		a.dropSession(s.dims, s.state)
	}
	target.add(r, a.exact)
	target.end = max(target.end, end)
	if target.end > target.b.maxEnd {
		target.b.maxEnd = target.end
		heap.Push(&a.closing, closing{end: target.end, key: target.b.key})
	}
	a.markDirty(target.b)
	return nil
}

// span is a closed session of a key.
type span struct{ start, end int64 }

// closedSession remembers a session that closed, the latest of its key:
// an event whose own window is still open can overlap it only while
// its end is after stream time - grace - gap, and is late in it then.
// Sessions of a key do not overlap and are at least gap long, so the
// latest is the only one such an event can overlap. Those past that
// horizon are swept out now and then.
func (a *Aggregation) closedSession(dims string, start, end int64) {
	if c, ok := a.recent[dims]; ok && c.end >= end {
		return
	}
	a.recent[dims] = span{start, end}
	if len(a.recent) < a.recentSweep {
		return
	}
	horizon := a.st - int64(a.def.Grace) - int64(a.def.Window.Gap)
	for d, c := range a.recent {
		if c.end <= horizon {
			delete(a.recent, d)
		}
	}
	a.recentSweep = 2*len(a.recent) + 1024
}

func (a *Aggregation) dropSession(dims string, st *state) {
	list := a.sessions[dims]
	for i, x := range list {
		if x.state == st {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(a.sessions, dims)
	} else {
		a.sessions[dims] = list
	}
}

// closing is a bucket's end in the heap that evicts closed buckets; an
// entry whose end has moved since is skipped when popped.
type closing struct {
	end int64
	key string
}

type closeHeap []closing

func (h closeHeap) Len() int           { return len(h) }
func (h closeHeap) Less(i, j int) bool { return h[i].end < h[j].end }
func (h closeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *closeHeap) Push(x any)        { *h = append(*h, x.(closing)) }
func (h *closeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
