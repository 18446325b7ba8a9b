package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/backend"
)

// Head implements eventstore.Store.
func (s *Store) Head(ctx context.Context) (uint64, error) {
	if err := checkCtx(ctx); err != nil {
		return 0, err
	}
	return s.durable.Load(), nil
}

func (s *Store) clampMax(max int) int {
	if max <= 0 || max > s.opts.MaxReadBatch {
		return s.opts.MaxReadBatch
	}
	return max
}

// ReadAll implements eventstore.Store: one ordered scan of the e keys.
func (s *Store) ReadAll(ctx context.Context, from uint64, max int) ([]eventstore.Event, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	head := s.durable.Load()
	if from == 0 {
		from = 1
	}
	if from > head {
		return nil, nil
	}
	max = s.clampMax(max)
	if n := head - from + 1; n < uint64(max) {
		max = int(n)
	}
	// The removed streams' truncation points, taken before the iterator:
	// an event the sweep has not reclaimed yet is skipped by it, and one
	// it has is gone from the iterator's view (delete.go).
	hide := s.pendingMap()
	iter, err := s.db.NewIter(eventRange(from, head))
	if err != nil {
		return nil, fmt.Errorf("read all from %d: %w", from, err)
	}
	out := make([]eventstore.Event, 0, max)
	var in interner
	for ok := iter.First(); ok && len(out) < max; ok = iter.Next() {
		pos := be64(iter.Key()[1:])
		v, err := iter.ValueAndErr()
		if err != nil {
			_ = iter.Close()
			return nil, fmt.Errorf("read all at %d: %w", pos, err)
		}
		ev, err := decodeEvent(pos, v, &in)
		if err != nil {
			_ = iter.Close()
			return nil, err
		}
		if hidden(hide, &ev) {
			continue
		}
		out = append(out, ev)
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read all from %d: %w", from, err)
	}
	return out, nil
}

// ReadStream implements eventstore.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]eventstore.Event, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	if err := s.limits.ValidateStreamID(stream); err != nil {
		return nil, fmt.Errorf("read stream: %w", err)
	}
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	st, err := s.readState(stream)
	if err != nil {
		return nil, err
	}
	if b := st.visibleFrom(); from < b {
		from = b
	}
	head := s.durable.Load()
	max = s.clampMax(max)
	prefix := streamPrefix(nil, stream)
	iter, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: streamKey(nil, stream, from),
		UpperBound: prefixEnd(prefix),
	})
	if err != nil {
		return nil, fmt.Errorf("read stream %q: %w", stream, err)
	}
	var positions []uint64
	for ok := iter.First(); ok && len(positions) < max; ok = iter.Next() {
		pos := be64(iter.Value())
		if pos > head {
			break // not yet durable, and neither is anything after it
		}
		positions = append(positions, pos)
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read stream %q: %w", stream, err)
	}
	if len(positions) == 0 {
		return nil, s.deletedErr(stream, st, head)
	}
	return s.loadEvents(stream, positions)
}

// ReadStreamBackward implements eventstore.Store.
func (s *Store) ReadStreamBackward(ctx context.Context, stream string, from uint64, max int) ([]eventstore.Event, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	if err := s.limits.ValidateStreamID(stream); err != nil {
		return nil, fmt.Errorf("read stream backward: %w", err)
	}
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	st, err := s.readState(stream)
	if err != nil {
		return nil, err
	}
	head := s.durable.Load()
	max = s.clampMax(max)
	prefix := streamPrefix(nil, stream)
	upper := prefixEnd(prefix)
	if from > 0 && from < ^uint64(0) {
		upper = streamKey(nil, stream, from+1)
	}
	lower := prefix
	if b := st.visibleFrom(); b > 1 {
		lower = streamKey(nil, stream, b)
	}
	iter, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("read stream %q backward: %w", stream, err)
	}
	var positions []uint64
	for ok := iter.Last(); ok && len(positions) < max; ok = iter.Prev() {
		pos := be64(iter.Value())
		if pos > head {
			continue // the newest events may not be durable yet
		}
		positions = append(positions, pos)
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read stream %q backward: %w", stream, err)
	}
	if len(positions) == 0 {
		return nil, s.deletedErr(stream, st, head)
	}
	// loadEvents wants ascending positions.
	for i, j := 0, len(positions)-1; i < j; i, j = i+1, j-1 {
		positions[i], positions[j] = positions[j], positions[i]
	}
	evs, err := s.loadEvents(stream, positions)
	for i, j := 0, len(evs)-1; i < j; i, j = i+1, j-1 {
		evs[i], evs[j] = evs[j], evs[i]
	}
	return evs, err
}

// ReadTag implements eventstore.Store: a scan of the tag index, then the
// events it names.
func (s *Store) ReadTag(ctx context.Context, tag string, from uint64, max int) ([]eventstore.Event, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	if err := s.limits.ValidateTag(tag); err != nil {
		return nil, fmt.Errorf("read tag: %w", err)
	}
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	head := s.durable.Load()
	if from == 0 {
		from = 1
	}
	if from > head {
		return nil, nil
	}
	max = s.clampMax(max)
	hide := s.pendingMap()
	iter, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: tagKey(nil, tag, from),
		UpperBound: tagKey(nil, tag, head+1),
	})
	if err != nil {
		return nil, fmt.Errorf("read tag %q: %w", tag, err)
	}
	var positions []uint64
	for ok := iter.First(); ok && len(positions) < max; ok = iter.Next() {
		k := iter.Key()
		positions = append(positions, be64(k[len(k)-8:]))
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read tag %q: %w", tag, err)
	}
	evs, err := s.loadEvents("", positions)
	if err != nil || len(hide) == 0 {
		return evs, err
	}
	return slices.DeleteFunc(evs, func(ev eventstore.Event) bool { return hidden(hide, &ev) }), nil
}

// loadEvents reads the events at ascending positions with one iterator:
// each seek moves forward, which Pebble serves from the blocks it already
// holds when the positions are close together.
func (s *Store) loadEvents(stream string, positions []uint64) ([]eventstore.Event, error) {
	if len(positions) == 0 {
		return nil, nil
	}
	iter, err := s.db.NewIter(eventRange(positions[0], positions[len(positions)-1]))
	if err != nil {
		return nil, err
	}
	in := interner{last: stream}
	out := make([]eventstore.Event, 0, len(positions))
	key := make([]byte, 0, 9)
	for _, pos := range positions {
		key = eventKey(key[:0], pos)
		if !iter.SeekGE(key) || be64(iter.Key()[1:]) != pos {
			if s.floor.Load() > 0 {
				// The sweep removed it after the index was read: the
				// index entry went in the same batch (delete.go).
				continue
			}
			_ = iter.Close()
			return nil, fmt.Errorf("%w: index names position %d, which holds no event", errCorrupt, pos)
		}
		v, err := iter.ValueAndErr()
		if err != nil {
			_ = iter.Close()
			return nil, err
		}
		ev, err := decodeEvent(pos, v, &in)
		if err != nil {
			_ = iter.Close()
			return nil, err
		}
		out = append(out, ev)
	}
	return out, iter.Close()
}

// ListStreams implements eventstore.Store: it hops from stream to stream
// through the stream index, one seek per stream.
func (s *Store) ListStreams(ctx context.Context, after string, max int) ([]string, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	head := s.durable.Load()
	max = s.clampMax(max)
	hide := s.pendingMap()
	iter, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte{prefixStream},
		UpperBound: []byte{prefixStream + 1},
	})
	if err != nil {
		return nil, err
	}
	var out []string
	seek := []byte{prefixStream}
	if after != "" {
		seek = prefixEnd(streamPrefix(nil, after))
	}
	for ok := iter.SeekGE(seek); ok && len(out) < max; {
		k := iter.Key()
		name := k[1 : len(k)-9]
		// The first key of a stream is its first event; a stream whose
		// first event is not yet durable does not exist for readers.
		if be64(iter.Value()) <= head {
			if b, removed := hide[string(name)]; !removed || s.hasFrom(string(name), b, head) {
				out = append(out, string(name))
			}
		}
		ok = iter.SeekGE(prefixEnd(k[:len(k)-8]))
	}
	return out, iter.Close()
}

// StreamVersion implements eventstore.Store.
func (s *Store) StreamVersion(ctx context.Context, stream string) (uint64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	if err := s.limits.ValidateStreamID(stream); err != nil {
		return 0, fmt.Errorf("stream version: %w", err)
	}
	if err := checkCtx(ctx); err != nil {
		return 0, err
	}
	v, err := s.lastSeq(stream, s.durable.Load())
	if err != nil {
		return 0, err
	}
	st, err := s.loadState(stream)
	if err != nil {
		return 0, err
	}
	return max(v, st.version), nil
}

// readState is loadState for a read: it fails a read of a hard-deleted
// stream.
func (s *Store) readState(stream string) (streamState, error) {
	st, err := s.loadState(stream)
	if err != nil {
		return st, fmt.Errorf("read stream %q: %w", stream, err)
	}
	if st.mode == eventstore.DeleteHard {
		return st, fmt.Errorf("read stream %q: %w", stream, eventstore.ErrStreamTombstoned)
	}
	return st, nil
}

// deletedErr is what a read that found nothing in a stream returns:
// ErrStreamDeleted if it is soft-deleted and not recreated since.
func (s *Store) deletedErr(stream string, st streamState, head uint64) error {
	if st.mode != eventstore.DeleteSoft || s.hasFrom(stream, st.before, head) {
		return nil
	}
	return fmt.Errorf("read stream %q: %w", stream, eventstore.ErrStreamDeleted)
}

// hasFrom reports whether stream has a durable event with seq >= from.
func (s *Store) hasFrom(stream string, from, head uint64) bool {
	if from == ^uint64(0) {
		return false
	}
	prefix := streamPrefix(nil, stream)
	iter, err := s.db.NewIter(&pebble.IterOptions{LowerBound: streamKey(nil, stream, from), UpperBound: prefixEnd(prefix)})
	if err != nil {
		return false
	}
	defer iter.Close()
	return iter.First() && be64(iter.Value()) <= head
}

// lastSeq returns the highest seq of stream whose position is <= maxPos.
func (s *Store) lastSeq(stream string, maxPos uint64) (uint64, error) {
	prefix := streamPrefix(nil, stream)
	iter, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, err
	}
	var seq uint64
	for ok := iter.Last(); ok; ok = iter.Prev() {
		if be64(iter.Value()) <= maxPos {
			k := iter.Key()
			seq = be64(k[len(k)-8:])
			break
		}
	}
	return seq, iter.Close()
}

// ReadFiltered implements backend.Tail.
func (s *Store) ReadFiltered(ctx context.Context, f eventstore.Filter, cursor uint64, max int) ([]eventstore.Event, error) {
	return backend.ReadFiltered(ctx, s, f, cursor, max)
}

// Changed implements backend.Tail.
func (s *Store) Changed(f eventstore.Filter) <-chan struct{} { return s.notify.Changed(f) }

// Subscribe implements eventstore.Store.
func (s *Store) Subscribe(ctx context.Context, f eventstore.Filter, from uint64) (eventstore.Subscription, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if err := s.limits.ValidateFilter(f); err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	return backend.NewSubscription(s, f, from, 0), nil
}

// SaveSnapshot implements eventstore.Store.
func (s *Store) SaveSnapshot(ctx context.Context, snap eventstore.Snapshot) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	if err := s.limits.ValidateSnapshot(snap); err != nil {
		return fmt.Errorf("save snapshot: %w", err)
	}
	if err := checkCtx(ctx); err != nil {
		return err
	}
	v, err := s.StreamVersion(ctx, snap.Stream)
	if err != nil {
		return err
	}
	if snap.Seq > v {
		return backend.SnapshotBeyondVersion(snap, v)
	}
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	key := snapshotKey(nil, snap.Stream)
	if old, closer, err := s.db.Get(key); err == nil {
		// Only the stored one's seq matters: its state is not decoded.
		seq, n := binary.Uvarint(old)
		closer.Close()
		if n > 0 && seq > snap.Seq {
			return nil // a newer snapshot is already there
		}
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("save snapshot of %q: %w", snap.Stream, err)
	}
	// No fsync: a snapshot is a cache that a lost write only makes slower.
	return s.db.Set(key, encodeSnapshot(snap), pebble.NoSync)
}

// LoadSnapshot implements eventstore.Store.
func (s *Store) LoadSnapshot(ctx context.Context, stream string) (eventstore.Snapshot, bool, error) {
	if err := s.enter(); err != nil {
		return eventstore.Snapshot{}, false, err
	}
	defer s.leave()
	if err := s.limits.ValidateStreamID(stream); err != nil {
		return eventstore.Snapshot{}, false, fmt.Errorf("load snapshot: %w", err)
	}
	if err := checkCtx(ctx); err != nil {
		return eventstore.Snapshot{}, false, err
	}
	v, closer, err := s.db.Get(snapshotKey(nil, stream))
	if errors.Is(err, pebble.ErrNotFound) {
		return eventstore.Snapshot{}, false, nil
	}
	if err != nil {
		return eventstore.Snapshot{}, false, fmt.Errorf("load snapshot of %q: %w", stream, err)
	}
	defer closer.Close()
	snap, err := decodeSnapshot(stream, v)
	return snap, err == nil, err
}
