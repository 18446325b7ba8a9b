package window

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"math"

	"github.com/cockroachdb/pebble/v2"
)

// The buckets of windows in memory and in the database: loading the open
// ones, encoding, writing, the stream time and the layout marker.

// bucket holds the windows of one level that start at the same time, one
// per key (encoded dimensions).
type bucket struct {
	key    string
	level  uint8
	start  int64
	maxEnd int64 // the latest end of its windows: it closes after it
	// The windows, one per key: by key number for tumbling and hopping
	// windows (the array grows with the keys numbered), by encoded
	// dimensions for sessions (whose entries also go away as sessions
	// merge). n counts them.
	byID    []*state
	entries map[string]*state
	n       int
	dirty   bool
	// changed lists the entries the batch being applied changed: what a
	// delta holds.
	changed []*state
	based   bool   // its base is in the database
	seq     uint32 // deltas since the base
	deltaN  int    // entries in those deltas
	compact bool   // write the base (and drop the deltas) at the next write
}

// get returns the window of key k, nil if none (not a session bucket).
func (bk *bucket) get(k int32) *state {
	if int(k) < len(bk.byID) {
		return bk.byID[k]
	}
	return nil
}

// put adds s, a new window, to the bucket.
func (bk *bucket) put(s *state) {
	bk.n++
	if bk.entries != nil {
		bk.entries[s.dims] = s
		return
	}
	if int(s.key) >= len(bk.byID) {
		bk.byID = append(bk.byID, make([]*state, int(s.key)+1-len(bk.byID))...)
	}
	bk.byID[s.key] = s
}

// each calls fn with each of the bucket's windows.
func (bk *bucket) each(fn func(*state)) {
	if bk.entries != nil {
		for _, s := range bk.entries {
			fn(s)
		}
		return
	}
	for _, s := range bk.byID {
		if s != nil {
			fn(s)
		}
	}
}

// session is an open session window of one key.
type session struct {
	b    *bucket
	dims string
	*state
}

// load reads the stream time and every open bucket from the database.
func (a *Aggregation) load() error {
	a.st = noTime
	a.open = make(map[string]*bucket)
	a.last = make([]*bucket, len(a.sizes))
	a.sessions = make(map[string][]*session)
	a.recent, a.recentSweep = make(map[string]span), 1024
	a.in = newInterner(len(a.def.Dims))
	a.closing = a.closing[:0]
	// A failed batch may leave pointers to the buckets just dropped.
	clear(a.dirty)
	a.dirty = a.dirty[:0]
	clear(a.retired)
	a.retired = a.retired[:0]
	clear(a.pending[:cap(a.pending)])
	clear(a.dists[:cap(a.dists)])
	return a.view.Read(func(r pebble.Reader, _ uint64) error {
		var err error
		if a.aside, err = setAsideCount(r); err != nil {
			return err
		}
		if a.st, err = streamTime(r); err != nil || a.st == noTime {
			return err // nothing seen yet, nothing open
		}
		for level, size := range a.sizes {
			lo := bucketKey(nil, prefixWindow, uint8(level), math.MinInt64)
			if size > 0 {
				// Open windows end after st - grace, so start after it
				// minus size. Sessions have no bound: all are read.
				if from := a.st - int64(a.def.Grace) - size; from > math.MinInt64 {
					lo = bucketKey(nil, prefixWindow, uint8(level), from+1)
				}
			}
			err := a.readBuckets(r, lo, []byte{prefixWindow, uint8(level) + 1}, func(b *bucket) {
				if a.isClosed(b.maxEnd) {
					if a.def.Window.Kind == KindSession && b.maxEnd > a.st-int64(a.def.Grace)-int64(a.def.Window.Gap) {
						for dims, s := range b.entries {
							a.closedSession(dims, b.start, s.end)
						}
					}
					return
				}
				a.open[b.key] = b
				heap.Push(&a.closing, closing{end: b.maxEnd, key: b.key})
				if a.def.Window.Kind == KindSession {
					for dims, s := range b.entries {
						a.sessions[dims] = append(a.sessions[dims], &session{b: b, dims: dims, state: s})
					}
				}
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// readBuckets decodes the buckets whose keys lie in [lo, hi), each base
// with its deltas, and hands them to fn.
func (a *Aggregation) readBuckets(r pebble.Reader, lo, hi []byte, fn func(*bucket)) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	var b *bucket
	for it.First(); it.Valid(); it.Next() {
		k, v := it.Key(), it.Value()
		maxEnd, entries, _, err := splitRecord(v)
		if err != nil || !validBucketKey(k) {
			it.Close()
			return errBadState
		}
		start := readTime(k[2:10])
		if b != nil && (b.level != k[1] || b.start != start) {
			fn(b) // deltas without a base: cannot happen, but lose nothing
			b = nil
		}
		if b == nil {
			key := string(baseKey(nil, k[1], start))
			b = &bucket{key: key, level: k[1], start: start, maxEnd: maxEnd}
			if a.def.Window.Kind == KindSession {
				b.entries = map[string]*state{}
			}
		}
		// Newest first: an entry already read is newer than this one.
		n := 0
		for rest := entries; len(rest) > 0; n++ {
			dims, st, next, err := nextEntry(rest)
			if err != nil {
				it.Close()
				return err
			}
			rest = next
			key, err := a.in.encoded(dims, &a.parts, &a.names)
			if err != nil {
				it.Close()
				return err
			}
			if b.entries != nil {
				if _, ok := b.entries[string(dims)]; ok {
					continue
				}
			} else if b.get(key) != nil {
				continue
			}
			s, err := decodeState(st, len(a.def.Values), len(a.def.Distinct), true)
			if err != nil {
				it.Close()
				return err
			}
			s.dims, s.key = a.in.keys[key], key
			b.put(s)
		}
		if k[10] == suffixDelta {
			b.seq++
			b.deltaN += n
			continue
		}
		b.based = true
		b.maxEnd = max(b.maxEnd, maxEnd) // a newer delta may reach further
		fn(b)
		b = nil
	}
	if b != nil {
		fn(b)
	}
	return it.Close()
}

// validBucketKey tells whether k is a base or delta key of prefixWindow.
func validBucketKey(k []byte) bool {
	return len(k) == 11 && k[10] == suffixBase || len(k) == 15 && k[10] == suffixDelta
}

// claimLayout makes sure the database holds this build's layout of keys.
// One written by another layout (or from before the layout was recorded)
// is emptied, checkpoint included, and the runner rebuilds it from the
// log: the aggregation is a projection, and a rebuild is the migration
// that stays right whatever the old layout was.
func (a *Aggregation) claimLayout() error {
	var got string
	data := false
	err := a.view.Read(func(r pebble.Reader, pos uint64) error {
		v, closer, err := r.Get(layoutKey)
		switch {
		case errors.Is(err, pebble.ErrNotFound):
		case err != nil:
			return err
		default:
			got = string(v)
			closer.Close()
		}
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{1}})
		if err != nil {
			return err
		}
		data = pos > 0 || it.First()
		return it.Close()
	})
	if err != nil || got == layout {
		return err
	}
	if data {
		a.opts.Logger.Warn("window: the database has another layout; rebuilding it from the log",
			"aggregation", a.def.Name, "layout", got, "want", layout)
	}
	return a.view.Reset(func(b *pebble.Batch) error { return b.Set(layoutKey, []byte(layout), nil) })
}

// encodeBucket appends a bucket's base: its entries and their index.
func (a *Aggregation) encodeBucket(dst []byte, b *bucket) []byte {
	dst = appendTime(append(dst, indexedFormat), b.maxEnd)
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	a.index.reset(len(a.def.Dims))
	if b.entries != nil {
		for _, s := range b.entries {
			a.index.add(a.in.valueIDs(s.key), uint32(len(dst)-at-4))
			dst = appendEntry(dst, s.dims, s)
		}
	} else {
		for _, s := range b.byID {
			if s != nil {
				a.index.add(a.in.valueIDs(s.key), uint32(len(dst)-at-4))
				dst = appendEntry(dst, s.dims, s)
			}
		}
	}
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return a.index.appendTo(dst, a.in.names)
}

// writeBucket writes what the batch changed in a bucket: a delta of the
// changed entries, or the whole base (deleting the deltas) when it has
// none yet, when the deltas would hold more than half as many entries as
// the base, when it is being compacted, and always for sessions (whose
// entries can also go away).
func (a *Aggregation) writeBucket(b *pebble.Batch, bk *bucket) error {
	changed := bk.changed
	for _, s := range changed {
		s.dirty = false
	}
	bk.changed = bk.changed[:0]
	if bk.based && !bk.compact && a.def.Window.Kind != KindSession && 2*(bk.deltaN+len(changed)) <= bk.n {
		if len(changed) == 0 {
			return nil
		}
		a.val = appendTime(append(a.val[:0], bucketFormat), bk.maxEnd)
		for _, s := range changed {
			a.val = appendEntry(a.val, s.dims, s)
		}
		a.key = deltaKey(a.key[:0], bk.level, bk.start, bk.seq)
		bk.seq++
		bk.deltaN += len(changed)
		return b.Set(a.key, a.val, nil)
	}
	bk.compact = false
	for i := range bk.seq {
		a.key = deltaKey(a.key[:0], bk.level, bk.start, i)
		if err := b.Delete(a.key, nil); err != nil {
			return err
		}
	}
	bk.seq, bk.deltaN = 0, 0
	if bk.n == 0 {
		bk.based = false
		return b.Delete([]byte(bk.key), nil)
	}
	bk.based = true
	a.val = a.encodeBucket(a.val[:0], bk)
	return b.Set([]byte(bk.key), a.val, nil)
}

// streamTime decodes the stored stream time from a reader, noTime if none.
func streamTime(r pebble.Reader) (int64, error) {
	v, closer, err := r.Get(streamTimeKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return noTime, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, errors.New("window: malformed stream time")
	}
	return int64(binary.BigEndian.Uint64(v) ^ (1 << 63)), nil
}

// setAsideCount decodes the stored count of events set aside.
func setAsideCount(r pebble.Reader) (uint64, error) {
	v, closer, err := r.Get(asideKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, errors.New("window: malformed count of events set aside")
	}
	return binary.BigEndian.Uint64(v), nil
}
