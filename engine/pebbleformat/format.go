// Package pebbleformat claims a Pebble database for one use: logbook keeps
// a format marker in every database it creates, so that a store is never
// opened as a view (or an old format by a new build) and misread.
package pebbleformat

import (
	"errors"
	"fmt"

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
