package shred

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/logbook/logbook/engine/pebblekit"
)

// DirOptions configure a keyring in a directory.
type DirOptions struct {
	Options
	// Logger receives Pebble's errors (default slog.Default()).
	Logger *slog.Logger
	// FS is the file system (default the operating system's; tests give
	// one that simulates a power cut).
	FS vfs.FS
}

// The directory's keys: meta keys start with 0x00, a subject's record is
// 'k' and its keyed hash.
var (
	dirFormatKey = []byte("\x00format")
	dirCheckKey  = []byte("\x00check")
)

const dirFormat = "logbook-shred-1"

func dirKey(h hash) []byte { return append([]byte{'k'}, h[:]...) }

// OpenDir opens (creating if needed) a keyring in dir, a Pebble database
// of its own — beside an embedded store's data directory, not in it, so
// that a backup of the log can be taken without the keys. A keyring
// whose keys were wrapped under another master key is ErrWrongMasterKey.
//
// The database runs without a write-ahead log: every write is made
// durable by flushing it into a table (fsynced, with the manifest that
// names it), so that no recycled log file keeps a destroyed key's bytes,
// and forgetting compacts the key's range, so that the table that held
// the key is rewritten without it and deleted.
func OpenDir(ctx context.Context, dir string, master MasterKey, opts DirOptions) (*Keyring, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	popts := &pebble.Options{
		FS:                 opts.FS,
		DisableWAL:         true,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebblekit.Logger(opts.Logger, "keyring"),
		ErrorIfNotExists:   opts.Existing,
	}
	db, err := pebble.Open(dir, popts)
	if err != nil && opts.Existing && errors.Is(err, pebble.ErrDBDoesNotExist) {
		return nil, fmt.Errorf("open keyring %s: %w", dir, ErrNoKeyring)
	}
	if err != nil {
		return nil, fmt.Errorf("shred: open keyring %s: %w", dir, err)
	}
	b := &dirBackend{db: db}
	if err := b.claim(opts.Existing); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("shred: open keyring %s: %w", dir, err)
	}
	k, err := newKeyring(ctx, b, master, opts.Options)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("shred: open keyring %s: %w", dir, err)
	}
	return k, nil
}

type dirBackend struct{ db *pebble.DB }

func (b *dirBackend) getOne(k []byte) ([]byte, error) {
	v, closer, err := b.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

// claim checks the format marker, or writes it in an empty database
// (pebblekit.Claim's rule, durable by a flush as there is no WAL).
func (b *dirBackend) claim(existing bool) error {
	got, err := b.getOne(dirFormatKey)
	switch {
	case err != nil:
		return err
	case got == nil && existing:
		return ErrNoKeyring
	case got == nil:
		iter, err := b.db.NewIter(nil)
		if err != nil {
			return err
		}
		empty := !iter.First()
		if err := iter.Close(); err != nil {
			return err
		}
		if !empty {
			return errors.New("directory holds a Pebble database that is not a logbook keyring")
		}
		if err := b.db.Set(dirFormatKey, []byte(dirFormat), pebble.NoSync); err != nil {
			return err
		}
		return b.db.Flush()
	case string(got) != dirFormat:
		return fmt.Errorf("keyring format %q, this build reads %q", got, dirFormat)
	}
	return nil
}

func (b *dirBackend) check(_ context.Context, v []byte) ([]byte, error) {
	got, err := b.getOne(dirCheckKey)
	if err != nil || got != nil {
		return got, err
	}
	if err := b.db.Set(dirCheckKey, v, pebble.NoSync); err != nil {
		return nil, err
	}
	return v, b.db.Flush()
}

func (b *dirBackend) get(ctx context.Context, hs []hash) (map[hash][]byte, error) {
	out := make(map[hash][]byte, len(hs))
	for i, h := range hs {
		if i%4096 == 4095 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		v, err := b.getOne(dirKey(h))
		if err != nil {
			return nil, err
		}
		if v != nil {
			out[h] = v
		}
	}
	return out, nil
}

// create runs under the keyring's write lock, the only writer.
func (b *dirBackend) create(ctx context.Context, recs map[hash][]byte) (map[hash][]byte, error) {
	hs := make([]hash, 0, len(recs))
	for h := range recs {
		hs = append(hs, h)
	}
	stored, err := b.get(ctx, hs)
	if err != nil {
		return nil, err
	}
	batch := b.db.NewBatch()
	defer batch.Close()
	for h, v := range recs {
		if _, ok := stored[h]; ok {
			continue
		}
		if err := batch.Set(dirKey(h), v, nil); err != nil {
			return nil, err
		}
		stored[h] = v
	}
	if batch.Empty() {
		return stored, nil
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		return nil, err
	}
	// Without a WAL, the flush is what makes the keys durable.
	return stored, b.db.Flush()
}

func (b *dirBackend) bury(ctx context.Context, h hash, tomb []byte) error {
	k := dirKey(h)
	if err := b.db.Set(k, tomb, pebble.NoSync); err != nil {
		return err
	}
	if err := b.db.Flush(); err != nil {
		return err
	}
	// Rewrite every table holding the key's range down to the last
	// level: the key's old value is dropped, its tables deleted.
	return b.db.Compact(ctx, k, append(k, 0), false)
}

func (b *dirBackend) close() error { return b.db.Close() }
