package window

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// Keys of the view's Pebble database (keys starting with 0x00 belong to
// projection.PebbleView):
//
//	'w' level:1 start:8 dims   a window entry (state.appendTo)
//	'm' "streamtime"           the stream time, 8 bytes
//
// Times are Unix nanoseconds with the sign bit flipped, so that byte
// order is time order. Each dimension is escaped (0x00 → 0x00 0xFF) and
// ends with 0x00 0x01, so that keys of different dimension values never
// share a prefix ambiguously and order by value.
const (
	prefixWindow = 'w'
)

var streamTimeKey = []byte("mstreamtime")

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

// windowKey appends the key of a window entry.
func windowKey(b []byte, level uint8, start int64, dims []string) []byte {
	b = append(b, prefixWindow, level)
	b = appendTime(b, start)
	for _, d := range dims {
		b = appendDim(b, d)
	}
	return b
}

// levelStart is the smallest key of a level's windows starting at or
// after start.
func levelStart(level uint8, start int64) []byte {
	return appendTime([]byte{prefixWindow, level}, start)
}

var errBadKey = errors.New("window: malformed window key")

// splitKey reads a window key into level, start and its dimensions, which
// alias k unless a dimension holds an escaped zero byte.
func splitKey(k []byte, dims [][]byte) (uint8, int64, [][]byte, error) {
	if len(k) < 10 || k[0] != prefixWindow {
		return 0, 0, nil, errBadKey
	}
	level, start := k[1], readTime(k[2:10])
	rest := k[10:]
	dims = dims[:0]
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, 0)
		if i < 0 || i+1 >= len(rest) {
			return 0, 0, nil, errBadKey
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
				return 0, 0, nil, errBadKey
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
				return 0, 0, nil, errBadKey
			}
			break
		}
		dims = append(dims, d)
		rest = rest[j+2:]
	}
	return level, start, dims, nil
}
