package projection

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/logbook/logbook/engine/eventstore"
)

// Dedup is a duplicate filter: the last sequence number applied per
// stream. A view whose storage cannot write its checkpoint atomically with
// its state keeps one, loaded with the state at start and persisted with
// it: each stream's entry in the same atomic write as that stream's state
// (per stream if the storage is atomic per record, or the whole filter
// with MarshalBinary). Events replayed from a stale checkpoint then fall
// at or below the filter's entry for their stream and are dropped.
//
// It relies on each stream's events arriving in sequence order, which the
// log guarantees for any filter. The zero value is an empty filter. A
// Dedup is not safe for concurrent use.
type Dedup struct {
	last map[string]uint64
}

// Fresh returns the events of batch not applied before, in order, and
// records them as applied. The filter then runs ahead of storage until the
// caller has persisted the entries of the streams it returned: if that
// write fails, reload the filter with the state. The result shares batch's
// array when nothing was dropped.
func (d *Dedup) Fresh(batch []eventstore.Event) []eventstore.Event {
	if d.last == nil {
		d.last = make(map[string]uint64)
	}
	var out []eventstore.Event
	for i, ev := range batch {
		if ev.Seq <= d.last[ev.Stream] {
			if out == nil {
				out = make([]eventstore.Event, i, len(batch))
				copy(out, batch[:i])
			}
			continue
		}
		d.last[ev.Stream] = ev.Seq
		if out != nil {
			out = append(out, ev)
		}
	}
	if out == nil {
		return batch
	}
	return out
}

// Last returns the sequence number of the last event of stream applied,
// 0 if none.
func (d *Dedup) Last(stream string) uint64 { return d.last[stream] }

// Set records seq as the last event of stream applied, as when loading the
// filter from storage.
func (d *Dedup) Set(stream string, seq uint64) {
	if d.last == nil {
		d.last = make(map[string]uint64)
	}
	d.last[stream] = seq
}

// Len returns the number of streams the filter knows.
func (d *Dedup) Len() int { return len(d.last) }

// MarshalBinary encodes the filter: a uvarint count, then per stream, in
// byte order, the uvarint-length-prefixed id and its uvarint seq.
func (d *Dedup) MarshalBinary() ([]byte, error) {
	streams := make([]string, 0, len(d.last))
	size := binary.MaxVarintLen64
	for s := range d.last {
		streams = append(streams, s)
		size += len(s) + 2*binary.MaxVarintLen64
	}
	slices.Sort(streams) // the same filter always encodes the same
	b := make([]byte, 0, size)
	b = binary.AppendUvarint(b, uint64(len(streams)))
	for _, s := range streams {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
		b = binary.AppendUvarint(b, d.last[s])
	}
	return b, nil
}

var errDedupCorrupt = errors.New("projection: corrupt dedup filter")

// UnmarshalBinary replaces the filter with one encoded by MarshalBinary.
func (d *Dedup) UnmarshalBinary(b []byte) error {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return fmt.Errorf("%w: bad stream count", errDedupCorrupt)
	}
	b = b[k:]
	last := make(map[string]uint64, n)
	for i := uint64(0); i < n; i++ {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return fmt.Errorf("%w: bad length of stream %d", errDedupCorrupt, i)
		}
		s := string(b[k : k+int(l)])
		b = b[k+int(l):]
		seq, k := binary.Uvarint(b)
		if k <= 0 {
			return fmt.Errorf("%w: bad seq of stream %q", errDedupCorrupt, s)
		}
		b = b[k:]
		last[s] = seq
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", errDedupCorrupt, len(b))
	}
	d.last = last
	return nil
}
