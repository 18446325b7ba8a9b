package window

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/axiomhq/hyperloglog"
)

// state is the aggregate of one window and key.
type state struct {
	// The fields an event updates come first, the stats of one value
	// inline after them, so that an update touches one or two cache
	// lines (the hour and day states of 20,000 keys do not fit a cache).
	count uint64
	late  uint64
	// stats holds sum, min, max of each value, three floats per value:
	// inl when there is one value.
	stats    []float64
	inl      [3]float64
	end      int64 // exclusive end, Unix ns
	distinct []distinctSet
	// dims is the window's key (encoded dimensions) in its bucket, and
	// dirty tells whether it is in the bucket's list of entries the batch
	// being applied changed (the writer's; queries leave them zero).
	dims  string
	dirty bool
	key   int32 // the number of dims in the writer's interner
}

// distinctSet counts distinct values: exactly in a set up to a limit,
// then in a HyperLogLog sketch (github.com/axiomhq/hyperloglog: sparse
// representation while small, serializable, mergeable — which the
// roll-up of a query needs).
type distinctSet struct {
	set map[string]struct{}
	hll *hyperloglog.Sketch
}

func newState(nValues, nDistinct int, end int64) *state {
	s := &state{end: end, stats: make([]float64, 3*nValues), distinct: make([]distinctSet, nDistinct)}
	for i := 0; i < nValues; i++ {
		s.stats[3*i+1] = math.Inf(1)
		s.stats[3*i+2] = math.Inf(-1)
	}
	return s
}

// stateSlab hands out empty states from chunks (a query's groups).
type stateSlab struct {
	nValues, nDistinct int
	states             []state
	floats             []float64
	distinct           []distinctSet
}

func (sl *stateSlab) state(end int64) *state {
	if len(sl.states) == 0 {
		sl.states = make([]state, 64)
	}
	s := &sl.states[0]
	sl.states = sl.states[1:]
	n := 3 * sl.nValues
	if len(sl.floats) < n {
		sl.floats = make([]float64, 64*n)
	}
	s.end, s.stats, sl.floats = end, sl.floats[:n:n], sl.floats[n:]
	for i := 0; i < n; i += 3 {
		s.stats[i+1], s.stats[i+2] = math.Inf(1), math.Inf(-1)
	}
	if sl.nDistinct > 0 {
		if len(sl.distinct) < sl.nDistinct {
			sl.distinct = make([]distinctSet, 64*sl.nDistinct)
		}
		s.distinct, sl.distinct = sl.distinct[:sl.nDistinct:sl.nDistinct], sl.distinct[sl.nDistinct:]
	}
	return s
}

// reset makes s empty (no events, no late ones).
func (s *state) reset() {
	s.count, s.late = 0, 0
	for i := 0; i < len(s.stats); i += 3 {
		s.stats[i], s.stats[i+1], s.stats[i+2] = 0, math.Inf(1), math.Inf(-1)
	}
	for i := range s.distinct {
		s.distinct[i] = distinctSet{}
	}
}

func (s *state) add(r *Record, exact int) {
	s.count++
	for i, v := range r.Values {
		st := s.stats[3*i : 3*i+3]
		st[0] += v
		st[1] = min(st[1], v)
		st[2] = max(st[2], v)
	}
	for i, v := range r.Distinct {
		s.distinct[i].insert(v, exact)
	}
}

// merge adds o's events to s (a session merge or a query's roll-up).
func (s *state) merge(o *state, exact int) {
	s.count += o.count
	s.late += o.late
	for i := 0; i < len(s.stats); i += 3 {
		s.stats[i] += o.stats[i]
		s.stats[i+1] = min(s.stats[i+1], o.stats[i+1])
		s.stats[i+2] = max(s.stats[i+2], o.stats[i+2])
	}
	for i := range s.distinct {
		s.distinct[i].merge(&o.distinct[i], exact)
	}
}

func (d *distinctSet) insert(v string, exact int) {
	if d.hll != nil {
		d.hll.Insert([]byte(v))
		return
	}
	if d.set == nil {
		d.set = make(map[string]struct{})
	}
	d.set[v] = struct{}{}
	if len(d.set) > exact {
		d.toSketch()
	}
}

func (d *distinctSet) toSketch() {
	d.hll = hyperloglog.New14()
	for v := range d.set {
		d.hll.Insert([]byte(v))
	}
	d.set = nil
}

func (d *distinctSet) merge(o *distinctSet, exact int) {
	switch {
	case o.hll != nil:
		if d.hll == nil {
			d.toSketch()
		}
		_ = d.hll.Merge(o.hll) // same precision everywhere: cannot fail
	case d.hll != nil:
		for v := range o.set {
			d.hll.Insert([]byte(v))
		}
	default:
		for v := range o.set {
			d.insert(v, exact)
		}
	}
}

// count returns the number of distinct values and whether it is exact.
func (d *distinctSet) count() (uint64, bool) {
	if d.hll != nil {
		return d.hll.Estimate(), false
	}
	return uint64(len(d.set)), true
}

// The value of a window entry: a format byte, end, count, late, the
// stats as float64 bits, then each distinct set: 0 and the values
// (uvarint length, bytes), or 1 and the sketch.
const stateFormat = 1

func (s *state) appendTo(b []byte) []byte {
	b = append(b, stateFormat)
	b = binary.BigEndian.AppendUint64(b, uint64(s.end))
	b = binary.AppendUvarint(b, s.count)
	b = binary.AppendUvarint(b, s.late)
	for _, f := range s.stats {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
	}
	for i := range s.distinct {
		d := &s.distinct[i]
		if d.hll != nil {
			b = append(b, 1)
			sk, _ := d.hll.MarshalBinary() // never fails
			b = binary.AppendUvarint(b, uint64(len(sk)))
			b = append(b, sk...)
			continue
		}
		b = append(b, 0)
		b = binary.AppendUvarint(b, uint64(len(d.set)))
		for v := range d.set {
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

var errBadState = errors.New("window: malformed window entry")

// decodeState reads an entry written by appendTo into a new state.
func decodeState(b []byte, nValues, nDistinct int, distinct bool) (*state, error) {
	s := &state{stats: make([]float64, 3*nValues), distinct: make([]distinctSet, nDistinct)}
	return s, s.decode(b, distinct)
}

// decode reads an entry written by appendTo into s, whose slices are
// sized for the definition; with distinct false it leaves the distinct
// sets empty (a query that does not need them).
func (s *state) decode(b []byte, distinct bool) error {
	if len(b) < 9 || b[0] != stateFormat {
		return errBadState
	}
	s.end = int64(binary.BigEndian.Uint64(b[1:9]))
	b = b[9:]
	var n int
	if s.count, n = binary.Uvarint(b); n <= 0 {
		return errBadState
	}
	b = b[n:]
	if s.late, n = binary.Uvarint(b); n <= 0 {
		return errBadState
	}
	b = b[n:]
	if len(b) < 8*len(s.stats) {
		return errBadState
	}
	for i := range s.stats {
		s.stats[i] = math.Float64frombits(binary.LittleEndian.Uint64(b))
		b = b[8:]
	}
	for i := range s.distinct {
		s.distinct[i] = distinctSet{}
	}
	if !distinct {
		return nil
	}
	for i := range s.distinct {
		if len(b) == 0 {
			return errBadState
		}
		mode := b[0]
		b = b[1:]
		l, n := binary.Uvarint(b)
		if n <= 0 {
			return errBadState
		}
		b = b[n:]
		switch mode {
		case 1:
			if uint64(len(b)) < l {
				return errBadState
			}
			sk := hyperloglog.New14()
			if err := sk.UnmarshalBinary(b[:l]); err != nil {
				return fmt.Errorf("%w: %w", errBadState, err)
			}
			s.distinct[i].hll = sk
			b = b[l:]
		case 0:
			set := make(map[string]struct{}, l)
			for range l {
				vl, n := binary.Uvarint(b)
				if n <= 0 || uint64(len(b)-n) < vl {
					return errBadState
				}
				set[string(b[n:n+int(vl)])] = struct{}{}
				b = b[n+int(vl):]
			}
			s.distinct[i].set = set
		default:
			return errBadState
		}
	}
	return nil
}
