package window

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Query selects and groups windows.
type Query struct {
	// From and To select the windows starting in [From, To); zero values
	// leave that side open.
	From, To time.Time
	// Unit rolls a tumbling aggregation's windows up into windows of this
	// size, which must be a multiple of the window size; 0 answers with
	// the aggregation's own windows. A unit that is one of the roll-ups
	// reads that level directly. Count, sum, min, max and average roll up
	// exactly; distinct counts are the union of the sets (exact while the
	// union fits in DistinctExact, an estimate beyond). From and To must
	// be multiples of the unit.
	Unit time.Duration
	// Filter keeps windows whose dimensions have these values.
	Filter map[string]string
	// GroupBy names the dimensions that stay in the answer; the others
	// are aggregated over.
	GroupBy []string
	// Final keeps only closed windows (end + grace <= stream time), whose
	// aggregates never change again.
	Final bool
	// Limit bounds the rows (0: Options.MaxRows, also the maximum).
	Limit int
}

// Row is one window of one group.
type Row struct {
	Start time.Time         `json:"start"`
	End   time.Time         `json:"end"`
	Dims  map[string]string `json:"dims"`
	Count uint64            `json:"count"`
	// Late counts the events that arrived after the window's grace.
	Late     uint64                   `json:"late"`
	Values   map[string]Stat          `json:"values,omitempty"`
	Distinct map[string]DistinctCount `json:"distinct,omitempty"`
	// Closed tells whether the window is past its grace (final).
	Closed bool `json:"closed"`
}

// Stat is the aggregates of one numeric field; Min, Max and Avg are nil
// when the window counted no event.
type Stat struct {
	Sum float64  `json:"sum"`
	Min *float64 `json:"min"`
	Max *float64 `json:"max"`
	Avg *float64 `json:"avg"`
}

// DistinctCount is a count of distinct values: exact, or a HyperLogLog
// estimate.
type DistinctCount struct {
	Count uint64 `json:"count"`
	Exact bool   `json:"exact"`
}

// Result is a query's answer.
type Result struct {
	// Position is the log position the answer reflects.
	Position uint64 `json:"position"`
	// StreamTime is the largest event time seen (zero: none yet).
	StreamTime time.Time `json:"stream_time"`
	Rows       []Row     `json:"rows"`
}

// QueryError is a query the aggregation cannot answer as asked.
type QueryError struct {
	Param  string // the offending parameter
	Detail string
}

func (e *QueryError) Error() string { return "window: " + e.Param + ": " + e.Detail }

// maxPresize bounds the groups a query's map is sized for in advance.
const maxPresize = 2048

// ErrTooLarge is a query whose answer would exceed MaxRows or whose
// scan would exceed MaxScan: narrow it.
var ErrTooLarge = errors.New("window: query too large")

// plan is a checked query.
type plan struct {
	level    uint8
	unit     int64 // re-bucketing size, 0 for none
	from, to int64
	filter   []filterDim
	group    []int // indexes into Dims
	final    bool
	limit    int
}

type filterDim struct {
	i     int
	value string
}

func (a *Aggregation) plan(q Query) (*plan, error) {
	p := &plan{from: math.MinInt64, to: math.MaxInt64, final: q.Final, limit: a.opts.MaxRows}
	if q.Limit > 0 && q.Limit < p.limit {
		p.limit = q.Limit
	}
	if q.Limit < 0 {
		return nil, &QueryError{"limit", "must not be negative"}
	}
	if !q.From.IsZero() {
		p.from = q.From.UnixNano()
	}
	if !q.To.IsZero() {
		p.to = q.To.UnixNano()
	}
	if p.to < p.from {
		return nil, &QueryError{"to", "is before from"}
	}
	if q.Unit < 0 {
		return nil, &QueryError{"unit", "must be positive"}
	}
	if q.Unit > 0 {
		if a.def.Window.Kind != KindTumbling {
			return nil, &QueryError{"unit", fmt.Sprintf("%s windows overlap or vary in size and do not roll up; query them without a unit", a.def.Window.Kind)}
		}
		u := int64(q.Unit)
		found := false
		for l := len(a.sizes) - 1; l >= 0; l-- {
			if u%a.sizes[l] == 0 {
				p.level, found = uint8(l), true
				if u != a.sizes[l] {
					p.unit = u
				}
				break
			}
		}
		if !found {
			return nil, &QueryError{"unit", fmt.Sprintf("%s is not a multiple of the window size %s", q.Unit, time.Duration(a.sizes[0]))}
		}
		if p.unit > 0 && (!q.From.IsZero() && p.from%p.unit != 0 || !q.To.IsZero() && p.to%p.unit != 0) {
			return nil, &QueryError{"from", fmt.Sprintf("from and to must be multiples of the unit %s", q.Unit)}
		}
	}
	index := map[string]int{}
	for i, d := range a.def.Dims {
		index[d] = i
	}
	for name, v := range q.Filter {
		i, ok := index[name]
		if !ok {
			return nil, &QueryError{name, "is not a dimension of " + a.def.Name}
		}
		p.filter = append(p.filter, filterDim{i, v})
	}
	seen := map[string]bool{}
	for _, name := range q.GroupBy {
		i, ok := index[name]
		if !ok {
			return nil, &QueryError{"group_by", fmt.Sprintf("%q is not a dimension of %s", name, a.def.Name)}
		}
		if seen[name] {
			return nil, &QueryError{"group_by", fmt.Sprintf("%q named twice", name)}
		}
		seen[name] = true
		p.group = append(p.group, i)
	}
	return p, nil
}

// Query answers q from a consistent snapshot of the aggregation.
func (a *Aggregation) Query(_ context.Context, q Query) (Result, error) {
	p, err := a.plan(q)
	if err != nil {
		return Result{}, err
	}
	a.beginQuery()
	defer a.endQuery()
	groups, res, err := a.run(p)
	if err != nil {
		return Result{}, err
	}
	res.Rows = a.rows(p, groups, res.StreamTime)
	return res, nil
}

// group is one row being computed.
type group struct {
	key        string
	start, end int64
	dims       []string
	st         *state
}

func (a *Aggregation) run(p *plan) ([]*group, Result, error) {
	var res Result
	var out []*group
	err := a.read(func(r pebble.Reader, pos uint64) error {
		res.Position = pos
		st, err := streamTime(r)
		if err != nil {
			return err
		}
		if st != noTime {
			res.StreamTime = time.Unix(0, st).UTC()
		}
		// Sized like the last answer: growing a map of a thousand
		// groups step by step was a large part of the benchmark's
		// query (docs/benchmarks.md, "Figures behind choices in the
		// code"). At most maxPresize: after one wide answer (up to
		// MaxRows groups) the narrow ones that follow would each
		// allocate its size.
		byKey := make(map[string]*group, min(int(a.lastGroups.Load()), p.limit, maxPresize))
		var gslab []group
		var dslab []string
		slabs := stateSlab{nValues: len(a.def.Values), nDistinct: len(a.def.Distinct)}
		var dims [][]byte
		var gk []byte
		grace := int64(a.def.Grace)
		scratch := newState(len(a.def.Values), len(a.def.Distinct), 0)
		withDistinct := len(a.def.Distinct) > 0
		scanned := 0
		// add merges one window of one key into its group.
		add := func(start int64, rawDims []byte, decode func(*state) error) error {
			if scanned++; scanned > a.opts.MaxScan {
				return fmt.Errorf("%w: more than %d windows to read; narrow the time range or use a larger unit", ErrTooLarge, a.opts.MaxScan)
			}
			var err error
			if dims, err = splitDims(rawDims, dims); err != nil {
				return err
			}
			if len(dims) != len(a.def.Dims) {
				return errBadKey
			}
			for _, f := range p.filter {
				if string(dims[f.i]) != f.value {
					return nil
				}
			}
			if err := decode(scratch); err != nil {
				return err
			}
			bstart, bend := start, scratch.end
			if p.unit > 0 {
				bstart = floorDiv(start, p.unit)
				bend = bstart + p.unit
			}
			if p.final && (st == noTime || bend > st-grace) {
				return nil
			}
			gk = appendTime(appendTime(gk[:0], bstart), bend)
			for _, i := range p.group {
				gk = appendDim(gk, string(dims[i]))
			}
			g := byKey[string(gk)]
			if g == nil {
				if len(byKey) >= p.limit {
					return fmt.Errorf("%w: more than %d rows; narrow the query or group by fewer dimensions", ErrTooLarge, p.limit)
				}
				// Groups, their states and dimensions come from chunks:
				// a query's allocations are what a live ingest's
				// collections wait for.
				if len(gslab) == 0 {
					gslab = make([]group, 64)
				}
				g, gslab = &gslab[0], gslab[1:]
				*g = group{key: string(gk), start: bstart, end: bend, st: slabs.state(bend)}
				if len(dslab) < len(p.group) {
					dslab = make([]string, 64*len(p.group))
				}
				g.dims, dslab = dslab[:0:len(p.group)], dslab[len(p.group):]
				for _, i := range p.group {
					g.dims = append(g.dims, string(dims[i]))
				}
				byKey[g.key] = g
				out = append(out, g)
			}
			g.st.merge(scratch, a.exact)
			return nil
		}
		for _, prefix := range []byte{prefixWindow, prefixLate} {
			lo := bucketKey(nil, prefix, p.level, p.from)
			hi := []byte{prefix, p.level + 1}
			if p.to != math.MaxInt64 {
				hi = bucketKey(nil, prefix, p.level, p.to)
			}
			it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
			if err != nil {
				return err
			}
			// A bucket's deltas come before its base, newest first: seen
			// holds the keys of the entries read from its newer records,
			// which override the same keys' entries in older ones.
			seen := map[string]struct{}{}
			cur, curLevel, more := int64(0), uint8(0), false
			for it.First(); it.Valid(); it.Next() {
				k, v := it.Key(), it.Value()
				if len(k) < 10 || prefix == prefixWindow && !validBucketKey(k) {
					it.Close()
					return errBadKey
				}
				start := readTime(k[2:10])
				if prefix == prefixLate {
					// A late count of a window closed before it came.
					err = add(start, k[10:], func(s *state) error {
						if len(v) < 9 {
							return errBadState
						}
						s.reset()
						s.end = readTime(v)
						s.late, _ = binary.Uvarint(v[8:])
						return nil
					})
				} else {
					var entries, index []byte
					if _, entries, index, err = splitRecord(v); err != nil {
						it.Close()
						return err
					}
					if start != cur || k[1] != curLevel {
						cur, curLevel, more = start, k[1], false
						clear(seen)
					}
					// Records of this bucket follow this one unless it is
					// the base; only then must its keys be remembered.
					follow := k[10] == suffixDelta
					// A delta's keys are remembered as substrings of one
					// copy of it: one allocation per delta, not per entry.
					var copied string
					if follow {
						copied = string(entries)
					}
					remember := func(d []byte) {
						at := cap(entries) - cap(d) // d lies in entries
						seen[copied[at:at+len(d)]] = struct{}{}
					}
					one := func(e []byte) error {
						d, sv, _, err := nextEntry(e)
						if err != nil {
							return err
						}
						if more {
							if _, ok := seen[string(d)]; ok {
								return nil
							}
						}
						if follow {
							remember(d)
						}
						return add(start, d, func(s *state) error { return s.decode(sv, withDistinct) })
					}
					if offsets, ok, ierr := a.filtered(p, index); ierr != nil {
						err = ierr
					} else if ok {
						// Only the entries the index lists for the filter.
						for off := uint64(0); len(offsets) > 0 && err == nil; {
							d, n := binary.Uvarint(offsets)
							if n <= 0 || off+d >= uint64(len(entries)) {
								err = errBadState
								break
							}
							off += d
							offsets = offsets[n:]
							err = one(entries[off:])
						}
					} else {
						for rest := entries; len(rest) > 0 && err == nil; {
							var d, sv []byte
							if d, sv, rest, err = nextEntry(rest); err != nil {
								break
							}
							// An entry the filter drops is dropped from the
							// older records too (same key, same values): it
							// need not be remembered. A live ingest's deltas
							// hold up to half a bucket, and remembering all
							// of them was most of a filtered query's work.
							if len(p.filter) > 0 {
								var keep bool
								if keep, err = a.keeps(p, d, &dims); err != nil {
									break
								}
								if !keep {
									continue
								}
							}
							if more {
								if _, ok := seen[string(d)]; ok {
									continue
								}
							}
							if follow {
								remember(d)
							}
							err = add(start, d, func(s *state) error { return s.decode(sv, withDistinct) })
						}
					}
					more = more || follow
				}
				if err != nil {
					it.Close()
					return err
				}
			}
			if err := it.Close(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, res, err
	}
	a.lastGroups.Store(int64(len(out)))
	slices.SortFunc(out, func(x, y *group) int { return cmp.Compare(x.key, y.key) })
	return out, res, nil
}

// keeps tells whether the entry with encoded dimensions d passes the
// query's filter; dims is scratch.
func (a *Aggregation) keeps(p *plan, d []byte, dims *[][]byte) (bool, error) {
	var err error
	if *dims, err = splitDims(d, *dims); err != nil {
		return false, err
	}
	if len(*dims) != len(a.def.Dims) {
		return false, errBadKey
	}
	for _, f := range p.filter {
		if string((*dims)[f.i]) != f.value {
			return false, nil
		}
	}
	return true, nil
}

// filtered returns, for a base with an index and a query with a filter,
// the offsets of the entries of the filter's value that has the fewest
// (the others are checked on each entry); ok is false when every entry
// must be read.
func (a *Aggregation) filtered(p *plan, index []byte) (offsets []byte, ok bool, err error) {
	if index == nil || len(p.filter) == 0 {
		return nil, false, nil
	}
	for i, f := range p.filter {
		l, err := indexLookup(index, f.i, f.value)
		if err != nil {
			return nil, false, err
		}
		if i == 0 || len(l) < len(offsets) {
			offsets = l
		}
	}
	return offsets, true, nil
}

func (a *Aggregation) rows(p *plan, groups []*group, st time.Time) []Row {
	rows := make([]Row, 0, len(groups))
	var floats []float64 // min, max and average, from chunks
	for _, g := range groups {
		r := Row{
			Start: time.Unix(0, g.start).UTC(), End: time.Unix(0, g.end).UTC(),
			Dims:  make(map[string]string, len(p.group)),
			Count: g.st.count, Late: g.st.late,
		}
		if !st.IsZero() {
			r.Closed = g.end <= st.UnixNano()-int64(a.def.Grace)
		}
		for j, i := range p.group {
			r.Dims[a.def.Dims[i]] = g.dims[j]
		}
		if len(a.def.Values) > 0 {
			r.Values = make(map[string]Stat, len(a.def.Values))
			for i, name := range a.def.Values {
				s := Stat{Sum: g.st.stats[3*i]}
				if g.st.count > 0 {
					if len(floats) < 3 {
						floats = make([]float64, 3*min(len(groups), 256)*len(a.def.Values))
					}
					f := floats[:3:3]
					floats = floats[3:]
					f[0], f[1], f[2] = g.st.stats[3*i+1], g.st.stats[3*i+2], g.st.stats[3*i]/float64(g.st.count)
					s.Min, s.Max, s.Avg = &f[0], &f[1], &f[2]
				}
				r.Values[name] = s
			}
		}
		if len(a.def.Distinct) > 0 {
			r.Distinct = make(map[string]DistinctCount, len(a.def.Distinct))
			for i, name := range a.def.Distinct {
				n, exact := g.st.distinct[i].count()
				r.Distinct[name] = DistinctCount{n, exact}
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// rowKey identifies a row across answers of a live query.
func rowKey(r *Row, groupBy []string) string {
	var b []byte
	b = appendTime(b, r.Start.UnixNano())
	b = appendTime(b, r.End.UnixNano())
	for _, d := range groupBy {
		b = appendDim(b, r.Dims[d])
	}
	return string(b)
}

// ErrTooManyLive refuses a live query beyond Options.MaxLive.
var ErrTooManyLive = errors.New("window: too many live queries")

// Live answers q, then answers again with the rows that changed (new
// rows, or any aggregate different) each time the aggregation commits,
// at most every LiveInterval, until ctx ends or the aggregation closes
// (ErrClosed). A row is sent with its latest value; the changes of one
// row between two answers are coalesced. emit must not keep the slice.
func (a *Aggregation) Live(ctx context.Context, q Query, emit func(Result) error) error {
	p, err := a.plan(q)
	if err != nil {
		return err
	}
	a.mu.Lock()
	if a.live >= a.opts.MaxLive {
		a.mu.Unlock()
		return fmt.Errorf("%w (%d running)", ErrTooManyLive, a.live)
	}
	a.live++
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.live--
		a.mu.Unlock()
	}()
	groupBy := make([]string, len(p.group))
	for j, i := range p.group {
		groupBy[j] = a.def.Dims[i]
	}
	sent := map[string]Row{}
	for first := true; ; first = false {
		a.mu.Lock()
		changed, closed := a.changed, a.closed
		a.mu.Unlock()
		if closed {
			return ErrClosed
		}
		a.beginQuery()
		groups, res, err := a.run(p)
		if err != nil {
			a.endQuery()
			return err
		}
		all := a.rows(p, groups, res.StreamTime)
		a.endQuery()
		// Only the rows of this answer are remembered: what a live query
		// holds is bounded like an answer.
		now := make(map[string]Row, len(all))
		res.Rows = all[:0:0]
		for _, r := range all {
			k := rowKey(&r, groupBy)
			now[k] = r
			if old, ok := sent[k]; ok && sameRow(&old, &r) {
				continue
			}
			res.Rows = append(res.Rows, r)
		}
		sent = now
		if first || len(res.Rows) > 0 {
			if err := emit(res); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.opts.LiveInterval):
		}
	}
}

func sameRow(x, y *Row) bool {
	if x.Count != y.Count || x.Late != y.Late || x.Closed != y.Closed {
		return false
	}
	for k, v := range x.Values {
		w := y.Values[k]
		if v.Sum != w.Sum || !eqPtr(v.Min, w.Min) || !eqPtr(v.Max, w.Max) {
			return false
		}
	}
	for k, v := range x.Distinct {
		if v != y.Distinct[k] {
			return false
		}
	}
	return true
}

func eqPtr(x, y *float64) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }

// Span returns the start of the earliest window of the aggregation's own
// windows (counting windows that hold only late events) and the stream
// time (now); ok is false while the aggregation has seen no event.
func (a *Aggregation) Span(context.Context) (first, now time.Time, ok bool, err error) {
	err = a.read(func(r pebble.Reader, _ uint64) error {
		st, err := streamTime(r)
		if err != nil || st == noTime {
			return err
		}
		ok = true
		now = time.Unix(0, st).UTC()
		earliest := int64(math.MaxInt64)
		for _, prefix := range []byte{prefixWindow, prefixLate} {
			it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix, 0}, UpperBound: []byte{prefix, 1}})
			if err != nil {
				return err
			}
			if it.First() && len(it.Key()) >= 10 {
				earliest = min(earliest, readTime(it.Key()[2:10]))
			}
			if err := it.Close(); err != nil {
				return err
			}
		}
		if earliest == math.MaxInt64 {
			earliest = st
		}
		first = time.Unix(0, earliest).UTC()
		return nil
	})
	return first, now, ok, err
}
