package window

import (
	"encoding/binary"
	"strings"
)

// A bucket's base carries an index after its entries, so that a pull
// query with a filter reads only the entries it keeps (the benchmark's
// query keeps the 1,000 entries of one type out of a day bucket's
// 20,000):
//
//	format:1 (indexedFormat) maxEnd:8 entriesLength:4 entries index
//	index:   per dimension: uvarint length, then per value:
//	         uvarint length, value (unescaped), uvarint length,
//	         the offsets into entries of its entries (uvarint deltas)
//
// A delta (bucketFormat) is small and has no index: format:1 maxEnd:8
// entries.
const (
	bucketFormat  = 2
	indexedFormat = 3
)

// splitRecord splits a bucket record (a base or a delta) into its parts;
// index is nil for a delta.
func splitRecord(v []byte) (maxEnd int64, entries, index []byte, err error) {
	if len(v) < 9 {
		return 0, nil, nil, errBadState
	}
	switch v[0] {
	case bucketFormat:
		return readTime(v[1:9]), v[9:], nil, nil
	case indexedFormat:
		if len(v) < 13 {
			return 0, nil, nil, errBadState
		}
		n := uint64(binary.BigEndian.Uint32(v[9:13]))
		if n > uint64(len(v)-13) {
			return 0, nil, nil, errBadState
		}
		return readTime(v[1:9]), v[13 : 13+n], v[13+n:], nil
	}
	return 0, nil, nil, errBadState
}

// indexLookup returns the offsets (encoded) of the entries whose
// dimension dim has value val: empty if none has.
func indexLookup(index []byte, dim int, val string) ([]byte, error) {
	for d := 0; ; d++ {
		l, n := binary.Uvarint(index)
		if n <= 0 || l > uint64(len(index)-n) {
			return nil, errBadState
		}
		sec := index[n : n+int(l)]
		index = index[n+int(l):]
		if d < dim {
			continue
		}
		for len(sec) > 0 {
			vl, n := binary.Uvarint(sec)
			if n <= 0 || vl > uint64(len(sec)-n) {
				return nil, errBadState
			}
			v := sec[n : n+int(vl)]
			sec = sec[n+int(vl):]
			ll, n := binary.Uvarint(sec)
			if n <= 0 || ll > uint64(len(sec)-n) {
				return nil, errBadState
			}
			if string(v) == val {
				return sec[n : n+int(ll)], nil
			}
			sec = sec[n+int(ll):]
		}
		return nil, nil
	}
}

// indexBuilder collects, per dimension and value, the offsets of a
// base's entries; its lists are reused from base to base. Values are
// the interner's numbers, so that indexing an entry is an array index
// per dimension.
type indexBuilder struct {
	lists [][][]uint32 // per dimension, per value id: offsets
	used  [][]uint32   // per dimension: the value ids that have offsets
	sec   []byte
}

func (ib *indexBuilder) reset(dims int) {
	for len(ib.lists) < dims {
		ib.lists = append(ib.lists, nil)
		ib.used = append(ib.used, nil)
	}
	for d := range ib.used {
		for _, v := range ib.used[d] {
			ib.lists[d][v] = ib.lists[d][v][:0]
		}
		ib.used[d] = ib.used[d][:0]
	}
}

// add indexes the entry whose dimensions have value ids vals at offset
// off.
func (ib *indexBuilder) add(vals []uint32, off uint32) {
	for d, v := range vals {
		if int(v) >= len(ib.lists[d]) {
			ib.lists[d] = append(ib.lists[d], make([][]uint32, int(v)+1-len(ib.lists[d]))...)
		}
		if len(ib.lists[d][v]) == 0 {
			ib.used[d] = append(ib.used[d], v)
		}
		ib.lists[d][v] = append(ib.lists[d][v], off)
	}
}

// appendTo appends the index; names are the values of the ids, per
// dimension.
func (ib *indexBuilder) appendTo(dst []byte, names [][]string) []byte {
	for d := range names {
		ib.sec = ib.sec[:0]
		for _, v := range ib.used[d] {
			name := names[d][v]
			ib.sec = binary.AppendUvarint(ib.sec, uint64(len(name)))
			ib.sec = append(ib.sec, name...)
			// The list's length is not known before encoding it.
			at := len(ib.sec)
			ib.sec = append(ib.sec, 0, 0, 0, 0, 0)
			prev := uint32(0)
			for _, off := range ib.lists[d][v] {
				ib.sec = binary.AppendUvarint(ib.sec, uint64(off-prev))
				prev = off
			}
			n := len(ib.sec) - at - 5
			var pre [binary.MaxVarintLen64]byte
			k := binary.PutUvarint(pre[:], uint64(n))
			copy(ib.sec[at+k:], ib.sec[at+5:])
			copy(ib.sec[at:], pre[:k])
			ib.sec = ib.sec[:at+k+n]
		}
		dst = binary.AppendUvarint(dst, uint64(len(ib.sec)))
		dst = append(dst, ib.sec...)
	}
	return dst
}

// splitDimsString splits encoded dimensions held in a string; the parts
// are substrings of s unless a dimension holds an escaped zero byte.
func splitDimsString(s string, dst []string) []string {
	for len(s) > 0 {
		i := strings.IndexByte(s, 0)
		if i < 0 || i+1 >= len(s) {
			return dst // malformed: cannot happen for keys this package encoded
		}
		if s[i+1] == 1 {
			dst = append(dst, s[:i])
			s = s[i+2:]
			continue
		}
		var b []byte
		j := 0
		for j+1 < len(s) {
			if s[j] != 0 {
				b = append(b, s[j])
				j++
			} else if s[j+1] == 0xFF {
				b = append(b, 0)
				j += 2
			} else {
				break
			}
		}
		dst = append(dst, string(b))
		s = s[min(j+2, len(s)):]
	}
	return dst
}
