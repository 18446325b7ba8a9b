package pebblestore

import "encoding/binary"

// Key layout. Every key starts with a one-byte prefix naming its family;
// integers are big-endian so that byte order is numeric order.
//
//	e <pos:8>                      -> event record (codec.go)
//	s <stream> 0x00 <seq:8>        -> pos:8            (stream index)
//	t <tag> 0x00 <pos:8>           -> empty            (tag index)
//	n <stream>                     -> snapshot record
//	m format                       -> format version
//
// Stream ids and tags never contain control characters (eventstore.Limits
// refuses them), so 0x00 cleanly ends the name: all keys of stream "a" sort
// before those of "ab", and the keys of one stream are contiguous.
const (
	prefixEvent    = 'e'
	prefixStream   = 's'
	prefixTag      = 't'
	prefixSnapshot = 'n'
	prefixMeta     = 'm'
)

var formatKey = []byte("mformat")

const formatVersion = "logbook-pebble-1"

func eventKey(dst []byte, pos uint64) []byte {
	dst = append(dst, prefixEvent)
	return binary.BigEndian.AppendUint64(dst, pos)
}

func streamPrefix(dst []byte, stream string) []byte {
	dst = append(dst, prefixStream)
	dst = append(dst, stream...)
	return append(dst, 0)
}

func streamKey(dst []byte, stream string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(streamPrefix(dst, stream), seq)
}

func tagPrefix(dst []byte, tag string) []byte {
	dst = append(dst, prefixTag)
	dst = append(dst, tag...)
	return append(dst, 0)
}

func tagKey(dst []byte, tag string, pos uint64) []byte {
	return binary.BigEndian.AppendUint64(tagPrefix(dst, tag), pos)
}

func snapshotKey(dst []byte, stream string) []byte {
	dst = append(dst, prefixSnapshot)
	return append(dst, stream...)
}

// prefixEnd returns the smallest key greater than every key starting with p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func be64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
