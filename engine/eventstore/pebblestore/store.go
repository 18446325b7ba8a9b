// Package pebblestore is the embedded event store: one process, a data
// directory, Pebble underneath.
//
// Every append passes through a single sequencer goroutine (commit.go),
// which checks expected versions, assigns sequence numbers and positions
// and applies many appends as one Pebble batch; a syncer goroutine waits for
// that batch's WAL fsync and only then publishes the new durable head and
// answers the writers. Readers never look past the durable head, so nothing
// a crash could take back is ever seen.
package pebblestore

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/backend"
	"github.com/logbook/logbook/engine/pebblekit"
)

// Options configure a Store. The zero value is the production setting.
type Options struct {
	Limits eventstore.Limits
	// NoSync skips the fsync on append. For tests only: an acknowledged
	// append may be lost in a crash.
	NoSync bool
	// CacheBytes sizes Pebble's block cache (default 128 MiB).
	CacheBytes int64
	// MemTableBytes sizes each Pebble memtable (default 64 MiB).
	MemTableBytes uint64
	// MaxReadBatch caps the max argument of reads (default 10,000).
	MaxReadBatch int
	// VersionCacheSize bounds how many stream versions the sequencer keeps
	// in memory (default 1,000,000).
	VersionCacheSize int
	// RecentIDs is how many of the latest events' ids the store remembers
	// to recognize a retried append with expected version Any (default
	// 100,000, at most 2^30; 48–80 bytes of memory each). Retries with an exact expected version are recognized
	// whatever their age.
	RecentIDs int
	// Logger receives Pebble's errors (default slog.Default()).
	Logger *slog.Logger

	// FS is the file system Pebble uses (default the operating system's):
	// the power-loss tests (logbook torture) give it one that simulates a
	// power cut, the I/O fault tests one that fails chosen operations.
	FS vfs.FS
	// Clock is the store's time: events' commit times and the age of
	// retention rules (default time.Now). Tests of expiry give it one
	// they move.
	Clock func() time.Time
	// SweepInterval is how often the background pass runs that applies
	// retention rules and reclaims the space of removed events (default 1
	// minute; negative: never, only when Sweep is called).
	SweepInterval time.Duration
	// SweepBatch is how many events the pass removes in one batch
	// (default 1,000); SweepRate, how many a second at most (default
	// 20,000): the bound on the I/O it takes from appends and reads.
	SweepBatch int
	SweepRate  int
	// SweepCompactRate bounds the disk I/O of the compactions that give
	// the space of removed events back: the bytes they read and write, a
	// second, on average (default 16 MiB/s). The sweep compacts the
	// range it removed from in chunks of about this many bytes of files,
	// and after each waits as long as reading and writing what Pebble
	// counted for it takes at this rate. One step is not throttled
	// inside: it is a file at least, and when the pass's removals are
	// spread over the log, its first step merges their deletions into
	// every file they span (what any LSM compaction of those deletions
	// would do); the pause after it is then as long.
	SweepCompactRate int64

	// closeWait is how long Close waits for appends in flight before it
	// gives up on a stalled disk (default 5 s).
	closeWait time.Duration
	// queued, for tests, is called with an append's stream once it is in
	// the sequencer's queue.
	queued func(stream string)
}

// DefaultSweepCompactRate is Options.SweepCompactRate's default: 16 MiB of
// compaction writes a second, a small share of what an SSD sustains.
const DefaultSweepCompactRate = 16 << 20

// Store is the Pebble-backed eventstore.Store.
type Store struct {
	db     *pebble.DB
	opts   Options
	limits backend.Limits
	fs     *countingFS
	spares *pebblekit.SpareWALs // nil with NoSync

	// durable is the position of the last event whose batch is synced.
	// Readers bound every read by it.
	durable atomic.Uint64
	notify  backend.Notifier

	mu     sync.RWMutex // guards closed against concurrent sends on reqs
	closed bool
	reqs   chan *appendReq
	groups chan *group
	done   chan struct{} // closed when the syncer has finished
	// closing is closed when Close begins: an append still waiting to be
	// queued (the queue is full behind a stalled disk) gives up.
	closing   chan struct{}
	closeOnce sync.Once
	closeDB   sync.Once
	closeErr  error // of the database's Close
	failed    atomic.Pointer[error]

	snapMu sync.Mutex // serializes snapshot read-compare-write

	// dbMu keeps the database open under the calls that read it (and
	// SaveSnapshot): each holds a read lock, taken with TryRLock so that
	// calls nested in one another cannot deadlock with a waiting Close;
	// Close takes the write lock for good before closing the database.
	dbMu sync.RWMutex

	// Removal (delete.go): the truncation points of streams whose
	// removed events are not reclaimed yet, the highest position
	// reclaimed, and the locks of the state writers and of the sweep.
	pending   atomic.Pointer[map[string]uint64]
	floor     atomic.Uint64
	stateMu   sync.Mutex
	sweepMu   sync.Mutex
	sweepDone chan struct{}
	// retMu orders retention changes against the sweep's truncations:
	// SetRetention holds it to write a rule and bump retGen, each
	// truncation by a rule holds it shared and is skipped if retGen moved
	// since the sweep read its rules, so a changed rule is never applied
	// once SetRetention has returned.
	retMu  sync.RWMutex
	retGen uint64

	seq    sequencerState // owned by the sequencer goroutine
	recent *recentIDs     // owned by the sequencer goroutine
}

var (
	_ eventstore.Store   = (*Store)(nil)
	_ eventstore.Deleter = (*Store)(nil)
)

// Open opens (creating if needed) the store in dir. Only one process may
// have a directory open at a time.
func Open(dir string, opts Options) (*Store, error) {
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 128 << 20
	}
	if opts.MemTableBytes == 0 {
		opts.MemTableBytes = 64 << 20
	}
	if opts.MaxReadBatch <= 0 {
		opts.MaxReadBatch = 10_000
	}
	if opts.VersionCacheSize <= 0 {
		opts.VersionCacheSize = 1_000_000
	}
	if opts.RecentIDs <= 0 {
		opts.RecentIDs = 100_000
	}
	opts.RecentIDs = min(opts.RecentIDs, maxRecentIDs)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = time.Minute
	}
	if opts.SweepBatch <= 0 {
		opts.SweepBatch = 1000
	}
	if opts.SweepRate <= 0 {
		opts.SweepRate = 20_000
	}
	if opts.SweepCompactRate <= 0 {
		opts.SweepCompactRate = DefaultSweepCompactRate
	}
	fs := pebblekit.YieldingFS(opts.FS)
	var spares *pebblekit.SpareWALs
	if !opts.NoSync {
		// Logs written into blocks already written: a cheaper fdatasync
		// (pebblekit.SpareWALs). Without syncs there is nothing to save.
		var err error
		if spares, err = pebblekit.NewSpareWALs(fs, dir, pebblekit.WALBytes(opts.MemTableBytes), opts.Logger); err != nil {
			return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
		}
		fs = spares
	}
	s := &Store{
		opts:      opts,
		limits:    backend.NewLimits(opts.Limits),
		spares:    spares,
		fs:        &countingFS{FS: fs, dir: filepath.Clean(dir)},
		reqs:      make(chan *appendReq, 1024),
		groups:    make(chan *group, 2),
		done:      make(chan struct{}),
		closing:   make(chan struct{}),
		sweepDone: make(chan struct{}),
	}
	cache := pebble.NewCache(opts.CacheBytes)
	defer cache.Unref()
	popts := &pebble.Options{
		FS:                 s.fs,
		Cache:              cache,
		MemTableSize:       opts.MemTableBytes,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebblekit.Logger(opts.Logger, "store"),
	}
	popts.BlockPropertyCollectors = append(popts.BlockPropertyCollectors, positionCollector)
	popts.EnsureDefaults()
	// Index lookups by exact key (ids, stream heads) are common and mostly
	// miss: bloom filters make a miss cost no block read.
	for i := range popts.Levels {
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, popts)
	if err != nil {
		spares.Close()
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	s.db = db
	fail := s.fail
	s.fs.walFailed.Store(&fail)
	if err := spares.Tidy(); err != nil {
		s.opts.Logger.Warn("pebblestore: could not remove an old spare write-ahead log", "dir", dir, "err", err)
	}
	if err := s.recover(); err != nil {
		_ = db.Close()
		spares.Close()
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	go s.sequence()
	go s.syncLoop()
	if opts.SweepInterval > 0 {
		go s.sweeper()
	} else {
		close(s.sweepDone)
	}
	return s, nil
}

// recover checks the format marker and finds the last position.
func (s *Store) recover() error {
	if err := pebblekit.Claim(s.db, formatKey, formatVersion, "store"); err != nil {
		return err
	}
	iter, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixEvent}, UpperBound: []byte{prefixEvent + 1}})
	if err != nil {
		return err
	}
	var last uint64
	if iter.Last() {
		last = be64(iter.Key()[1:])
	}
	if err := iter.Close(); err != nil {
		return err
	}
	// Removed events leave no key: the floor remembers the highest
	// position the sweep removed, so none is handed out again.
	floor, err := s.loadPending()
	if err != nil {
		return err
	}
	last = max(last, floor)
	s.durable.Store(last)
	s.seq = sequencerState{nextPos: last + 1, versions: make(map[string]uint64)}
	s.recent = newRecentIDs(s.opts.RecentIDs)
	// Refill the recent-id table from the tail of the log, so that a
	// retry sent across a restart is still recognized.
	from := uint64(1)
	if last > uint64(s.opts.RecentIDs) {
		from = last - uint64(s.opts.RecentIDs) + 1
	}
	iter, err = s.db.NewIter(eventRange(from, last))
	if err != nil {
		return err
	}
	for ok := iter.First(); ok; ok = iter.Next() {
		v, err := iter.ValueAndErr()
		if err != nil || len(v) < fixedBytes {
			_ = iter.Close()
			return fmt.Errorf("reading recent event ids: %w", cmp.Or(err, errCorrupt))
		}
		s.recent.add(eventstore.ID(v[offID:fixedBytes]), be64(iter.Key()[1:]))
	}
	if err := iter.Close(); err != nil {
		return err
	}
	return nil
}

// Close stops accepting appends, waits for those in flight, and closes
// the database. Subscriptions return eventstore.ErrClosed. If the appends
// in flight are still waiting for the disk after a while (5 s: a stalled
// fsync), Close gives up and returns an error, leaving the database open
// under them, so that the process can still exit; a later Close, once
// the disk answers, finishes the job.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.reqs)
	}
	s.mu.Unlock()
	wait := s.opts.closeWait
	if wait <= 0 {
		wait = 5 * time.Second
	}
	select {
	case <-s.done:
	case <-time.After(wait):
		return fmt.Errorf("pebblestore: close: appends still wait for the disk after %v (a stalled or failed disk?); the database is left open", wait)
	}
	<-s.sweepDone // the sweep stops at closing
	s.closeDB.Do(func() {
		s.dbMu.Lock() // waits for reads in flight; later ones fail with ErrClosed
		s.notify.Close()
		// The spare's writer stops first: once the database is closed
		// its directory lock is released, and the directory may be
		// another process's.
		s.spares.Close()
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// enter guards a use of the database against Close: it fails with
// eventstore.ErrClosed once Close has begun, else the caller must leave.
func (s *Store) enter() error {
	if !s.dbMu.TryRLock() {
		return eventstore.ErrClosed
	}
	return nil
}

func (s *Store) leave() { s.dbMu.RUnlock() }

// Fsyncs counts the fsync calls made on the store's files since Open.
func (s *Store) Fsyncs() uint64 { return s.fs.syncs.Load() }

// Metrics exposes Pebble's metrics for diagnostics.
func (s *Store) Metrics() *pebble.Metrics { return s.db.Metrics() }

// Limits returns the limits in force.
func (s *Store) Limits() eventstore.Limits { return s.limits.Limits }

// Healthy is nil, or the write failure that made the store refuse every
// append until it is reopened (eventstore.Healthy).
func (s *Store) Healthy() error { return s.failure() }

func (s *Store) failure() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// fail records a write failure. After a failed WAL write or fsync the
// store's state on disk is unknown, so it refuses every later append; the
// process should restart and recover from the directory.
func (s *Store) fail(err error) {
	err = fmt.Errorf("pebblestore: write failed, store unusable until reopened: %w", err)
	s.failed.CompareAndSwap(nil, &err)
	s.opts.Logger.Error("event store write failed", "err", err)
}

// countingFS counts fsyncs, so that benchmarks can report how well group
// commit shares them. It also keeps Pebble from panicking when a new WAL
// file cannot be made (see walFailed).
type countingFS struct {
	vfs.FS
	syncs atomic.Uint64
	// walFailed, once set (after open), is told that a WAL file could
	// not be created.
	walFailed atomic.Pointer[func(error)]
	// dir is the store's directory: a file created elsewhere (a
	// checkpoint's copy of a WAL) is not the store's WAL.
	dir string
}

// walCreate handles the outcome of creating (or recycling) a WAL file.
// Pebble v2 cannot survive that failure: it panics in DB.rotateWAL with
// its mutex in a state no recover can mend, and the process dies. A disk
// that cannot make a file is a failed disk, so the store fails — every
// later append is refused, Healthy (and /healthz) says so — and the write
// path that asked for the file parks here instead of returning the error
// to Pebble: the process keeps serving reads, refuses writes, and exits
// when told (Close gives up waiting for the parked path).
func (fs *countingFS) walCreate(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil && strings.HasSuffix(name, ".log") && filepath.Clean(fs.FS.PathDir(name)) == fs.dir {
		if failed := fs.walFailed.Load(); failed != nil {
			(*failed)(fmt.Errorf("creating WAL file %s: %w", name, err))
			select {}
		}
	}
	return fs.wrap(f, err)
}

func (fs *countingFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	return &countingFile{File: f, n: &fs.syncs}, nil
}

func (fs *countingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.walCreate(name, f, err)
}

func (fs *countingFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.walCreate(newname, f, err)
}

func (fs *countingFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, o ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, c, o...))
}

type countingFile struct {
	vfs.File
	n *atomic.Uint64
}

func (f *countingFile) Sync() error     { f.n.Add(1); return f.File.Sync() }
func (f *countingFile) SyncData() error { f.n.Add(1); return f.File.SyncData() }
func (f *countingFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	if full {
		f.n.Add(1)
	}
	return full, err
}

func (s *Store) now() time.Time { return s.opts.Clock() }

func checkCtx(ctx context.Context) error {
	if ctx == nil {
		return nil
	}
	return ctx.Err()
}

// ctxDone is ctx's Done channel; nil, which never delivers, for a nil ctx.
func ctxDone(ctx context.Context) <-chan struct{} {
	if ctx == nil {
		return nil
	}
	return ctx.Done()
}
