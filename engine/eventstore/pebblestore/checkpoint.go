package pebblestore

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Checkpoint writes a consistent copy of the store into dir, which must
// not exist, while the store serves reads and appends, and returns the
// position of the last event the copy holds. It is Pebble's checkpoint:
// the WAL is synced first, then the tables are hard-linked (copied when
// dir is on another file system) and the WAL and manifest copied as they
// stand. The copy is what a crash at that instant would have left: every
// append acknowledged before the call is in it, and every append is in
// it whole or not at all (a group of appends is one Pebble batch, and a
// batch is replayed whole or not at all); appends still waiting for their
// fsync may be in it too. Open the copy with Open, or check it with
// Verify.
//
// A hard-linked table shares the disk with the store: keep backups on
// another disk (copy the directory, or give a dir there), or they are no
// defence against losing it.
func (s *Store) Checkpoint(dir string) (uint64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return 0, fmt.Errorf("pebblestore: checkpoint into %s: %w", dir, err)
	}
	pos, err := Head(dir)
	if err != nil {
		return 0, fmt.Errorf("pebblestore: checkpoint into %s: %w", dir, err)
	}
	return pos, nil
}

// Head opens the store in dir read-only and returns the position of its
// last event. No process may have it open.
func Head(dir string) (uint64, error) {
	db, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, Logger: quietLogger{}})
	if err != nil {
		if errors.Is(err, pebble.ErrDBDoesNotExist) {
			return 0, fmt.Errorf("%s: %w", dir, ErrNotStore)
		}
		return 0, err
	}
	defer db.Close()
	got, closer, err := db.Get(formatKey)
	if err != nil {
		if errors.Is(err, pebble.ErrNotFound) {
			return 0, fmt.Errorf("%s: %w", dir, ErrNotStore)
		}
		return 0, err
	}
	format := string(got)
	_ = closer.Close()
	if format != formatVersion {
		return 0, fmt.Errorf("%s: %w (format %q)", dir, ErrNotStore, format)
	}
	iter, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixEvent}, UpperBound: []byte{prefixEvent + 1}})
	if err != nil {
		return 0, err
	}
	var last uint64
	if iter.Last() {
		last = be64(iter.Key()[1:])
	}
	return last, iter.Close()
}

// quietLogger drops Pebble's messages; its errors come back as errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
