package pebblestore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/verify"
	"github.com/logbook/logbook/engine/pebblekit"
)

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Logger receives Pebble's errors (default slog.Default()).
	Logger *slog.Logger
	// FS is the file system (default the operating system's).
	FS vfs.FS
}

// ErrNotStore is Verify's error for a directory that holds no store.
var ErrNotStore = errors.New("not a logbook event store")

// Verify checks the store in dir offline — no process may have it open:
// Pebble's directory lock refuses a second opener — and reports what is
// wrong. It opens the database read-only and writes nothing. The error is
// for a store it could not check at all (missing, locked, not a store);
// what is wrong inside a store is in the report.
//
// The checks, each a function of its own (verifyChecks):
//   - the format marker;
//   - the log: positions 1, 2, … without a gap, every record decodes,
//     and every event has its stream-index entry and its tag entries;
//   - the stream index: each stream's sequence numbers are 1, 2, 3, … in
//     log order (so its version, the last, is its event count), and each
//     entry names an event of that stream and sequence number;
//   - the tag index: each entry names an event carrying that tag;
//   - snapshots: none beyond its stream's version;
//   - checksums: every block of every table is read and its checksum
//     checked (Pebble's CheckLevels), and the LSM's internal order.
func Verify(dir string, opts VerifyOptions) (*verify.Report, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if _, err := opts.FS.Stat(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("pebblestore: verify %s: no such directory", dir)
		}
		return nil, fmt.Errorf("pebblestore: verify %s: %w", dir, err)
	}
	r := verify.New()
	// Pebble's default on a checksum failure is to log it as fatal and
	// panic; here it is what the check is looking for.
	var corruptMu sync.Mutex
	corrupted := map[string]bool{}
	db, err := pebble.Open(dir, &pebble.Options{
		FS:       opts.FS,
		ReadOnly: true,
		Logger:   pebblekit.Logger(opts.Logger, "verify"),
		EventListener: &pebble.EventListener{DataCorruption: func(info pebble.DataCorruptionInfo) {
			corruptMu.Lock()
			defer corruptMu.Unlock()
			if !corrupted[info.Path] {
				corrupted[info.Path] = true
				r.Add(verify.Corrupt, 0, "", "%s: %v", info.Path, info.Details)
			}
		}},
	})
	if err != nil {
		if errors.Is(err, pebble.ErrDBDoesNotExist) {
			return nil, fmt.Errorf("pebblestore: verify %s: %w (no Pebble database there)", dir, ErrNotStore)
		}
		return nil, fmt.Errorf("pebblestore: verify %s: %w (is a server using it? stop it, or verify a backup)", dir, err)
	}
	defer db.Close()
	got, closer, err := db.Get(formatKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return nil, fmt.Errorf("pebblestore: verify %s: %w (a Pebble database without the store's format marker)", dir, ErrNotStore)
	case pebble.IsCorruptionError(err):
		// The marker's block is damaged: check the rest all the same.
		r.Add(verify.Format, 0, "", "the format marker cannot be read: %v", err)
	case err != nil:
		return nil, fmt.Errorf("pebblestore: verify %s: %w", dir, err)
	default:
		format := string(got)
		_ = closer.Close()
		if format != formatVersion {
			return nil, fmt.Errorf("pebblestore: verify %s: %w (format %q, this build reads %q)", dir, ErrNotStore, format, formatVersion)
		}
	}
	var rm removed
	rm.floor, rm.truncated, err = removals(db)
	if err := corruption(r, 0, err); err != nil {
		return r, fmt.Errorf("pebblestore: verify %s: %w", dir, err)
	}
	for _, check := range verifyChecks {
		if err := check(db, rm, r); err != nil {
			return r, fmt.Errorf("pebblestore: verify %s: %w", dir, err)
		}
	}
	return r, nil
}

// A verifyCheck adds the problems of one invariant to r. Its error is
// for a check that could not run (an I/O error); a corrupt record is a
// problem, not an error.
type verifyCheck func(db *pebble.DB, rm removed, r *verify.Report) error

// removed is what deletion and retention left for the checks to know,
// read once per verify (see removals).
type removed struct {
	floor     uint64
	truncated map[string]uint64
}

// verifyChecks run in order: checkLog sets the head the others use.
var verifyChecks = []verifyCheck{checkLog, checkStreamIndex, checkTagIndex, checkSnapshots, checkBlocks}

// corruption reports err as a problem if it is a checksum or decoding
// failure, and returns it otherwise.
func corruption(r *verify.Report, pos uint64, err error) error {
	if err == nil {
		return nil
	}
	if pebble.IsCorruptionError(err) {
		r.Add(verify.Corrupt, pos, "", "%v", err)
		return nil
	}
	return err
}

// removals reads what deletion and retention left for verify to know: the
// floor, the highest position the sweep removed (every gap at or below it
// may be removed events), and each stream's truncation point (its first
// seq still stored may be above 1).
func removals(db *pebble.DB) (floor uint64, before map[string]uint64, err error) {
	if v, closer, err := db.Get(floorKey); err == nil {
		if len(v) == 8 {
			floor = be64(v)
		}
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return 0, nil, err
	}
	before = map[string]uint64{}
	iter, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixState}, UpperBound: []byte{prefixState + 1}})
	if err != nil {
		return 0, nil, err
	}
	defer iter.Close()
	for ok := iter.First(); ok; ok = iter.Next() {
		st, err := decodeState(iter.Value())
		if err != nil {
			continue // a corrupt state: its stream's checks report what follows
		}
		b := st.before
		if st.mode == eventstore.DeleteHard {
			b = math.MaxUint64
		}
		before[string(iter.Key()[1:])] = b
	}
	return floor, before, iter.Error()
}

func checkLog(db *pebble.DB, rm removed, r *verify.Report) error {
	floor := rm.floor
	iter, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixEvent}, UpperBound: []byte{prefixEvent + 1}})
	if err != nil {
		return err
	}
	defer iter.Close()
	var in interner
	var key []byte
	want := uint64(1)
	for ok := iter.First(); ok; ok = iter.Next() {
		k := iter.Key()
		if len(k) != 9 {
			r.Add(verify.Corrupt, 0, "", "event key %x is not 9 bytes", k)
			continue
		}
		pos := be64(k[1:])
		if pos != want {
			switch {
			case pos < want:
				r.Add(verify.Corrupt, pos, "", "position %d out of order", pos)
			case pos-1 > floor:
				// Positions up to the floor may be events the sweep
				// removed; a gap above it is not.
				r.Add(verify.Gap, max(want, floor+1), "", "positions %d to %d hold no event", max(want, floor+1), pos-1)
			}
		}
		want = pos + 1
		r.Head = pos
		r.Events++
		v, err := iter.ValueAndErr()
		if err != nil {
			if err := corruption(r, pos, err); err != nil {
				return err
			}
			continue
		}
		ev, err := decodeEvent(pos, v, &in)
		if err != nil {
			r.Add(verify.Corrupt, pos, "", "%v", err)
			continue
		}
		key = streamKey(key[:0], ev.Stream, ev.Seq)
		switch at, err := getPos(db, key); {
		case errors.Is(err, pebble.ErrNotFound):
			r.Add(verify.StreamIndex, pos, ev.Stream, "event %d of the stream has no stream-index entry", ev.Seq)
		case err != nil:
			if err := corruption(r, pos, err); err != nil {
				return err
			}
		case at != pos:
			r.Add(verify.StreamIndex, pos, ev.Stream, "the stream index puts event %d of the stream at position %d", ev.Seq, at)
		}
		for _, tag := range ev.Tags {
			key = tagKey(key[:0], tag, pos)
			_, closer, err := db.Get(key)
			if errors.Is(err, pebble.ErrNotFound) {
				r.Add(verify.TagIndex, pos, ev.Stream, "tag %q has no tag-index entry", tag)
				continue
			}
			if err != nil {
				if err := corruption(r, pos, err); err != nil {
					return err
				}
				continue
			}
			_ = closer.Close()
		}
	}
	return corruption(r, 0, iter.Error())
}

// getPos reads a stream-index value.
func getPos(db *pebble.DB, key []byte) (uint64, error) {
	v, closer, err := db.Get(key)
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: stream-index value of %d bytes", pebble.ErrCorruption, len(v))
	}
	return be64(v), nil
}

// getEvent decodes the event at pos.
func getEvent(db *pebble.DB, pos uint64, in *interner) (ev eventDecoded, found bool, err error) {
	v, closer, err := db.Get(eventKey(nil, pos))
	if errors.Is(err, pebble.ErrNotFound) {
		return ev, false, nil
	}
	if err != nil {
		return ev, false, err
	}
	defer closer.Close()
	e, err := decodeEvent(pos, v, in)
	if err != nil {
		return ev, true, err
	}
	return eventDecoded{stream: e.Stream, seq: e.Seq, tags: e.Tags}, true, nil
}

type eventDecoded struct {
	stream string
	seq    uint64
	tags   []string
}

func checkStreamIndex(db *pebble.DB, rm removed, r *verify.Report) error {
	truncated := rm.truncated
	iter, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixStream}, UpperBound: []byte{prefixStream + 1}})
	if err != nil {
		return err
	}
	defer iter.Close()
	var in interner
	var stream []byte
	var wantSeq, lastPos uint64
	for ok := iter.First(); ok; ok = iter.Next() {
		k := iter.Key()
		i := bytes.IndexByte(k, 0)
		if i < 0 || len(k) != i+9 {
			r.Add(verify.StreamIndex, 0, "", "malformed stream-index key %q", k)
			continue
		}
		name, seq := k[1:i], be64(k[i+1:])
		if stream == nil || !bytes.Equal(name, stream) {
			stream = append(stream[:0:0], name...)
			wantSeq, lastPos = 1, 0
			// A truncated stream's events below its truncation point may
			// be gone already.
			if b, ok := truncated[string(stream)]; ok && seq > 1 && seq <= b {
				wantSeq = seq
			}
			r.Streams++
		}
		s := string(stream)
		v, err := iter.ValueAndErr()
		if err != nil {
			if err := corruption(r, 0, err); err != nil {
				return err
			}
			continue
		}
		if len(v) != 8 {
			r.Add(verify.StreamIndex, 0, s, "entry of event %d is %d bytes, not a position", seq, len(v))
			continue
		}
		pos := be64(v)
		if seq != wantSeq {
			r.Add(verify.StreamVersion, pos, s, "sequence number %d follows %d", seq, wantSeq-1)
		}
		if pos <= lastPos {
			r.Add(verify.StreamVersion, pos, s, "event %d at position %d is not after event %d at position %d", seq, pos, wantSeq-1, lastPos)
		}
		wantSeq, lastPos = seq+1, pos
		ev, found, err := getEvent(db, pos, &in)
		switch {
		case err != nil:
			if errors.Is(err, errCorrupt) {
				continue // reported by checkLog
			}
			if err := corruption(r, pos, err); err != nil {
				return err
			}
		case !found:
			r.Add(verify.StreamIndex, pos, s, "the stream index puts event %d at position %d, which holds no event", seq, pos)
		case ev.stream != s || ev.seq != seq:
			r.Add(verify.StreamIndex, pos, s, "the stream index puts event %d at position %d, which holds event %d of stream %q", seq, pos, ev.seq, ev.stream)
		}
	}
	return corruption(r, 0, iter.Error())
}

func checkTagIndex(db *pebble.DB, _ removed, r *verify.Report) error {
	iter, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixTag}, UpperBound: []byte{prefixTag + 1}})
	if err != nil {
		return err
	}
	defer iter.Close()
	var in interner
	for ok := iter.First(); ok; ok = iter.Next() {
		k := iter.Key()
		i := bytes.IndexByte(k, 0)
		if i < 0 || len(k) != i+9 {
			r.Add(verify.TagIndex, 0, "", "malformed tag-index key %q", k)
			continue
		}
		tag, pos := string(k[1:i]), be64(k[i+1:])
		ev, found, err := getEvent(db, pos, &in)
		switch {
		case err != nil:
			if errors.Is(err, errCorrupt) {
				continue // reported by checkLog
			}
			if err := corruption(r, pos, err); err != nil {
				return err
			}
		case !found:
			r.Add(verify.TagIndex, pos, "", "tag %q names position %d, which holds no event", tag, pos)
		case !slices.Contains(ev.tags, tag):
			r.Add(verify.TagIndex, pos, ev.stream, "tag %q names an event without that tag", tag)
		}
	}
	return corruption(r, 0, iter.Error())
}

func checkSnapshots(db *pebble.DB, _ removed, r *verify.Report) error {
	iter, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixSnapshot}, UpperBound: []byte{prefixSnapshot + 1}})
	if err != nil {
		return err
	}
	defer iter.Close()
	for ok := iter.First(); ok; ok = iter.Next() {
		stream := string(iter.Key()[1:])
		v, err := iter.ValueAndErr()
		if err != nil {
			if err := corruption(r, 0, err); err != nil {
				return err
			}
			continue
		}
		snap, err := decodeSnapshot(stream, v)
		if err != nil {
			r.Add(verify.Corrupt, 0, stream, "%v", err)
			continue
		}
		version, err := streamVersion(db, stream)
		if err != nil {
			if err := corruption(r, 0, err); err != nil {
				return err
			}
			continue
		}
		if snap.Seq > version {
			r.Add(verify.Snapshot, 0, stream, "snapshot at event %d, beyond the stream's version %d", snap.Seq, version)
		}
	}
	return corruption(r, 0, iter.Error())
}

// streamVersion is the last sequence number in stream's index.
func streamVersion(db *pebble.DB, stream string) (uint64, error) {
	p := streamPrefix(nil, stream)
	iter, err := db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return 0, err
	}
	defer iter.Close()
	if iter.Last() && len(iter.Key()) == len(p)+8 {
		return be64(iter.Key()[len(p):]), nil
	}
	return 0, iter.Error()
}

// checkBlocks reads every block of every table, which checks its
// checksum, and checks the order of keys across the LSM's levels.
func checkBlocks(db *pebble.DB, _ removed, r *verify.Report) error {
	if err := db.CheckLevels(nil); err != nil {
		r.Add(verify.Corrupt, 0, "", "Pebble's check of its tables: %v", err)
	}
	return nil
}
