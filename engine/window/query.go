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

	"github.com/logbook/logbook/engine/priority"
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
	// Final keeps only closed windows (end + grace <= stream time; for
	// sessions end + grace < stream time), whose aggregates never change
	// again.
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
	// LateOnly marks a row that holds only late events (Count is 0): a
	// window that was closed before any of its events came. For
	// sessions it is [t, t+gap) of a late event at t, a window that never
	// was a session.
	LateOnly bool `json:"late_only"`
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
	// SetAside counts the events not applied because their time was
	// more than Options.MaxSkew ahead of the clock or beyond the years
	// 1678 to 2262 (over the whole aggregation, not the query's range).
	SetAside uint64 `json:"set_aside"`
	Rows     []Row  `json:"rows"`
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
	for _, b := range []struct {
		name string
		t    time.Time
	}{{"from", q.From}, {"to", q.To}} {
		if !b.t.IsZero() && (b.t.Before(MinTime) || b.t.After(MaxTime)) {
			return nil, &QueryError{b.name, "outside the years 1678 to 2262 that event times can hold"}
		}
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
	priority.Begin()
	defer priority.End()
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

// run reads the windows p selects from one snapshot and merges them into
// groups, sorted by key.
func (a *Aggregation) run(p *plan) ([]*group, Result, error) {
	var res Result
	var s *scan
	err := a.read(func(r pebble.Reader, pos uint64) error {
		res.Position = pos
		st, err := streamTime(r)
		if err != nil {
			return err
		}
		if st != noTime {
			res.StreamTime = time.Unix(0, st).UTC()
		}
		if res.SetAside, err = setAsideCount(r); err != nil {
			return err
		}
		s = a.newScan(p, st)
		for _, prefix := range []byte{prefixWindow, prefixLate} {
			if err := s.prefix(r, prefix); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, res, err
	}
	a.lastGroups.Store(int64(len(s.out)))
	slices.SortFunc(s.out, func(x, y *group) int { return cmp.Compare(x.key, y.key) })
	return s.out, res, nil
}

// scan is one query's pass over the buckets: the groups it builds, the
// scratch it reuses, and which bucket's records it is reading.
type scan struct {
	a  *Aggregation
	p  *plan
	st int64 // the stream time of the snapshot

	byKey map[string]*group
	out   []*group
	// Groups, their states and dimensions come from chunks: a query's
	// allocations are what a live ingest's collections wait for.
	gslab []group
	dslab []string
	slabs stateSlab

	dims         [][]byte
	gk           []byte
	scratch      *state
	withDistinct bool
	scanned      int

	// A bucket's deltas come before its base, newest first: seen holds
	// the keys of the entries read from its newer records, which override
	// the same keys' entries in older ones. cur and curLevel name the
	// bucket; more tells whether a newer record of it was read.
	seen     map[string]struct{}
	cur      int64
	curLevel uint8
	more     bool
}

func (a *Aggregation) newScan(p *plan, st int64) *scan {
	return &scan{
		a: a, p: p, st: st,
		// Sized like the last answer: growing a map of a thousand
		// groups step by step was a large part of the benchmark's
		// query (docs/benchmarks.md, "Figures behind choices in the
		// code"). At most maxPresize: after one wide answer (up to
		// MaxRows groups) the narrow ones that follow would each
		// allocate its size.
		byKey:        make(map[string]*group, min(int(a.lastGroups.Load()), p.limit, maxPresize)),
		slabs:        stateSlab{nValues: len(a.def.Values), nDistinct: len(a.def.Distinct)},
		scratch:      newState(len(a.def.Values), len(a.def.Distinct), 0),
		withDistinct: len(a.def.Distinct) > 0,
		seen:         map[string]struct{}{},
	}
}

// prefix reads the records under one key prefix (windows or late counts)
// in the plan's level and time range.
func (s *scan) prefix(r pebble.Reader, prefix byte) error {
	lo := bucketKey(nil, prefix, s.p.level, s.p.from)
	hi := []byte{prefix, s.p.level + 1}
	if s.p.to != math.MaxInt64 {
		hi = bucketKey(nil, prefix, s.p.level, s.p.to)
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	s.cur, s.curLevel, s.more = 0, 0, false
	clear(s.seen)
	for it.First(); it.Valid(); it.Next() {
		if err := s.key(prefix, it.Key(), it.Value()); err != nil {
			it.Close()
			return err
		}
	}
	return it.Close()
}

// key reads one record: a late count, or a bucket's base or delta.
func (s *scan) key(prefix byte, k, v []byte) error {
	if len(k) < 10 || prefix == prefixWindow && !validBucketKey(k) {
		return errBadKey
	}
	start := readTime(k[2:10])
	if prefix == prefixLate {
		return s.addLate(start, k[10:], v)
	}
	return s.record(start, k, v)
}

// record is one bucket record being read.
type record struct {
	start   int64
	entries []byte
	// follow tells that older records of the bucket follow this one (it
	// is a delta, not the base): only then must its keys be remembered.
	follow bool
	// copied is one copy of entries, which the remembered keys are
	// substrings of: one allocation per delta, not per entry.
	copied string
}

// record reads the entries of one bucket record, through its index when
// the filter can use it.
func (s *scan) record(start int64, k, v []byte) error {
	_, entries, index, err := splitRecord(v)
	if err != nil {
		return err
	}
	if start != s.cur || k[1] != s.curLevel {
		s.cur, s.curLevel, s.more = start, k[1], false
		clear(s.seen)
	}
	rec := &record{start: start, entries: entries, follow: k[10] == suffixDelta}
	if rec.follow {
		rec.copied = string(entries)
	}
	if offsets, ok, ierr := s.a.filtered(s.p, index); ierr != nil {
		err = ierr
	} else if ok {
		err = s.indexed(rec, offsets)
	} else {
		err = s.all(rec)
	}
	s.more = s.more || rec.follow
	return err
}

// indexed reads only the entries the index lists for the filter.
func (s *scan) indexed(rec *record, offsets []byte) error {
	for off := uint64(0); len(offsets) > 0; {
		d, n := binary.Uvarint(offsets)
		if n <= 0 || off+d >= uint64(len(rec.entries)) {
			return errBadState
		}
		off += d
		offsets = offsets[n:]
		dims, sv, _, err := nextEntry(rec.entries[off:])
		if err != nil {
			return err
		}
		if err := s.entry(rec, dims, sv); err != nil {
			return err
		}
	}
	return nil
}

// all reads every entry of the record.
func (s *scan) all(rec *record) error {
	for rest := rec.entries; len(rest) > 0; {
		d, sv, next, err := nextEntry(rest)
		if err != nil {
			return err
		}
		rest = next
		// An entry the filter drops is dropped from the older records
		// too (same key, same values): it need not be remembered. A live
		// ingest's deltas hold up to half a bucket, and remembering all
		// of them was most of a filtered query's work.
		if len(s.p.filter) > 0 {
			keep, err := s.a.keeps(s.p, d, &s.dims)
			if err != nil {
				return err
			}
			if !keep {
				continue
			}
		}
		if err := s.entry(rec, d, sv); err != nil {
			return err
		}
	}
	return nil
}

// entry adds the entry of a record with encoded dimensions d and state
// sv, unless a newer record of the bucket had the same key.
func (s *scan) entry(rec *record, d, sv []byte) error {
	if s.more {
		if _, ok := s.seen[string(d)]; ok {
			return nil
		}
	}
	if rec.follow {
		at := cap(rec.entries) - cap(d) // d lies in entries
		s.seen[rec.copied[at:at+len(d)]] = struct{}{}
	}
	ok, err := s.admit(d)
	if err != nil || !ok {
		return err
	}
	if err := s.scratch.decode(sv, s.withDistinct); err != nil {
		return err
	}
	return s.merge(rec.start)
}

// addLate adds the late count of a window closed before it came, its
// encoded dimensions d, its value v.
func (s *scan) addLate(start int64, d, v []byte) error {
	ok, err := s.admit(d)
	if err != nil || !ok {
		return err
	}
	if len(v) < 9 {
		return errBadState
	}
	s.scratch.reset()
	s.scratch.end = readTime(v)
	s.scratch.late, _ = binary.Uvarint(v[8:])
	return s.merge(start)
}

// admit counts one window read against MaxScan, splits its encoded
// dimensions into s.dims and tells whether they pass the filter.
func (s *scan) admit(rawDims []byte) (bool, error) {
	if s.scanned++; s.scanned > s.a.opts.MaxScan {
		return false, fmt.Errorf("%w: more than %d windows to read; narrow the time range or use a larger unit", ErrTooLarge, s.a.opts.MaxScan)
	}
	var err error
	if s.dims, err = splitDims(rawDims, s.dims); err != nil {
		return false, err
	}
	if len(s.dims) != len(s.a.def.Dims) {
		return false, errBadKey
	}
	for _, f := range s.p.filter {
		if string(s.dims[f.i]) != f.value {
			return false, nil
		}
	}
	return true, nil
}

// merge merges the window in s.scratch, starting at start, with the
// dimensions in s.dims into its group, which it makes if it is new.
func (s *scan) merge(start int64) error {
	p := s.p
	bstart, bend := start, s.scratch.end
	if p.unit > 0 {
		bstart = floorDiv(start, p.unit)
		bend = bstart + p.unit
	}
	if p.final && !s.a.def.closedAt(bend, s.st) {
		return nil
	}
	s.gk = appendTime(appendTime(s.gk[:0], bstart), bend)
	for _, i := range p.group {
		s.gk = appendDim(s.gk, string(s.dims[i]))
	}
	g := s.byKey[string(s.gk)]
	if g == nil {
		if len(s.byKey) >= p.limit {
			return fmt.Errorf("%w: more than %d rows; narrow the query or group by fewer dimensions", ErrTooLarge, p.limit)
		}
		g = s.newGroup(bstart, bend)
	}
	g.st.merge(s.scratch, s.a.exact)
	return nil
}

// newGroup makes the group of key s.gk, from the chunks.
func (s *scan) newGroup(start, end int64) *group {
	n := len(s.p.group)
	if len(s.gslab) == 0 {
		s.gslab = make([]group, 64)
	}
	g := &s.gslab[0]
	s.gslab = s.gslab[1:]
	*g = group{key: string(s.gk), start: start, end: end, st: s.slabs.state(end)}
	if len(s.dslab) < n {
		s.dslab = make([]string, 64*n)
	}
	g.dims, s.dslab = s.dslab[:0:n], s.dslab[n:]
	for _, i := range s.p.group {
		g.dims = append(g.dims, string(s.dims[i]))
	}
	s.byKey[g.key] = g
	s.out = append(s.out, g)
	return g
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
			LateOnly: g.st.count == 0 && g.st.late > 0,
		}
		if !st.IsZero() {
			r.Closed = a.def.closedAt(g.end, st.UnixNano())
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
		all, res, err := a.answer(p)
		if err != nil {
			return err
		}
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
	if x.Count != y.Count || x.Late != y.Late || x.Closed != y.Closed || x.LateOnly != y.LateOnly {
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

// NextStart returns the start of the earliest window of size unit
// (the window size or a roll-up of a tumbling aggregation) starting at
// or after from that holds anything, events or late counts; ok is false
// when there is none. It is one seek, however long the empty stretch
// before that window: a reader of closed windows (pgsink) skips what
// holds nothing instead of asking for it one unit at a time.
func (a *Aggregation) NextStart(_ context.Context, unit time.Duration, from time.Time) (next time.Time, ok bool, err error) {
	level := -1
	for l, size := range a.sizes {
		if size == int64(unit) {
			level = l
		}
	}
	if level < 0 || a.def.Window.Kind != KindTumbling {
		return time.Time{}, false, &QueryError{"unit", fmt.Sprintf("%s is not a window size of %s", unit, a.def.Name)}
	}
	if from.Before(MinTime) || from.After(MaxTime) {
		return time.Time{}, false, &QueryError{"from", "outside the years 1678 to 2262 that event times can hold"}
	}
	f := from.UnixNano()
	err = a.read(func(r pebble.Reader, _ uint64) error {
		earliest := int64(math.MaxInt64)
		for _, prefix := range []byte{prefixWindow, prefixLate} {
			it, err := r.NewIter(&pebble.IterOptions{
				LowerBound: bucketKey(nil, prefix, uint8(level), f),
				UpperBound: []byte{prefix, uint8(level) + 1},
			})
			if err != nil {
				return err
			}
			if it.First() && len(it.Key()) >= 10 {
				earliest, ok = min(earliest, readTime(it.Key()[2:10])), true
			}
			if err := it.Close(); err != nil {
				return err
			}
		}
		next = time.Unix(0, earliest).UTC()
		return nil
	})
	return next, ok, err
}

// answer runs one answer of a live query as foreground work.
func (a *Aggregation) answer(p *plan) ([]Row, Result, error) {
	priority.Begin()
	defer priority.End()
	groups, res, err := a.run(p)
	if err != nil {
		return nil, res, err
	}
	return a.rows(p, groups, res.StreamTime), res, nil
}
