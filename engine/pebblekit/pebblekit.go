// Package pebblekit holds what logbook's Pebble databases (the embedded
// event store, durable views, the users view of notify) share:
//
//   - Claim: the format marker every database carries, so that a store is
//     never opened as a view (or an old format by a new build) and misread;
//   - Logger: Pebble's log sent to a *slog.Logger;
//   - ReadCheckpoint and AppendCheckpoint: the position a view has applied,
//     a big-endian uint64 under a key of its own, written in the same
//     batch as the state it describes;
//   - YieldingFS: the tables a database writes yield to foreground work;
//   - SpareWALs: new write-ahead logs made from files already written and
//     synced, so that a log's fdatasync has no metadata to commit.
package pebblekit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
)

// Claim checks db's marker under key. An empty database is claimed: the
// marker want is written, synced. A database with marker want is accepted.
// Anything else — another marker, or data without one — is refused, with
// what (e.g. "store", "view") naming the use in the error.
func Claim(db *pebble.DB, key []byte, want, what string) error {
	got, closer, err := db.Get(key)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		iter, err := db.NewIter(nil)
		if err != nil {
			return err
		}
		empty := !iter.First()
		if err := iter.Close(); err != nil {
			return err
		}
		if !empty {
			return fmt.Errorf("directory holds a Pebble database that is not a logbook %s", what)
		}
		return db.Set(key, []byte(want), pebble.Sync)
	case err != nil:
		return err
	}
	format := string(got)
	_ = closer.Close()
	if format != want {
		return fmt.Errorf("%s format %q, this build reads %q", what, format, want)
	}
	return nil
}

// Logger returns a pebble.Logger that logs Pebble's errors to l, each
// message prefixed "pebble (what): ", and drops its informational
// messages (one per WAL at open, one per compaction). Fatalf, which
// Pebble calls on a state it cannot go on from, logs and then panics.
func Logger(l *slog.Logger, what string) pebble.Logger {
	return slogLogger{l: l, prefix: "pebble (" + what + "): "}
}

type slogLogger struct {
	l      *slog.Logger
	prefix string
}

func (p slogLogger) Infof(string, ...any) {}

func (p slogLogger) Errorf(format string, args ...any) {
	p.l.Error(p.prefix + fmt.Sprintf(format, args...))
}

func (p slogLogger) Fatalf(format string, args ...any) {
	msg := p.prefix + fmt.Sprintf(format, args...)
	p.l.Error(msg)
	panic(msg)
}

// ErrBadCheckpoint is a checkpoint value that is not 8 bytes.
var ErrBadCheckpoint = errors.New("malformed checkpoint")

// ReadCheckpoint reads the checkpoint under key: 0 if there is none (a
// fresh database), ErrBadCheckpoint if the value is not one.
func ReadCheckpoint(r pebble.Reader, key []byte) (uint64, error) {
	b, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: %d bytes under %q", ErrBadCheckpoint, len(b), key)
	}
	return binary.BigEndian.Uint64(b), nil
}

// AppendCheckpoint appends the encoding of pos that ReadCheckpoint reads
// to dst, for a batch's Set.
func AppendCheckpoint(dst []byte, pos uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, pos)
}
