package window

import (
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/metrics"
	"github.com/logbook/logbook/engine/projection"
)

// Options configure an Aggregation.
type Options struct {
	// Sync makes each batch wait for its fsync (projection.PebbleOptions).
	// Exactly-once does not need it.
	Sync bool
	// Registerer receives logbook_window_late_events_total; nil records
	// nothing.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// MaxRows bounds the rows of one query answer (default 10,000) and
	// MaxScan the window entries one query may read (default 2,000,000):
	// a query beyond either fails with ErrTooLarge rather than holding
	// the server.
	MaxRows int
	MaxScan int
	// MaxLive bounds the live queries running at once (default 100).
	MaxLive int
	// LiveInterval is the shortest time between two answers of a live
	// query (default 100 ms): changes in between are coalesced, each
	// window sent with its latest value.
	LiveInterval time.Duration
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxRows <= 0 {
		o.MaxRows = 10_000
	}
	if o.MaxScan <= 0 {
		o.MaxScan = 2_000_000
	}
	if o.MaxLive <= 0 {
		o.MaxLive = 100
	}
	if o.LiveInterval <= 0 {
		o.LiveInterval = 100 * time.Millisecond
	}
	return o
}

// tune sizes Pebble for the aggregation's write load: most events write
// a new window entry, and each batch rewrites the open roll-up windows,
// so with Pebble's default 4 MiB memtable and level-0 limits the writer
// stalls behind flushes and compactions. A 64 MiB memtable lets the
// rewrites of one entry collapse before they reach a table.
func tune(o *pebble.Options) {
	o.MemTableSize = 64 << 20
	o.MemTableStopWritesThreshold = 4
	o.L0CompactionThreshold = 4
	o.L0StopWritesThreshold = 24
	o.LBaseMaxBytes = 256 << 20
	// A pull query reads whole buckets (an hour or day of 20,000 keys is
	// about a megabyte): with Pebble's default 8 MiB block cache they were
	// evicted between queries and decompressed again by each one. Pebble
	// reserves each memtable's size in the block cache while it lives, so
	// the cache is cacheBlocks beyond the memtables the writer may queue:
	// a cache of 64 MiB, as it was, held nothing beside one full memtable,
	// and every query read its blocks from the file again.
	o.CacheSize = cacheBlocks + int64(o.MemTableStopWritesThreshold)*int64(o.MemTableSize)
	for i := range o.Levels {
		o.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
	}
}

// cacheBlocks is the view's block cache beyond the memtables: the
// buckets queries read.
const cacheBlocks = 64 << 20

// noTime is the stream time before any event.
const noTime = math.MinInt64

// Aggregation is a windowed aggregation kept in a Pebble view. It is a
// projection.View: run it with a projection.Runner (whose Filter may
// narrow the log to a tag; Extract does the rest).
//
// The buckets of windows that are still open (end + grace > stream time)
// are also held in memory, so that an event costs map lookups instead of
// Pebble reads; every batch writes the buckets it changed, so the memory
// copy never holds anything the database does not, and after a failed
// batch it is reloaded from the database.
type Aggregation struct {
	def   Definition
	dir   string
	opts  Options
	sizes []int64 // per level; 0 for sessions
	exact int
	view  *projection.PebbleView
	lateC prometheus.Counter

	// Writer state: touched only by Apply (which the runner serializes)
	// and at open.
	st       int64              // stream time
	open     map[string]*bucket // open buckets by key
	last     []*bucket          // per level, the bucket used last
	sessions map[string][]*session
	// in numbers the keys of the open buckets (and of closed ones, until
	// a bucket of the top level closes and it is renumbered).
	in      *interner
	closing closeHeap
	dirty   []*bucket
	rec     Record
	key     []byte
	val     []byte
	late    uint64 // late events of the batch being applied
	index   indexBuilder
	slab    []state   // states handed out by newState, allocated in chunks
	floats  []float64 // their stats, likewise
	// Buckets that closed in the batch being applied; once written, their
	// states and arrays are reused for new windows (tumbling and hopping
	// windows), so that the ingest allocates little once warm.
	retired    []*bucket
	freeStates []*state
	freeIDs    [][]*state
	parts      [][]byte // scratch of load
	names      []string
	renumbered int // times (for tests)

	// reading is held by queries while they read the database, so that
	// Close waits for them instead of closing it under them.
	reading sync.RWMutex
	shut    bool // guarded by reading

	// Queries come first: the writer checks queries between slices of
	// its work and, while one runs, waits (up to maxYield) for it to end
	// (yieldToQueries).
	queries atomic.Int32
	// lastGroups is the groups of the last query's answer: the next one
	// sizes its map of groups by it.
	lastGroups atomic.Int64
	workUntil  time.Time     // the writer's: no yielding before it
	yielded    time.Duration // the writer's time spent yielding (for tests)

	mu      sync.Mutex
	changed chan struct{} // closed after each commit
	live    int
	closed  bool
}

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

// Open opens (creating if needed) the aggregation's database in dir.
func Open(dir string, def Definition, opts Options) (*Aggregation, error) {
	if err := def.validate(); err != nil {
		return nil, err
	}
	if def.DistinctExact == 0 {
		def.DistinctExact = 1000
	}
	opts = opts.withDefaults()
	a := &Aggregation{
		def: def, dir: dir, opts: opts, sizes: def.levelSizes(), exact: def.DistinctExact,
		changed: make(chan struct{}),
		rec: Record{
			Dims:     make([]string, len(def.Dims)),
			Values:   make([]float64, len(def.Values)),
			Distinct: make([]string, len(def.Distinct)),
		},
	}
	if opts.Registerer != nil {
		c, err := metrics.Register(opts.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logbook_window_late_events_total",
			Help: "Events that arrived after their window's grace period, counted in the window's late count.",
		}, []string{"aggregation"}))
		if err != nil {
			return nil, fmt.Errorf("window %s: %w", def.Name, err)
		}
		a.lateC = c.WithLabelValues(def.Name)
	}
	v, err := projection.OpenPebbleView(dir, projection.PebbleOptions{Sync: opts.Sync, Logger: opts.Logger, Tune: tune}, a.update)
	if err != nil {
		return nil, err
	}
	a.view = v
	if err := a.claimLayout(); err != nil {
		_ = v.Close()
		return nil, fmt.Errorf("window %s: %w", def.Name, err)
	}
	if err := a.load(); err != nil {
		_ = v.Close()
		return nil, fmt.Errorf("window %s: %w", def.Name, err)
	}
	return a, nil
}

// Name returns the aggregation's name.
func (a *Aggregation) Name() string { return a.def.Name }

// Definition returns the aggregation's definition.
func (a *Aggregation) Definition() Definition { return a.def }

// Checkpoint implements projection.View.
func (a *Aggregation) Checkpoint(ctx context.Context) (uint64, error) {
	return a.view.Checkpoint(ctx)
}

// Apply implements projection.View: the batch's window changes, the
// stream time and the checkpoint commit in one Pebble batch.
func (a *Aggregation) Apply(ctx context.Context, batch []eventstore.Event) error {
	a.late = 0
	if err := a.view.Apply(ctx, batch); err != nil {
		// The memory copy may hold changes that were not committed.
		if lerr := a.load(); lerr != nil {
			return errors.Join(err, fmt.Errorf("window %s: reloading: %w", a.def.Name, lerr))
		}
		return err
	}
	if a.lateC != nil && a.late > 0 {
		a.lateC.Add(float64(a.late))
	}
	a.mu.Lock()
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
	return nil
}

// Close closes the database once running queries have read what they
// read; live queries end with ErrClosed, later queries fail with it.
// Stop the runner first.
func (a *Aggregation) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
	a.reading.Lock()
	defer a.reading.Unlock()
	a.shut = true
	return a.view.Close()
}

// read runs fn on a snapshot of the database, unless it is closed.
func (a *Aggregation) read(fn func(r pebble.Reader, pos uint64) error) error {
	a.reading.RLock()
	defer a.reading.RUnlock()
	if a.shut {
		return ErrClosed
	}
	return a.view.Read(fn)
}

// ErrClosed ends queries on a closed aggregation.
var ErrClosed = errors.New("window: aggregation closed")

// load reads the stream time and every open bucket from the database.
func (a *Aggregation) load() error {
	a.st = noTime
	a.open = make(map[string]*bucket)
	a.last = make([]*bucket, len(a.sizes))
	a.sessions = make(map[string][]*session)
	a.in = newInterner(len(a.def.Dims))
	a.closing = a.closing[:0]
	a.dirty = a.dirty[:0]
	a.retired = a.retired[:0]
	return a.view.Read(func(r pebble.Reader, _ uint64) error {
		var err error
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

// isClosed tells whether a window ending at end is past its grace.
func (a *Aggregation) isClosed(end int64) bool {
	return a.st != noTime && end <= a.st-int64(a.def.Grace)
}

// Queries first. On a machine with few cores a pull query that ran
// beside a catching-up or live ingest waited for the writer's time
// slices, and that wait was its tail latency (docs/benchmarks.md, "Figures
// behind choices in the code"). So the writer looks for running
// queries every yieldEvery events and between the buckets it writes,
// and while one runs it steps aside until it ends, for at most maxYield
// at a time and at most half of its time; queries that come one after
// another without a pause can slow the ingest down, never stop it.
const (
	yieldEvery = 256
	maxYield   = 10 * time.Millisecond
	yieldPoll  = 50 * time.Microsecond
)

func (a *Aggregation) beginQuery() { a.queries.Add(1) }

func (a *Aggregation) endQuery() { a.queries.Add(-1) }

// yieldToQueries waits, up to maxYield, for running queries to end. It
// polls: a query that woke the writer as it ended (a channel send) was
// the goroutine preempted for it, inside the query's time. After
// waiting, the writer works at least as long as it waited before it
// yields again, so that queries that never pause (a hundred live
// queries) take at most half of its time.
func (a *Aggregation) yieldToQueries() {
	if a.queries.Load() == 0 {
		return
	}
	now := time.Now()
	if now.Before(a.workUntil) {
		return
	}
	deadline := now.Add(maxYield)
	for a.queries.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(yieldPoll)
	}
	end := time.Now()
	a.workUntil = end.Add(end.Sub(now))
	a.yielded += end.Sub(now)
}

// update is the PebbleView's update function.
func (a *Aggregation) update(b *pebble.Batch, events []eventstore.Event) error {
	r := &a.rec
	stBefore := a.st
	for i := range events {
		if i%yieldEvery == yieldEvery-1 {
			a.yieldToQueries()
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
			for level, size := range a.sizes {
				s := floorDiv(t, size)
				if err = a.touch(b, key, uint8(level), s, s+size, late, r); err != nil {
					break
				}
			}
		case KindHopping:
			size, adv := a.sizes[0], int64(a.def.Window.Advance)
			anyLate := false
			for s := floorDiv(t, adv); s > t-size; s -= adv {
				late := a.isClosed(s + size)
				anyLate = anyLate || late
				if err = a.touch(b, key, 0, s, s+size, late, r); err != nil {
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
		a.yieldToQueries()
		bk.dirty = false
		if err := a.writeBucket(b, bk); err != nil {
			return err
		}
	}
	a.dirty = a.dirty[:0]
	for _, bk := range a.retired {
		for i, s := range bk.byID {
			if s != nil {
				a.freeStates = append(a.freeStates, s)
				bk.byID[i] = nil
			}
		}
		if len(a.freeIDs) < 8 {
			a.freeIDs = append(a.freeIDs, bk.byID[:0])
		}
		bk.byID = nil
	}
	a.retired = a.retired[:0]
	if topClosed {
		a.renumber()
	}
	if a.st != stBefore {
		if err := b.Set(streamTimeKey, appendTime(nil, a.st), nil); err != nil {
			return err
		}
	}
	return nil
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

// newState returns an empty state for a new window. Most events create
// a window, so states and their stats come from chunks: one allocation
// per few hundred windows instead of three per window, which cut the
// collector's share of the ingest.
func (a *Aggregation) newState(end int64) *state {
	if n := len(a.freeStates); n > 0 {
		s := a.freeStates[n-1]
		a.freeStates = a.freeStates[:n-1]
		s.reset()
		s.end, s.dirty = end, false
		return s
	}
	if len(a.slab) == 0 {
		a.slab = make([]state, 256)
	}
	s := &a.slab[0]
	a.slab = a.slab[1:]
	n := 3 * len(a.def.Values)
	if n <= len(s.inl) {
		s.end, s.stats = end, s.inl[:n:n]
	} else {
		if len(a.floats) < n {
			a.floats = make([]float64, max(n, 4096))
		}
		s.end, s.stats, a.floats = end, a.floats[:n:n], a.floats[n:]
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

// touch adds r to the window [start, end) of level and key, or counts
// it late there (tumbling and hopping windows).
func (a *Aggregation) touch(b *pebble.Batch, key int32, level uint8, start, end int64, late bool, r *Record) error {
	bk := a.bucket(level, start, end)
	if bk == nil {
		// A closed window: only its late count changes, in a key of its
		// own (rewriting the bucket would cost a bucket per late event).
		if !late {
			return fmt.Errorf("window %s: event for closed window not counted late", a.def.Name)
		}
		return a.countLate(b, key, level, start, end)
	}
	s := bk.get(key)
	if s == nil {
		s = a.newState(end)
		s.dims, s.key = a.in.keys[key], key
		bk.put(s)
	}
	if late {
		s.late++
	} else {
		s.add(r, a.exact)
	}
	a.markChanged(bk, s)
	return nil
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
// [t, t+gap); every open session it overlaps merges with it into one.
func (a *Aggregation) session(b *pebble.Batch, key int32, t int64, r *Record) error {
	gap := int64(a.def.Window.Gap)
	if a.isClosed(t + gap) {
		// Counted in a window of its own, [t, t+gap), whatever sessions
		// are still in memory: the answer must not depend on where the
		// batches of the log happened to end.
		a.late++
		return a.countLate(b, key, 0, t, t+gap)
	}
	dims := a.in.keys[key]
	list := a.sessions[dims]
	var hits []*session
	start, end := t, t+gap
	for _, s := range list {
		// Closed sessions are final: they may linger in memory until the
		// end of the batch, but they take no more events.
		if s.b.start < t+gap && t < s.end && !a.isClosed(s.end) {
			hits = append(hits, s)
			start, end = min(start, s.b.start), max(end, s.end)
		}
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
			st = a.newState(end)
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
