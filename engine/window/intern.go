package window

import (
	"encoding/binary"
	"strings"
)

// interner numbers the keys (tuples of dimension values) the writer has
// seen, and each dimension's values, with small integers: an event's
// key is then a lookup in a small map per dimension (a thousand senders,
// twenty types: they stay in the cache) and one in a map of integers,
// and its window state in each open bucket an index into an array (see
// bucket.byID) instead of a lookup in a map keyed by the encoded
// dimensions. The numbers live in memory only, for the writer: the
// database stores the encoded dimensions as before, and at open (and
// after a failed batch) the numbers are made again from them, so they
// may differ from one run to the next.
type interner struct {
	nd     int
	values []map[string]uint32 // per dimension: value → value id
	names  [][]string          // per dimension: value id → value
	pairs  map[uint64]int32    // up to two dimensions: packed value ids → key
	tuples map[string]int32    // more: value ids as bytes → key
	keys   []string            // key → encoded dimensions
	vals   []uint32            // key → its value ids, nd per key
	ids    []uint32            // scratch
	buf    []byte              // scratch
}

func newInterner(nd int) *interner {
	in := &interner{nd: nd, values: make([]map[string]uint32, nd), names: make([][]string, nd), ids: make([]uint32, nd)}
	for d := range in.values {
		in.values[d] = map[string]uint32{}
	}
	if nd <= 2 {
		in.pairs = map[uint64]int32{}
	} else {
		in.tuples = map[string]int32{}
	}
	return in
}

// len is the number of keys numbered.
func (in *interner) len() int { return len(in.keys) }

// key returns the number of the key with dimension values dims, numbered
// if new.
func (in *interner) key(dims []string) int32 {
	for d, v := range dims {
		id, ok := in.values[d][v]
		if !ok {
			v = strings.Clone(v) // it may alias a larger payload
			id = uint32(len(in.names[d]))
			in.values[d][v] = id
			in.names[d] = append(in.names[d], v)
		}
		in.ids[d] = id
	}
	if in.pairs != nil {
		var p uint64
		switch in.nd {
		case 1:
			p = uint64(in.ids[0])
		case 2:
			p = uint64(in.ids[0])<<32 | uint64(in.ids[1])
		}
		k, ok := in.pairs[p]
		if !ok {
			k = in.add(dims)
			in.pairs[p] = k
		}
		return k
	}
	in.buf = in.buf[:0]
	for _, id := range in.ids {
		in.buf = binary.BigEndian.AppendUint32(in.buf, id)
	}
	k, ok := in.tuples[string(in.buf)]
	if !ok {
		k = in.add(dims)
		in.tuples[string(in.buf)] = k
	}
	return k
}

// add numbers a new key whose value ids are in in.ids.
func (in *interner) add(dims []string) int32 {
	k := int32(len(in.keys))
	in.keys = append(in.keys, string(appendDims(nil, dims)))
	in.vals = append(in.vals, in.ids...)
	return k
}

// encoded returns the number of the key with encoded dimensions enc
// (as stored), numbered if new.
func (in *interner) encoded(enc []byte, parts *[][]byte, dims *[]string) (int32, error) {
	var err error
	if *parts, err = splitDims(enc, (*parts)[:0]); err != nil {
		return 0, err
	}
	if len(*parts) != in.nd {
		return 0, errBadKey
	}
	*dims = (*dims)[:0]
	for _, p := range *parts {
		*dims = append(*dims, string(p))
	}
	return in.key(*dims), nil
}

// valueIDs returns the value ids of key k, one per dimension.
func (in *interner) valueIDs(k int32) []uint32 {
	return in.vals[int(k)*in.nd : int(k)*in.nd+in.nd]
}
