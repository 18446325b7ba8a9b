package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

// Event record (the value under an e key):
//
//	[0]      codec version (1)
//	[1:9]    seq, big-endian
//	[9:17]   commit time, Unix nanoseconds, big-endian
//	[17:33]  event id
//	uvarint-prefixed stream, uvarint-prefixed type, uvarint schema version,
//	uvarint tag count then uvarint-prefixed tags,
//	uvarint meta count then uvarint-prefixed key and value pairs,
//	data: the rest.
//
// seq and time sit at fixed offsets so that a writer's goroutine can encode
// the whole record and the sequencer only patches those two fields in.
const (
	codecV1    = 1
	offSeq     = 1
	offTime    = 9
	offID      = 17
	fixedBytes = 33
)

var errCorrupt = errors.New("pebblestore: corrupt event record")

func appendUvarintString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// encodeEvent appends the record of ev with zero seq and time.
func encodeEvent(dst []byte, stream string, ev *eventstore.NewEvent) []byte {
	dst = append(dst, codecV1)
	dst = append(dst, make([]byte, 16)...)
	dst = append(dst, ev.ID[:]...)
	dst = appendUvarintString(dst, stream)
	dst = appendUvarintString(dst, ev.Type)
	dst = binary.AppendUvarint(dst, uint64(ev.Version))
	dst = binary.AppendUvarint(dst, uint64(len(ev.Tags)))
	for _, t := range ev.Tags {
		dst = appendUvarintString(dst, t)
	}
	dst = binary.AppendUvarint(dst, uint64(len(ev.Meta)))
	for k, v := range ev.Meta {
		dst = appendUvarintString(dst, k)
		dst = appendUvarintString(dst, v)
	}
	return append(dst, ev.Data...)
}

func encodedSize(stream string, ev *eventstore.NewEvent) int {
	n := fixedBytes + 5*4 + len(stream) + len(ev.Type) + len(ev.Data)
	for _, t := range ev.Tags {
		n += len(t) + 2
	}
	for k, v := range ev.Meta {
		n += len(k) + len(v) + 4
	}
	return n
}

func patchSeqTime(rec []byte, seq uint64, t int64) {
	binary.BigEndian.PutUint64(rec[offSeq:], seq)
	binary.BigEndian.PutUint64(rec[offTime:], uint64(t))
}

// interner avoids allocating the same stream and type strings once per
// event when a page holds many events of few streams and types.
type interner struct {
	last  string
	types map[string]string
}

func (in *interner) stream(b []byte) string {
	if string(b) == in.last { // no allocation: the compiler compares in place
		return in.last
	}
	in.last = string(b)
	return in.last
}

func (in *interner) typ(b []byte) string {
	if s, ok := in.types[string(b)]; ok {
		return s
	}
	if in.types == nil {
		in.types = make(map[string]string, 8)
	}
	s := string(b)
	if len(in.types) < 256 {
		in.types[s] = s
	}
	return s
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errCorrupt
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// decodeEvent decodes the record stored at pos. rec belongs to Pebble and
// is only valid until the iterator moves, so everything kept is copied.
func decodeEvent(pos uint64, rec []byte, in *interner) (eventstore.Event, error) {
	var ev eventstore.Event
	if len(rec) < fixedBytes || rec[0] != codecV1 {
		return ev, fmt.Errorf("%w at position %d", errCorrupt, pos)
	}
	ev.Position = pos
	ev.Seq = binary.BigEndian.Uint64(rec[offSeq:])
	ev.Time = time.Unix(0, int64(binary.BigEndian.Uint64(rec[offTime:]))).UTC()
	copy(ev.ID[:], rec[offID:fixedBytes])
	r := reader{b: rec[fixedBytes:]}
	ev.Stream = in.stream(r.bytes())
	ev.Type = in.typ(r.bytes())
	ev.Version = int(r.uvarint())
	if n := r.uvarint(); n > 0 && r.err == nil {
		if n > uint64(len(r.b)) {
			return ev, fmt.Errorf("%w at position %d", errCorrupt, pos)
		}
		ev.Tags = make([]string, n)
		for i := range ev.Tags {
			ev.Tags[i] = string(r.bytes())
		}
	}
	if n := r.uvarint(); n > 0 && r.err == nil {
		if n > uint64(len(r.b)) {
			return ev, fmt.Errorf("%w at position %d", errCorrupt, pos)
		}
		ev.Meta = make(map[string]string, n)
		for i := uint64(0); i < n; i++ {
			k := string(r.bytes())
			ev.Meta[k] = string(r.bytes())
		}
	}
	if r.err != nil {
		return ev, fmt.Errorf("%w at position %d", r.err, pos)
	}
	if len(r.b) > 0 {
		ev.Data = append([]byte(nil), r.b...)
	} else {
		ev.Data = []byte{}
	}
	return ev, nil
}

// Snapshot record: uvarint seq, uvarint schema version, data.
func encodeSnapshot(s eventstore.Snapshot) []byte {
	b := make([]byte, 0, 20+len(s.Data))
	b = binary.AppendUvarint(b, s.Seq)
	b = binary.AppendUvarint(b, uint64(s.Version))
	return append(b, s.Data...)
}

func decodeSnapshot(stream string, rec []byte) (eventstore.Snapshot, error) {
	r := reader{b: rec}
	s := eventstore.Snapshot{Stream: stream}
	s.Seq = r.uvarint()
	s.Version = int(r.uvarint())
	if r.err != nil {
		return s, fmt.Errorf("%w: snapshot of stream %q", errCorrupt, stream)
	}
	s.Data = append([]byte{}, r.b...)
	return s, nil
}

// BatchBytes is the size of the Pebble batch an append of events to
// stream writes to the write-ahead log, record for record: the batch
// header, and for each event its log entry and its stream index entry
// (and one per tag), each a kind byte, two length varints, key and value.
// It is what one fdatasync of a lone append carries, less the log's own
// chunk headers (7 bytes per 32 KiB block); `logbook bench append` times
// synced writes of that size to show how close the store comes to the
// disk.
func BatchBytes(stream string, events []eventstore.NewEvent) int {
	const batchHeader = 12 // Pebble's: sequence number and count
	entry := func(k, v int) int {
		return 1 + uvarintLen(uint64(k)) + k + uvarintLen(uint64(v)) + v
	}
	n := batchHeader
	for i := range events {
		n += entry(len(eventKey(nil, 0)), len(encodeEvent(nil, stream, &events[i])))
		n += entry(len(streamKey(nil, stream, 0)), 8)
		for _, t := range events[i].Tags {
			n += entry(len(tagKey(nil, t, 0)), 0)
		}
	}
	return n
}

func uvarintLen(x uint64) int {
	return len(binary.AppendUvarint(nil, x))
}
