package window

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// Keys of the view's Pebble database (keys starting with 0x00 belong to
// projection.PebbleView):
//
//	'w' level:1 start:8 0x01 seq:4   a delta of a bucket: the entries one
//	                                 batch changed (blob, like a base)
//	'w' level:1 start:8 0x02         a bucket's base: every window of the
//	                                 level that starts then, one entry
//	                                 per key (blob)
//	'l' level:1 start:8 dims         late events of a window that closed
//	                                 before they came: end:8, uvarint count
//	'm' "streamtime"                 the stream time, 8 bytes
//	'm' "layout"                     the layout of these keys ("3")
//
// Times are Unix nanoseconds with the sign bit flipped, so that byte
// order is time order. Each dimension is escaped (0x00 → 0x00 0xFF) and
// ends with 0x00 0x01, so that encoded keys split unambiguously.
//
// A bucket is a base plus deltas rather than one value per window and
// key because most events create a window (a minute of a sender and a
// type sees less than one event on average): one Pebble entry per window
// start makes a catching-up batch write a few large values instead of one
// small value per event. A batch that changes few of a bucket's entries
// (a live ingest's batch of a few hundred events against an hour or day
// bucket of 20,000 keys) writes only those, as a delta; once the deltas
// hold half as many entries as the base, the batch rewrites the base and
// deletes them, so a batch writes O(entries changed) amortized and a
// reader merges at most half a bucket more than the base. A bucket that
// closes is compacted to its base. Deltas sort before their base, so a
// reader sees a bucket's newest entries before the base they override.
// A pull query still reads only the buckets of its time range.
const (
	prefixWindow = 'w'
	prefixLate   = 'l'
	suffixDelta  = 1
	suffixBase   = 2
	// layout names this arrangement of keys and the rules the windows in
	// it were computed by; a database of another (or none, from before it
	// was recorded) is rebuilt from the log. 4: events far ahead of the
	// clock set aside (a database of 3 may hold a stream time frozen in
	// the future), sessions closed and merged as in Kafka Streams.
	layout = "4"
)

var (
	streamTimeKey = []byte("mstreamtime")
	layoutKey     = []byte("mlayout")
	asideKey      = []byte("maside") // events set aside (uint64)
)

// baseKey appends the key of a bucket's base.
func baseKey(b []byte, level uint8, start int64) []byte {
	return append(bucketKey(b, prefixWindow, level, start), suffixBase)
}

// deltaKey appends the key of a bucket's delta number seq (0, 1, …):
// stored inverted, so that a bucket's newest delta sorts first.
func deltaKey(b []byte, level uint8, start int64, seq uint32) []byte {
	return binary.BigEndian.AppendUint32(append(bucketKey(b, prefixWindow, level, start), suffixDelta), ^seq)
}

func appendTime(b []byte, t int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(t)^(1<<63))
}

func readTime(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

func appendDim(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			b = append(b, 0, 0xFF)
		} else {
			b = append(b, s[i])
		}
	}
	return append(b, 0, 1)
}

// appendDims appends the encoded dimensions.
func appendDims(b []byte, dims []string) []byte {
	for _, d := range dims {
		b = appendDim(b, d)
	}
	return b
}

// bucketKey appends the key of the bucket of a level's windows starting
// at start; with prefixLate, the prefix of its late counts.
func bucketKey(b []byte, prefix byte, level uint8, start int64) []byte {
	return appendTime(append(b, prefix, level), start)
}

// entry layout inside a bucket: uvarint length, encoded dims, uvarint
// length, state.
func appendEntry(b []byte, dims string, s *state) []byte {
	b = binary.AppendUvarint(b, uint64(len(dims)))
	b = append(b, dims...)
	// The state's length is not known before encoding: encode after a
	// maximal length prefix, then move it into place.
	at := len(b)
	b = append(b, 0, 0, 0, 0, 0)
	b = s.appendTo(b)
	n := len(b) - at - 5
	var pre [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(pre[:], uint64(n))
	copy(b[at+k:], b[at+5:])
	copy(b[at:], pre[:k])
	return b[:at+k+n]
}

// nextEntry splits the first entry off a bucket's entries.
func nextEntry(b []byte) (dims, st, rest []byte, err error) {
	l, n := binary.Uvarint(b)
	if n <= 0 || uint64(len(b)-n) < l {
		return nil, nil, nil, errBadKey
	}
	dims, b = b[n:n+int(l)], b[n+int(l):]
	l, n = binary.Uvarint(b)
	if n <= 0 || uint64(len(b)-n) < l {
		return nil, nil, nil, errBadKey
	}
	return dims, b[n : n+int(l)], b[n+int(l):], nil
}

var errBadKey = errors.New("window: malformed window key")

// splitDims splits encoded dimensions; the parts alias rest unless a
// dimension holds an escaped zero byte.
func splitDims(rest []byte, dims [][]byte) ([][]byte, error) {
	dims = dims[:0]
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, 0)
		if i < 0 || i+1 >= len(rest) {
			return nil, errBadKey
		}
		if rest[i+1] == 1 {
			dims = append(dims, rest[:i:i])
			rest = rest[i+2:]
			continue
		}
		// An escaped zero byte: decode into a new slice.
		var d []byte
		j := 0
		for {
			if j+1 >= len(rest) {
				return nil, errBadKey
			}
			if rest[j] != 0 {
				d = append(d, rest[j])
				j++
				continue
			}
			if rest[j+1] == 0xFF {
				d = append(d, 0)
				j += 2
				continue
			}
			if rest[j+1] != 1 {
				return nil, errBadKey
			}
			break
		}
		dims = append(dims, d)
		rest = rest[j+2:]
	}
	return dims, nil
}
