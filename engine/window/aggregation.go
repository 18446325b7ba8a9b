package window

import (
	"context"
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
	"github.com/logbook/logbook/engine/priority"
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
	// MaxSkew is how far ahead of the clock an event's time may be
	// (default 1 min). An event further ahead — a wrong clock, or
	// milliseconds where seconds were meant — would move stream time
	// there and close every window before the events of the present
	// arrive, for good; it is set aside instead: not applied, counted in
	// Result.SetAside and logbook_window_set_aside_events_total. The
	// clock is the event's commit time when it has one (so that a
	// rebuild from the log sets aside the same events), and never later
	// than Now.
	MaxSkew time.Duration
	// Now is the wall clock (default time.Now); for tests.
	Now func() time.Time
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
	if o.MaxSkew <= 0 {
		o.MaxSkew = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
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
	def    Definition
	dir    string
	opts   Options
	sizes  []int64 // per level; 0 for sessions
	exact  int
	view   *projection.PebbleView
	lateC  prometheus.Counter
	asideC prometheus.Counter

	// Writer state: touched only by Apply (which the runner serializes)
	// and at open.
	st       int64              // stream time
	open     map[string]*bucket // open buckets by key
	last     []*bucket          // per level, the bucket used last
	sessions map[string][]*session
	// recent holds the latest closed session of each key
	// (closedSession); recentSweep is its size at which it is swept.
	recent      map[string]span
	recentSweep int
	// in numbers the keys of the open buckets (and of closed ones, until
	// a bucket of the top level closes and it is renumbered).
	in      *interner
	closing closeHeap
	dirty   []*bucket
	rec     Record
	// The batch's pending additions to open windows and their events'
	// values (update's first pass), and the scratch of their sort by key.
	pending []pending
	vals    []float64
	dists   []string
	kept    int32
	addRec  Record // the second pass's view of an addition's values
	counts  []int32
	sorted  []pending
	key     []byte
	val     []byte
	late    uint64    // late events of the batch being applied
	aside   uint64    // events set aside, in all (stored under asideKey)
	asideB  uint64    // of them, in the batch being applied
	now     time.Time // the clock when the batch began
	index   indexBuilder
	chunks  []stateChunk // per level, what newState hands out
	// Buckets that closed in the batch being applied; once written, their
	// arrays of states by key are reused for new buckets (tumbling and
	// hopping windows).
	retired    []*bucket
	freeIDs    [][]*state
	parts      [][]byte // scratch of load
	names      []string
	renumbered int // times (for tests)

	// reading is held by queries while they read the database, so that
	// Close waits for them instead of closing it under them.
	reading sync.RWMutex
	shut    bool // guarded by reading

	// lastGroups is the groups of the last query's answer: the next one
	// sizes its map of groups by it.
	lastGroups atomic.Int64
	yield      priority.Yielder // the writer's: it lets running queries go first

	mu      sync.Mutex
	changed chan struct{} // closed after each commit
	live    int
	closed  bool
}

// stateChunk is the rest of the last chunks of states, and of their
// stats, that newState allocated for one level.
type stateChunk struct {
	states []state
	floats []float64
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
	a.chunks = make([]stateChunk, len(a.sizes))
	if opts.Registerer != nil {
		c, err := metrics.Register(opts.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logbook_window_late_events_total",
			Help: "Events that arrived after their window's grace period, counted in the window's late count.",
		}, []string{"aggregation"}))
		if err != nil {
			return nil, fmt.Errorf("window %s: %w", def.Name, err)
		}
		a.lateC = c.WithLabelValues(def.Name)
		c, err = metrics.Register(opts.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logbook_window_set_aside_events_total",
			Help: "Events not applied because their time was more than the maximum skew ahead of the clock, or beyond the years 1678 to 2262.",
		}, []string{"aggregation"}))
		if err != nil {
			return nil, fmt.Errorf("window %s: %w", def.Name, err)
		}
		a.asideC = c.WithLabelValues(def.Name)
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

// Backup writes a consistent copy of the aggregation's database into
// dir, which must not exist, and returns the checkpoint it holds
// (projection.PebbleView.Backup); it is a backup.View.
func (a *Aggregation) Backup(dir string) (uint64, error) { return a.view.Backup(dir) }

// Apply implements projection.View: the batch's window changes, the
// stream time and the checkpoint commit in one Pebble batch.
func (a *Aggregation) Apply(ctx context.Context, batch []eventstore.Event) error {
	a.late, a.asideB = 0, 0
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
	if a.asideC != nil && a.asideB > 0 {
		a.asideC.Add(float64(a.asideB))
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

// Queries first: a query is foreground work (engine/priority), and the
// writer yields to it every yieldEvery events and between the buckets
// it writes (priority.Yielder: at most two thirds of its time). On a
// machine with few cores a pull query beside a catching-up or live
// ingest otherwise waited for the writer's time slices, and that wait
// was its tail latency (docs/benchmarks.md, "Figures behind choices in
// the code").
const yieldEvery = 256
