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
	"time"

	"github.com/cockroachdb/pebble/v2"
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

// noTime is the stream time before any event.
const noTime = math.MinInt64

// Aggregation is a windowed aggregation kept in a Pebble view. It is a
// projection.View: run it with a projection.Runner (whose Filter may
// narrow the log to a tag; Extract does the rest).
//
// The windows that are still open (end + grace > stream time) are also
// held in memory, so that an event costs map lookups instead of Pebble
// reads; every batch writes the windows it changed, so the memory copy
// never holds anything the database does not, and after a failed batch it
// is reloaded from the database.
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
	st       int64             // stream time
	open     map[string]*entry // open windows by key
	sessions map[string][]*entry
	closing  closeHeap
	dirty    []*entry
	rec      Record
	key      []byte
	val      []byte
	late     uint64 // late events of the batch being applied

	mu      sync.Mutex
	changed chan struct{} // closed after each commit
	live    int
	closed  bool
}

// entry is an open window of one key.
type entry struct {
	key     string
	level   uint8
	start   int64
	dims    string // the encoded dimensions (sessions)
	dirty   bool
	deleted bool
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
	v, err := projection.OpenPebbleView(dir, projection.PebbleOptions{Sync: opts.Sync, Logger: opts.Logger}, a.update)
	if err != nil {
		return nil, err
	}
	a.view = v
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

// Close closes the database; live queries end with ErrClosed.
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
	return a.view.Close()
}

// ErrClosed ends queries on a closed aggregation.
var ErrClosed = errors.New("window: aggregation closed")

// load reads the stream time and every open window from the database.
func (a *Aggregation) load() error {
	a.st = noTime
	a.open = make(map[string]*entry)
	a.sessions = make(map[string][]*entry)
	a.closing = a.closing[:0]
	a.dirty = a.dirty[:0]
	return a.view.Read(func(r pebble.Reader, _ uint64) error {
		v, closer, err := r.Get(streamTimeKey)
		if errors.Is(err, pebble.ErrNotFound) {
			return nil // nothing seen yet, nothing open
		}
		if err != nil {
			return err
		}
		if len(v) != 8 {
			closer.Close()
			return errors.New("malformed stream time")
		}
		a.st = readTime(v)
		closer.Close()
		for level, size := range a.sizes {
			lo := levelStart(uint8(level), math.MinInt64)
			if size > 0 {
				// Open windows end after st - grace, so start after it
				// minus size.
				if from := a.st - int64(a.def.Grace) - size; from > math.MinInt64 {
					lo = levelStart(uint8(level), from+1)
				}
			}
			it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: []byte{prefixWindow, uint8(level) + 1}})
			if err != nil {
				return err
			}
			var dims [][]byte
			for it.First(); it.Valid(); it.Next() {
				_, start, d, err := splitKey(it.Key(), dims)
				if err != nil {
					it.Close()
					return err
				}
				dims = d
				s, err := decodeState(it.Value(), len(a.def.Values), len(a.def.Distinct), true)
				if err != nil {
					it.Close()
					return err
				}
				if a.isClosed(s.end) {
					continue
				}
				k := string(it.Key())
				e := &entry{key: k, level: uint8(level), start: start, state: s}
				if a.def.Window.Kind == KindSession {
					e.dims = k[10:]
					a.sessions[e.dims] = append(a.sessions[e.dims], e)
				}
				a.open[k] = e
				heap.Push(&a.closing, closing{end: s.end, key: k})
			}
			if err := it.Close(); err != nil {
				return err
			}
		}
		return nil
	})
}

// isClosed tells whether a window ending at end is past its grace.
func (a *Aggregation) isClosed(end int64) bool {
	return a.st != noTime && end <= a.st-int64(a.def.Grace)
}

// update is the PebbleView's update function.
func (a *Aggregation) update(b *pebble.Batch, events []eventstore.Event) error {
	r := &a.rec
	stBefore := a.st
	for i := range events {
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
				if err = a.touch(b, uint8(level), s, s+size, late, r); err != nil {
					break
				}
			}
		case KindHopping:
			size, adv := a.sizes[0], int64(a.def.Window.Advance)
			anyLate := false
			for s := floorDiv(t, adv); s > t-size; s -= adv {
				late := a.isClosed(s + size)
				anyLate = anyLate || late
				if err = a.touch(b, 0, s, s+size, late, r); err != nil {
					break
				}
			}
			if anyLate {
				a.late++
			}
		case KindSession:
			err = a.session(b, t, r)
		}
		if err != nil {
			return err
		}
	}
	for _, e := range a.dirty {
		e.dirty = false
		if e.deleted {
			continue
		}
		a.val = e.appendTo(a.val[:0])
		if err := b.Set([]byte(e.key), a.val, nil); err != nil {
			return err
		}
	}
	a.dirty = a.dirty[:0]
	if a.st != stBefore {
		if err := b.Set(streamTimeKey, appendTime(nil, a.st), nil); err != nil {
			return err
		}
	}
	// Windows past their grace leave memory; their last state is in this
	// batch or an earlier one.
	for len(a.closing) > 0 && a.isClosed(a.closing[0].end) {
		c := heap.Pop(&a.closing).(closing)
		e := a.open[c.key]
		if e == nil || e.end != c.end {
			continue // a session that has grown or merged since
		}
		delete(a.open, c.key)
		if a.def.Window.Kind == KindSession {
			a.dropSession(e)
		}
	}
	return nil
}

func (a *Aggregation) markDirty(e *entry) {
	if !e.dirty {
		e.dirty = true
		a.dirty = append(a.dirty, e)
	}
}

// touch adds r to the window [start, end) of level, or counts it late
// there.
func (a *Aggregation) touch(b *pebble.Batch, level uint8, start, end int64, late bool, r *Record) error {
	a.key = windowKey(a.key[:0], level, start, r.Dims)
	if e := a.open[string(a.key)]; e != nil {
		if late {
			e.late++
		} else {
			e.add(r, a.exact)
		}
		a.markDirty(e)
		return nil
	}
	if !a.isClosed(end) {
		// Open windows are all in memory: this one is new.
		e := &entry{key: string(a.key), level: level, start: start, state: newState(len(a.def.Values), len(a.def.Distinct), end)}
		if late {
			e.late++
		} else {
			e.add(r, a.exact)
		}
		a.open[e.key] = e
		heap.Push(&a.closing, closing{end: end, key: e.key})
		a.markDirty(e)
		return nil
	}
	// A closed window: only its late count changes, read and written
	// through the batch (which sees its own writes).
	if !late {
		return fmt.Errorf("window %s: event for closed window not counted late", a.def.Name)
	}
	return a.countLate(b, a.key, end)
}

func (a *Aggregation) countLate(b *pebble.Batch, key []byte, end int64) error {
	v, closer, err := b.Get(key)
	var s *state
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		s = newState(len(a.def.Values), len(a.def.Distinct), end)
	case err != nil:
		return err
	default:
		s, err = decodeState(v, len(a.def.Values), len(a.def.Distinct), true)
		closer.Close()
		if err != nil {
			return err
		}
	}
	s.late++
	a.val = s.appendTo(a.val[:0])
	return b.Set(key, a.val, nil)
}

// session adds an event at t to its key's sessions: its own window is
// [t, t+gap); every open session it overlaps merges with it into one.
func (a *Aggregation) session(b *pebble.Batch, t int64, r *Record) error {
	gap := int64(a.def.Window.Gap)
	a.key = windowKey(a.key[:0], 0, t, r.Dims)
	dims := a.key[10:]
	if a.isClosed(t + gap) {
		a.late++
		if e := a.open[string(a.key)]; e != nil {
			e.late++
			a.markDirty(e)
			return nil
		}
		return a.countLate(b, a.key, t+gap)
	}
	list := a.sessions[string(dims)]
	var hits []*entry
	start, end := t, t+gap
	for _, e := range list {
		if e.start < t+gap && t < e.end {
			hits = append(hits, e)
			start, end = min(start, e.start), max(end, e.end)
		}
	}
	var target *entry
	for _, e := range hits {
		if e.start == start {
			target = e
		}
	}
	if target == nil {
		a.key = windowKey(a.key[:0], 0, start, r.Dims)
		target = &entry{key: string(a.key), start: start, dims: string(a.key[10:]), state: newState(len(a.def.Values), len(a.def.Distinct), end)}
		a.open[target.key] = target
		a.sessions[target.dims] = append(a.sessions[target.dims], target)
	}
	for _, e := range hits {
		if e == target {
			continue
		}
		target.merge(e.state, a.exact)
		e.deleted = true
		delete(a.open, e.key)
		a.dropSession(e)
		if err := b.Delete([]byte(e.key), nil); err != nil {
			return err
		}
	}
	target.add(r, a.exact)
	if end != target.end || len(hits) == 0 {
		target.end = end
		heap.Push(&a.closing, closing{end: end, key: target.key})
	}
	a.markDirty(target)
	return nil
}

func (a *Aggregation) dropSession(e *entry) {
	list := a.sessions[e.dims]
	for i, x := range list {
		if x == e {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(a.sessions, e.dims)
	} else {
		a.sessions[e.dims] = list
	}
}

// closing is a window's end in the heap that evicts closed windows; an
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
