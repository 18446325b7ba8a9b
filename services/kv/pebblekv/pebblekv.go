// Package pebblekv is the embedded backend of the kv repository: one Pebble
// database in a data directory, owned by one process.
//
// Each key is one Pebble key, 'v' followed by the id, whose value is the
// version (8 bytes, big-endian) followed by the user's value. Ids are
// paths without control characters, so the keys under "a" — "a/…" — are
// the contiguous range ['v' "a/", 'v' "a0"), and a cascading delete is one
// range deletion.
//
// A value of 1 MiB or more is written once, to a file of its own under
// blobs/ (synced, with the directory, before the request reaches the
// committer), and the key's record holds its name, the version's top bit
// set; a small value would be written twice anyway (WAL and table), a
// large one twice is what limits large writes to half the disk's
// bandwidth. A file whose record is replaced or deleted is removed after
// that commit; files no record names (a crash between a file's write and
// its commit, or before a removal) are removed at open.
//
// One goroutine, the committer, performs every write: it takes all
// requests waiting, checks their versions (against what it wrote in the
// same group, else the database), writes them as one batch and commits it
// with one fsync (group commit), then answers them only after the fsync.
// Pebble makes a batch visible to reads once it is in the memtable, which
// may be just before its fsync completes; since the committer is the only
// writer every compare-and-set is exact. A failed WAL write or fsync
// stops the backend taking writes until it is reopened, and Healthy says
// so.
package pebblekv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/logbook/logbook/engine/pebblekit"
	"github.com/logbook/logbook/services/kv"
)

const (
	prefixValue  = 'v'
	formatKey    = "mformat"
	formatMarker = "logbook-kv-1"
	// maxGroup bounds how many requests one batch carries.
	maxGroup = 4096
	// blobMin is the size from which a value goes to a file of its own.
	blobMin = 1 << 20
	// blobFlag marks, in a record's version, a value kept in a blob file.
	blobFlag = uint64(1) << 63
	blobDir  = "blobs"
)

// Options configure the backend.
type Options struct {
	// NoSync acknowledges writes before their fsync (Pebble's NoSync): a
	// crash may lose the last acknowledged writes. For benchmarks of the
	// persistence mode; never the default.
	NoSync bool
	// CacheBytes is Pebble's block cache (default 256 MiB, filled only as
	// blocks are read). Every add and compare-and-set reads the key's
	// version first, and for a new key that means a bloom filter block of
	// each table that might hold it: under a fast write load level 0
	// holds many tables, and with 64 or 128 MiB their filter blocks did
	// not stay cached — each check read and checksummed them from the
	// file again, which was most of the CPU of a put (docs/benchmarks.md,
	// "Figures behind choices in the code").
	CacheBytes int64
	// FS is the file system Pebble uses (default the operating system's);
	// the fault tests give it one that fails chosen operations. Blob
	// files are written with the os package.
	FS vfs.FS
}

// Backend is the embedded kv backend.
type Backend struct {
	blobs   string // the blob files' directory
	db      *pebble.DB
	opts    Options
	reqs    chan *request
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
	mu      sync.RWMutex // held for reading while a request is sent
	closed  bool
	failed  atomic.Pointer[error] // the commit failure that stopped writes
}

type opKind int

const (
	opAdd opKind = iota
	opUpdate
	opDelete
)

type request struct {
	kind     opKind
	items    []kv.Item // opDelete: one item, its id and version
	blobs    []string  // per item: the blob file holding its value, or ""
	versions []uint64
	err      error
	done     chan struct{}
}

// Open opens (creating if needed) the database in dir.
func Open(dir string, opts Options) (*Backend, error) {
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 256 << 20
	}
	cache := pebble.NewCache(opts.CacheBytes)
	defer cache.Unref()
	popts := &pebble.Options{Cache: cache, MemTableSize: 64 << 20, FormatMajorVersion: pebble.FormatNewest, Logger: pebblekit.Logger(slog.Default(), "kv"), FS: opts.FS}
	popts.EnsureDefaults()
	for i := range popts.Levels {
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, popts)
	if err != nil {
		return nil, fmt.Errorf("pebblekv: open %s: %w", dir, err)
	}
	if err := pebblekit.Claim(db, []byte(formatKey), formatMarker, "kv database"); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("pebblekv: open %s: %w", dir, err)
	}
	b := &Backend{db: db, opts: opts, blobs: filepath.Join(dir, blobDir), reqs: make(chan *request, 1024), done: make(chan struct{}), stopped: make(chan struct{})}
	if err := b.collectBlobs(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("pebblekv: open %s: %w", dir, err)
	}
	go b.commit()
	return b, nil
}

// collectBlobs creates the blob directory, and removes the files in it no
// record names. It reads every record, but only when there are files.
func (b *Backend) collectBlobs() error {
	if err := os.MkdirAll(b.blobs, 0o755); err != nil {
		return err
	}
	names, err := os.ReadDir(b.blobs)
	if err != nil || len(names) == 0 {
		return err
	}
	named := map[string]bool{}
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixValue}, UpperBound: []byte{prefixValue + 1}})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		if v := it.Value(); len(v) >= 8 && binary.BigEndian.Uint64(v)&blobFlag != 0 {
			named[string(v[8:])] = true
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, n := range names {
		if !named[n.Name()] {
			if err := os.Remove(filepath.Join(b.blobs, n.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeBlobs writes the request's large values to files of their own,
// synced, and the directory once: a record that names a file is never
// committed before the file is on disk.
func (b *Backend) writeBlobs(r *request) error {
	for i, it := range r.items {
		if len(it.Value) < blobMin {
			continue
		}
		if r.blobs == nil {
			r.blobs = make([]string, len(r.items))
		}
		var rnd [16]byte
		_, _ = rand.Read(rnd[:])
		name := hex.EncodeToString(rnd[:])
		if err := writeSynced(filepath.Join(b.blobs, name), it.Value); err != nil {
			b.removeBlobs(r.blobs)
			return fmt.Errorf("%w: pebblekv: blob: %w", kv.ErrUnavailable, err)
		}
		r.blobs[i] = name
	}
	if r.blobs == nil {
		return nil
	}
	d, err := os.Open(b.blobs)
	if err == nil {
		err = d.Sync()
		_ = d.Close()
	}
	if err != nil {
		b.removeBlobs(r.blobs)
		return fmt.Errorf("%w: pebblekv: blob directory: %w", kv.ErrUnavailable, err)
	}
	return nil
}

// AddFrom adds the key with its value read from src: a value of blobMin
// bytes or more is copied to its blob file as it is read, so the backend
// holds blobMin bytes of it at most.
func (b *Backend) AddFrom(ctx context.Context, id string, src io.Reader) error {
	r, err := b.fromStream(id, 0, src)
	if err != nil {
		return err
	}
	r.kind = opAdd
	_, err = b.do(ctx, r)
	return err
}

// UpdateFrom compares-and-sets the key with its value read from src, as
// AddFrom.
func (b *Backend) UpdateFrom(ctx context.Context, id string, version uint64, src io.Reader) (uint64, error) {
	r, err := b.fromStream(id, version, src)
	if err != nil {
		return 0, err
	}
	r.kind = opUpdate
	vs, err := b.do(ctx, r)
	if err != nil {
		return 0, err
	}
	return vs[0], nil
}

// fromStream reads a value: the first blobMin bytes into memory and, if
// there are more, all of it into a new blob file, synced with its
// directory. The request names the file; nothing of a failed read stays.
func (b *Backend) fromStream(id string, version uint64, src io.Reader) (*request, error) {
	head := make([]byte, blobMin)
	n, err := io.ReadFull(src, head)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return &request{items: []kv.Item{{ID: id, Version: version, Value: head[:n]}}}, nil
	case err != nil:
		return nil, err
	}
	var rnd [16]byte
	_, _ = rand.Read(rnd[:])
	name := hex.EncodeToString(rnd[:])
	path := filepath.Join(b.blobs, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: pebblekv: blob: %w", kv.ErrUnavailable, err)
	}
	failed := func(err error) (*request, error) {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, err
	}
	if _, err := f.Write(head); err != nil {
		return failed(fmt.Errorf("%w: pebblekv: blob: %w", kv.ErrUnavailable, err))
	}
	// The copy reads src into head again: no second buffer. A write
	// error is the disk's; a read error, the stream's.
	if _, err := io.CopyBuffer(onlyWriter{f}, onlyReader{src}, head); err != nil {
		var we *writeError
		if errors.As(err, &we) {
			return failed(fmt.Errorf("%w: pebblekv: blob: %w", kv.ErrUnavailable, we.err))
		}
		return failed(err)
	}
	if err := f.Sync(); err != nil {
		return failed(fmt.Errorf("%w: pebblekv: blob: %w", kv.ErrUnavailable, err))
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("%w: pebblekv: blob: %w", kv.ErrUnavailable, err)
	}
	d, err := os.Open(b.blobs)
	if err == nil {
		err = d.Sync()
		_ = d.Close()
	}
	if err != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("%w: pebblekv: blob directory: %w", kv.ErrUnavailable, err)
	}
	return &request{items: []kv.Item{{ID: id, Version: version}}, blobs: []string{name}}, nil
}

// onlyWriter hides the file's ReadFrom (which would bring its own
// buffer) and marks its failures apart from the source's.
type onlyWriter struct{ f *os.File }

type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }

func (w onlyWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil {
		err = &writeError{err}
	}
	return n, err
}

// onlyReader hides a source's WriteTo, for the same reason.
type onlyReader struct{ r io.Reader }

func (r onlyReader) Read(p []byte) (int, error) { return r.r.Read(p) }

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// removeBlobs removes blob files no committed record names. A failure
// leaves a file for the next open to collect.
func (b *Backend) removeBlobs(names []string) {
	for _, n := range names {
		if n != "" {
			_ = os.Remove(filepath.Join(b.blobs, n))
		}
	}
}

// claim checks the format marker, writing it into an empty database.
func key(id string) []byte {
	k := make([]byte, 1+len(id))
	k[0] = prefixValue
	copy(k[1:], id)
	return k
}

// Get reads the key.
func (b *Backend) Get(ctx context.Context, id string) (kv.Entry, bool, error) {
	// A large value's file may be removed between reading its record and
	// opening it, by an update that replaced it: read the record again.
	for range 100 {
		e, ok, err := b.get(id)
		if !errors.Is(err, fs.ErrNotExist) {
			return e, ok, err
		}
		if err := ctx.Err(); err != nil {
			return kv.Entry{}, false, err
		}
	}
	return kv.Entry{}, false, fmt.Errorf("%w: pebblekv: the value of %q keeps changing under the read", kv.ErrUnavailable, id)
}

func (b *Backend) get(id string) (kv.Entry, bool, error) {
	v, closer, err := b.db.Get(key(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return kv.Entry{}, false, nil
	}
	if err != nil {
		return kv.Entry{}, false, err
	}
	defer closer.Close()
	if len(v) < 8 {
		return kv.Entry{}, false, fmt.Errorf("pebblekv: corrupt record of %q", id)
	}
	ver := binary.BigEndian.Uint64(v)
	if ver&blobFlag != 0 {
		value, err := os.ReadFile(filepath.Join(b.blobs, string(v[8:])))
		if err != nil {
			return kv.Entry{}, false, err
		}
		return kv.Entry{ID: id, Version: ver &^ blobFlag, Value: value}, true, nil
	}
	return kv.Entry{ID: id, Version: ver, Value: append([]byte(nil), v[8:]...)}, true, nil
}

// Open reads the key as a stream: a large value from its own file, which
// is read as the caller consumes it (a file removed after it was opened,
// by an update that replaced its value, stays readable until closed).
func (b *Backend) Open(ctx context.Context, id string) (kv.Reader, bool, error) {
	for range 100 {
		rd, ok, err := b.open(id)
		if !errors.Is(err, fs.ErrNotExist) {
			return rd, ok, err
		}
		if err := ctx.Err(); err != nil {
			return kv.Reader{}, false, err
		}
	}
	return kv.Reader{}, false, fmt.Errorf("%w: pebblekv: the value of %q keeps changing under the read", kv.ErrUnavailable, id)
}

func (b *Backend) open(id string) (kv.Reader, bool, error) {
	v, closer, err := b.db.Get(key(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return kv.Reader{}, false, nil
	}
	if err != nil {
		return kv.Reader{}, false, err
	}
	defer closer.Close()
	if len(v) < 8 {
		return kv.Reader{}, false, fmt.Errorf("pebblekv: corrupt record of %q", id)
	}
	ver := binary.BigEndian.Uint64(v)
	if ver&blobFlag == 0 {
		value := append([]byte(nil), v[8:]...)
		return kv.Reader{ID: id, Version: ver, Size: int64(len(value)), ReadCloser: io.NopCloser(bytes.NewReader(value))}, true, nil
	}
	f, err := os.Open(filepath.Join(b.blobs, string(v[8:])))
	if err != nil {
		return kv.Reader{}, false, err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return kv.Reader{}, false, err
	}
	return kv.Reader{ID: id, Version: ver &^ blobFlag, Size: st.Size(), ReadCloser: f}, true, nil
}

// Healthy is nil, or the commit failure after which the backend refuses
// every write until it is reopened.
func (b *Backend) Healthy() error {
	if p := b.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Add adds the items atomically.
func (b *Backend) Add(ctx context.Context, items []kv.Item) error {
	_, err := b.do(ctx, &request{kind: opAdd, items: items})
	return err
}

// Update compares-and-sets the items atomically.
func (b *Backend) Update(ctx context.Context, items []kv.Item) ([]uint64, error) {
	return b.do(ctx, &request{kind: opUpdate, items: items})
}

// Delete deletes the key and everything under it.
func (b *Backend) Delete(ctx context.Context, id string, version uint64) error {
	_, err := b.do(ctx, &request{kind: opDelete, items: []kv.Item{{ID: id, Version: version}}})
	return err
}

var errClosed = fmt.Errorf("%w: pebblekv: closed", kv.ErrUnavailable)

func (b *Backend) do(ctx context.Context, r *request) ([]uint64, error) {
	r.done = make(chan struct{})
	if r.kind != opDelete && r.blobs == nil { // a streamed value's file is written
		if err := b.writeBlobs(r); err != nil {
			return nil, err
		}
	}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		b.removeBlobs(r.blobs)
		return nil, errClosed
	}
	select {
	case b.reqs <- r:
		b.mu.RUnlock()
	case <-ctx.Done():
		b.mu.RUnlock()
		b.removeBlobs(r.blobs)
		return nil, ctx.Err()
	}
	// Once sent, the request is answered: waiting for it keeps the
	// result exact (a write never happens after its caller gave up on it
	// without the caller knowing it may have).
	select {
	case <-r.done:
		return r.versions, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w (the write may still take effect)", ctx.Err())
	}
}

// Close stops the committer after the requests sent and closes the
// database.
func (b *Backend) Close() error {
	b.once.Do(func() {
		b.mu.Lock()
		b.closed = true
		close(b.reqs)
		b.mu.Unlock()
	})
	<-b.stopped
	return b.db.Close()
}

// state is what a group has written so far: versions by id (0: deleted).
type group struct {
	b       *Backend
	batch   *pebble.Batch
	written map[string]uint64
	// refs is the blob file each id's record names as this group left it
	// or read it ("" none); obsolete, the files its writes replaced.
	refs     map[string]string
	obsolete []string
	deleted  []string // ids deleted in this group with their subtrees
	reqs     []*request
}

// version returns the id's current version (0 if absent), seeing this
// group's own writes.
func (g *group) version(id string) (uint64, error) {
	if v, ok := g.written[id]; ok {
		return v, nil
	}
	for _, d := range g.deleted {
		if len(id) > len(d) && id[:len(d)] == d && id[len(d)] == '/' {
			return 0, nil
		}
	}
	v, closer, err := g.b.db.Get(key(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) < 8 {
		return 0, fmt.Errorf("pebblekv: corrupt record of %q", id)
	}
	ver := binary.BigEndian.Uint64(v)
	if ver&blobFlag != 0 {
		g.refs[id] = string(v[8:])
	}
	return ver &^ blobFlag, nil
}

// replaced notes that id's record is overwritten or deleted in this
// group: the blob file it named, if any, goes after the commit.
func (g *group) replaced(id string) {
	if old := g.refs[id]; old != "" {
		g.obsolete = append(g.obsolete, old)
	}
	delete(g.refs, id)
}

func (g *group) put(id string, version uint64, value []byte, blob string) error {
	g.replaced(id)
	if blob != "" {
		version |= blobFlag
		value = []byte(blob)
		g.refs[id] = blob
	}
	k := key(id)
	op := g.batch.SetDeferred(len(k), 8+len(value))
	copy(op.Key, k)
	binary.BigEndian.PutUint64(op.Value, version)
	copy(op.Value[8:], value)
	op.Finish()
	g.written[id] = version &^ blobFlag
	return nil
}

func (r *request) blob(i int) string {
	if r.blobs == nil {
		return ""
	}
	return r.blobs[i]
}

// apply checks one request against the group's state and, if it holds,
// adds its writes to the batch. A failed request leaves no trace.
func (g *group) apply(r *request) error {
	switch r.kind {
	case opAdd:
		for i, it := range r.items {
			v, err := g.version(it.ID)
			if err != nil {
				return err
			}
			if v != 0 {
				return &kv.BatchError{Index: i, Err: kv.Exists(it.ID)}
			}
		}
		for i, it := range r.items {
			_ = g.put(it.ID, 1, it.Value, r.blob(i))
		}
		r.versions = nil
	case opUpdate:
		for i, it := range r.items {
			v, err := g.version(it.ID)
			if err != nil {
				return err
			}
			if v == 0 {
				return &kv.BatchError{Index: i, Err: kv.NotFound(it.ID)}
			}
			if v != it.Version {
				return &kv.BatchError{Index: i, Err: kv.Stale(it.ID, it.Version, v)}
			}
		}
		r.versions = make([]uint64, len(r.items))
		for i, it := range r.items {
			r.versions[i] = it.Version + 1
			_ = g.put(it.ID, it.Version+1, it.Value, r.blob(i))
		}
	case opDelete:
		it := r.items[0]
		v, err := g.version(it.ID)
		if err != nil {
			return err
		}
		if v == 0 {
			return kv.NotFound(it.ID)
		}
		if v != it.Version {
			return kv.Stale(it.ID, it.Version, v)
		}
		if err := g.batch.Delete(key(it.ID), nil); err != nil {
			return err
		}
		lo, hi := key(it.ID+"/"), key(it.ID+"0")
		// The subtree's blob files, as stored (the batch's own writes are
		// in refs, below).
		iter, err := g.b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return err
		}
		for iter.First(); iter.Valid(); iter.Next() {
			if v := iter.Value(); len(v) >= 8 && binary.BigEndian.Uint64(v)&blobFlag != 0 {
				if id := string(iter.Key()[1:]); g.written[id] == 0 {
					g.refs[id] = string(v[8:])
				}
			}
		}
		if err := iter.Close(); err != nil {
			return err
		}
		if err := g.batch.DeleteRange(lo, hi, nil); err != nil {
			return err
		}
		g.written[it.ID] = 0
		g.replaced(it.ID)
		for id := range g.written {
			if len(id) > len(it.ID) && id[:len(it.ID)] == it.ID && id[len(it.ID)] == '/' {
				g.written[id] = 0
			}
		}
		for id := range g.refs {
			if len(id) > len(it.ID) && id[:len(it.ID)] == it.ID && id[len(it.ID)] == '/' {
				g.replaced(id)
			}
		}
		g.deleted = append(g.deleted, it.ID)
	}
	return nil
}

// commit is the committer goroutine.
func (b *Backend) commit() {
	defer close(b.stopped)
	var failed error
	for r := range b.reqs {
		g := &group{b: b, batch: b.db.NewBatch(), written: make(map[string]uint64), refs: make(map[string]string)}
		g.take(r, failed)
	more:
		for len(g.reqs) < maxGroup {
			select {
			case r, ok := <-b.reqs:
				if !ok {
					break more
				}
				g.take(r, failed)
			default:
				break more
			}
		}
		if failed == nil && !g.batch.Empty() {
			var err error
			if b.opts.NoSync {
				err = g.batch.Commit(pebble.NoSync)
			} else if err = b.db.ApplyNoSyncWait(g.batch, pebble.Sync); err == nil {
				// Pebble's Commit with Sync treats a failed WAL write
				// or fsync as fatal and ends the process; waiting for
				// the sync apart returns the failure, so the backend
				// can refuse writes and report it (Healthy).
				err = g.batch.SyncWait()
			}
			if err != nil {
				// What reached the disk is unknown: refuse every
				// later write rather than guess.
				failed = fmt.Errorf("%w: pebblekv: commit: %w (unusable until reopened)", kv.ErrUnavailable, err)
				b.failed.Store(&failed)
				slog.Error("kv: a commit failed; every later write is refused until the database is reopened", "err", failed.Error())
				for _, r := range g.reqs {
					if r.err == nil {
						r.err = failed
					}
				}
			}
		}
		_ = g.batch.Close()
		if failed == nil {
			// Committed: the files it replaced are unreferenced, and so
			// are those of the requests it refused. Without fsync
			// (NoSync) a crash may take the commit back to records that
			// name the replaced files, so those wait for the next open.
			if !b.opts.NoSync {
				b.removeBlobs(g.obsolete)
			}
			for _, r := range g.reqs {
				if r.err != nil {
					b.removeBlobs(r.blobs)
				}
			}
		}
		for _, r := range g.reqs {
			close(r.done)
		}
	}
}

// take applies a request to the group, keeping it to be answered after
// the commit.
func (g *group) take(r *request, failed error) {
	g.reqs = append(g.reqs, r)
	if failed != nil {
		r.err = failed
		return
	}
	if err := g.apply(r); err != nil {
		r.err = err
		r.versions = nil
	}
}
