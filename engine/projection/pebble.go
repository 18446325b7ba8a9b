package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/pebblekit"
)

// PebbleView is the storage of a durable view: a Pebble database of its
// own, where each Apply hands the view's update function one batch, adds
// the checkpoint to the same batch and commits it. Pebble applies a batch
// whole or not at all, also when replaying its WAL after a crash, so the
// view's state and its checkpoint never part: exactly-once by the first
// strategy of the package documentation.
//
// Keys starting with byte 0x00 are the runtime's; the view's own keys must
// not.
type PebbleView struct {
	db     *pebble.DB
	update func(b *pebble.Batch, events []eventstore.Event) error
	write  *pebble.WriteOptions

	mu     sync.Mutex // serializes Apply and Close
	pos    uint64     // the committed checkpoint, guarded by mu
	closed bool
}

// PebbleOptions configure a PebbleView.
type PebbleOptions struct {
	// Sync makes each Apply wait for its batch to reach the disk. Exactly-
	// once does not need it: a crash can only lose the newest batches,
	// state and checkpoint together, and the runner applies them again.
	// It saves that replay after a machine crash, for an fsync per batch.
	Sync bool
	// Logger receives Pebble's errors (default slog.Default()).
	Logger *slog.Logger
	// Tune, if set, adjusts Pebble's options before the database opens:
	// a view that writes much (a windowed aggregation) wants a larger
	// memtable and more room in level 0 than the defaults give.
	Tune func(*pebble.Options)
}

var (
	checkpointKey = []byte("\x00checkpoint")
	viewFormatKey = []byte("\x00format")
	viewFormat    = "logbook-view-1"
)

// OpenPebbleView opens (creating if needed) the view database in dir.
// Apply calls update with an indexed batch, whose reads see the batch's
// own writes over the committed state: update writes the effect of events
// into it and must not commit or close it. An error from update discards
// the whole batch.
func OpenPebbleView(dir string, opts PebbleOptions, update func(b *pebble.Batch, events []eventstore.Event) error) (*PebbleView, error) {
	if update == nil {
		return nil, errors.New("projection: open view: no update function")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	popts := &pebble.Options{
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebblekit.Logger(opts.Logger, "view"),
		FS:                 pebblekit.YieldingFS(vfs.Default),
	}
	if opts.Tune != nil {
		opts.Tune(popts)
	}
	db, err := pebble.Open(dir, popts)
	if err != nil {
		return nil, fmt.Errorf("projection: open view %s: %w", dir, err)
	}
	v := &PebbleView{db: db, update: update, write: pebble.NoSync}
	if opts.Sync {
		v.write = pebble.Sync
	}
	if err := v.load(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("projection: open view %s: %w", dir, err)
	}
	return v, nil
}

// load checks the format marker and reads the checkpoint.
func (v *PebbleView) load() error {
	if err := pebblekit.Claim(v.db, viewFormatKey, viewFormat, "view"); err != nil {
		return err
	}
	var err error
	v.pos, err = pebblekit.ReadCheckpoint(v.db, checkpointKey)
	return err
}

// Checkpoint implements View.
func (v *PebbleView) Checkpoint(context.Context) (uint64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.pos, nil
}

// Apply implements View: the update function's writes and the checkpoint
// in one batch, one commit.
func (v *PebbleView) Apply(_ context.Context, batch []eventstore.Event) error {
	if len(batch) == 0 {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return fmt.Errorf("projection: apply to a closed view: %w", pebble.ErrClosed)
	}
	b := v.db.NewIndexedBatch()
	defer b.Close()
	if err := v.update(b, batch); err != nil {
		return err
	}
	last := batch[len(batch)-1].Position
	var cp [8]byte
	// Set last: should update have touched the key, this write wins.
	if err := b.Set(checkpointKey, pebblekit.AppendCheckpoint(cp[:0], last), nil); err != nil {
		return err
	}
	if err := b.Commit(v.write); err != nil {
		return fmt.Errorf("commit view batch: %w", err)
	}
	v.pos = last
	return nil
}

// Reset empties the view — every key of the view's own and the
// checkpoint, so that a runner rebuilds it from the start of the log —
// and writes what mark writes, in one synced batch. A view whose stored
// format its build no longer reads uses it to start again (views are
// projections: the log is the migration). No Apply may run meanwhile.
func (v *PebbleView) Reset(mark func(b *pebble.Batch) error) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return fmt.Errorf("projection: reset a closed view: %w", pebble.ErrClosed)
	}
	b := v.db.NewBatch()
	defer b.Close()
	// A range tombstone up to 0xff, and keys at or past it one by one
	// (there is no largest key to end a range with).
	if err := b.DeleteRange([]byte{1}, []byte{0xff}, nil); err != nil {
		return err
	}
	it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: []byte{0xff}})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		if err := b.Delete(it.Key(), nil); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	if err := b.Delete(checkpointKey, nil); err != nil {
		return err
	}
	if mark != nil {
		if err := mark(b); err != nil {
			return err
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("projection: reset view: %w", err)
	}
	v.pos = 0
	return nil
}

// Read calls fn with a consistent snapshot of the view and the checkpoint
// it reflects. fn must not close r. Reads may run during Apply; they see
// each batch entirely or not at all.
func (v *PebbleView) Read(fn func(r pebble.Reader, pos uint64) error) error {
	snap := v.db.NewSnapshot()
	defer snap.Close()
	pos, err := pebblekit.ReadCheckpoint(snap, checkpointKey)
	if err != nil {
		return fmt.Errorf("projection: read view checkpoint: %w", err)
	}
	return fn(snap, pos)
}

// Backup writes a consistent copy of the view into dir, which must not
// exist (Pebble's checkpoint, its WAL synced first), and returns the
// checkpoint the copy holds: state and checkpoint are copied together,
// Apply waiting meanwhile. A view opened from the copy resumes from that
// checkpoint. Taken before a backup of the log, the view's checkpoint is
// at or below the log's position in it, so the restored view catches up
// from the restored log and never holds the effect of an event the log
// lacks.
func (v *PebbleView) Backup(dir string) (uint64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return 0, fmt.Errorf("projection: back up a closed view: %w", pebble.ErrClosed)
	}
	if err := v.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return 0, fmt.Errorf("projection: back up view into %s: %w", dir, err)
	}
	return v.pos, nil
}

// Close closes the database. No Read may be running or start after.
func (v *PebbleView) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	v.closed = true
	return v.db.Close()
}
