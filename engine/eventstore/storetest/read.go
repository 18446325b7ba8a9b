package storetest

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
)

func readTests() []testCase {
	return []testCase{
		{"EmptyStore", testReadEmptyStore},
		{"ReadStream", testReadStream},
		{"ReadStreamBackward", testReadStreamBackward},
		{"ReadAll", testReadAll},
		{"ReadTag", testReadTag},
		{"ListStreams", testListStreams},
		{"StreamVersionAndHead", testStreamVersionAndHead},
	}
}

// readFixture is what writeReadFixture wrote, as the writer knows it.
type readFixture struct {
	byPos    []eventstore.NewEvent // index position-1
	streamOf []string              // index position-1
	byStream map[string][]eventstore.NewEvent
}

// writeReadFixture interleaves appends to streams whose names are
// prefixes of one another, with tags that are prefixes of one another.
func writeReadFixture(t *testing.T, s eventstore.Store) readFixture {
	t.Helper()
	f := readFixture{byStream: map[string][]eventstore.NewEvent{}}
	plan := []struct {
		stream string
		n      int
	}{{"a", 3}, {"b", 2}, {"ab", 1}, {"a", 4}, {"a b", 1}, {"b", 3}, {"ab", 1}, {"a", 3}}
	for _, p := range plan {
		events := make([]eventstore.NewEvent, p.n)
		for i := range events {
			n := len(f.byPos) + i // position-1
			var tags []string
			if n%3 == 0 {
				tags = append(tags, "hot")
			}
			if n%4 == 0 {
				tags = append(tags, "ho")
			}
			if n%5 == 0 {
				tags = append(tags, "hot2")
			}
			events[i] = eventstore.NewEvent{ID: eventstore.NewID(), Type: "e", Data: fmt.Appendf(nil, "%s #%d", p.stream, n+1), Tags: tags}
		}
		mustAppend(t, s, p.stream, eventstore.Any, events...)
		f.byPos = append(f.byPos, events...)
		for range events {
			f.streamOf = append(f.streamOf, p.stream)
		}
		f.byStream[p.stream] = append(f.byStream[p.stream], events...)
	}
	return f
}

// posOf returns the position of the fixture event with id.
func (f readFixture) posOf(id eventstore.ID) uint64 {
	for i := range f.byPos {
		if f.byPos[i].ID == id {
			return uint64(i + 1)
		}
	}
	return 0
}

// wantStreamEvents checks events read from stream against the fixture's
// events at the given seqs.
func (f readFixture) wantStreamEvents(t *testing.T, what string, got []eventstore.Event, stream string, seqs ...uint64) {
	t.Helper()
	if len(got) != len(seqs) {
		t.Fatalf("%s: %d events (seqs %v), want seqs %v", what, len(got), abbrev(keys(got, bySeq)), seqs)
	}
	for i, seq := range seqs {
		want := f.byStream[stream][seq-1]
		wantStored(t, what, got[i], want, stream, seq, f.posOf(want.ID))
	}
}

// wantPage checks one page of a read that asked for max events, where
// more are there: it must hold at least one and at most max (a backend may
// cap a read below max, but not return nothing while there is more); check
// compares the n events with the first n expected.
func wantPage(t *testing.T, what string, got []eventstore.Event, err error, max int, check func(got []eventstore.Event, n int)) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if len(got) == 0 || len(got) > max {
		t.Fatalf("%s: %d events, want 1..%d", what, len(got), max)
	}
	check(got, len(got))
}

func keys(events []eventstore.Event, key func(eventstore.Event) uint64) []uint64 {
	out := make([]uint64, len(events))
	for i, e := range events {
		out[i] = key(e)
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	if from <= to {
		for v := from; v <= to; v++ {
			out = append(out, v)
		}
	} else {
		for v := from; v >= to; v-- {
			out = append(out, v)
		}
	}
	return out
}

func wantEmpty(t *testing.T, what string, got []eventstore.Event, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v, want no events and no error", what, err)
	}
	if len(got) != 0 {
		t.Fatalf("%s: %d events (first at position %d), want none", what, len(got), got[0].Position)
	}
}

func testReadEmptyStore(t *testing.T, s eventstore.Store) {
	ctx := t.Context()
	if h := head(t, s); h != 0 {
		t.Fatalf("Head of an empty store = %d", h)
	}
	if v := streamVersion(t, s, "x"); v != 0 {
		t.Fatalf("StreamVersion of an unknown stream = %d", v)
	}
	got, err := s.ReadAll(ctx, 1, 10)
	wantEmpty(t, "ReadAll of an empty store", got, err)
	got, err = s.ReadStream(ctx, "x", 1, 10)
	wantEmpty(t, "ReadStream of an unknown stream", got, err)
	got, err = s.ReadStreamBackward(ctx, "x", 0, 10)
	wantEmpty(t, "ReadStreamBackward of an unknown stream", got, err)
	got, err = s.ReadTag(ctx, "t", 1, 10)
	wantEmpty(t, "ReadTag of an unknown tag", got, err)
	names, err := s.ListStreams(ctx, "", 10)
	if err != nil || len(names) != 0 {
		t.Fatalf("ListStreams of an empty store: %q, %v", names, err)
	}
}

func testReadStream(t *testing.T, s eventstore.Store) {
	f := writeReadFixture(t, s)
	ctx := t.Context()
	for _, c := range []struct {
		from uint64
		max  int
		want []uint64 // all of them, or a prefix if the backend caps max
	}{
		{1, 3, seqRange(1, 3)},
		{4, 3, seqRange(4, 6)},
		{8, 5, seqRange(8, 10)},
		{10, 5, []uint64{10}},
		{1, 100, seqRange(1, 10)},
	} {
		what := fmt.Sprintf("ReadStream(a, from %d, max %d)", c.from, c.max)
		got, err := s.ReadStream(ctx, "a", c.from, c.max)
		wantPage(t, what, got, err, c.max, func(got []eventstore.Event, n int) {
			f.wantStreamEvents(t, what, got, "a", c.want[:n]...)
		})
	}
	for _, from := range []uint64{11, 1000, math.MaxUint64} {
		got, err := s.ReadStream(ctx, "a", from, 5)
		wantEmpty(t, fmt.Sprintf("ReadStream(a) from %d, past its end", from), got, err)
	}
	got, err := s.ReadStream(ctx, "unknown", 1, 5)
	wantEmpty(t, "ReadStream of an unknown stream", got, err)
	got, err = s.ReadStream(ctx, "a ", 1, 5) // a prefix of "a b", an extension of "a"
	wantEmpty(t, "ReadStream of an unknown stream", got, err)

	// Paging through each stream, 3 at a time, from its start and from
	// its middle: every event once, and no event of another stream
	// (some stream ids are prefixes of others).
	for stream, events := range f.byStream {
		n := uint64(len(events))
		for _, from := range []uint64{1, n/2 + 1} {
			all, err := readForward(func(from uint64, max int) ([]eventstore.Event, error) {
				return s.ReadStream(ctx, stream, from, max)
			}, bySeq, from, 3)
			if err != nil {
				t.Fatalf("paging through %q: %v", stream, err)
			}
			f.wantStreamEvents(t, "paging through "+stream, all, stream, seqRange(from, n)...)
		}
	}
}

func testReadStreamBackward(t *testing.T, s eventstore.Store) {
	f := writeReadFixture(t, s)
	ctx := t.Context()
	for _, c := range []struct {
		from uint64
		max  int
		want []uint64
	}{
		{0, 3, seqRange(10, 8)}, // from the end
		{0, 100, seqRange(10, 1)},
		{5, 2, seqRange(5, 4)},
		{5, 100, seqRange(5, 1)},
		{1, 5, []uint64{1}},
		{10, 1, []uint64{10}},
		{11, 3, seqRange(10, 8)}, // from past the end
		{math.MaxUint64, 3, seqRange(10, 8)},
	} {
		what := fmt.Sprintf("ReadStreamBackward(a, from %d, max %d)", c.from, c.max)
		got, err := s.ReadStreamBackward(ctx, "a", c.from, c.max)
		wantPage(t, what, got, err, c.max, func(got []eventstore.Event, n int) {
			f.wantStreamEvents(t, what, got, "a", c.want[:n]...)
		})
	}
	for _, stream := range []string{"unknown", "a ", "a\u00a0"} {
		got, err := s.ReadStreamBackward(ctx, stream, 0, 5)
		wantEmpty(t, "ReadStreamBackward of unknown stream "+stream, got, err)
	}

	// Paging backward through each stream, 2 at a time, from its end.
	for stream, events := range f.byStream {
		var all []eventstore.Event
		from := uint64(0)
		for {
			page, err := s.ReadStreamBackward(ctx, stream, from, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > 2 {
				t.Fatalf("ReadStreamBackward(%q, %d, 2) returned %d events", stream, from, len(page))
			}
			if len(page) == 0 {
				break
			}
			all = append(all, page...)
			last := page[len(page)-1].Seq
			if last == 1 {
				break
			}
			from = last - 1
		}
		f.wantStreamEvents(t, "paging backward through "+stream, all, stream, seqRange(uint64(len(events)), 1)...)
	}
}

// wantLog checks events read from the global log against the fixture's
// events at the given positions.
func (f readFixture) wantLog(t *testing.T, what string, got []eventstore.Event, positions ...uint64) {
	t.Helper()
	if len(got) != len(positions) {
		t.Fatalf("%s: %d events (positions %v), want positions %v", what, len(got), abbrev(keys(got, byPosition)), abbrev(positions))
	}
	for i, pos := range positions {
		want := f.byPos[pos-1]
		stream := f.streamOf[pos-1]
		seq := uint64(slices.IndexFunc(f.byStream[stream], func(e eventstore.NewEvent) bool { return e.ID == want.ID }) + 1)
		wantStored(t, what, got[i], want, stream, seq, pos)
	}
}

func testReadAll(t *testing.T, s eventstore.Store) {
	f := writeReadFixture(t, s)
	ctx := t.Context()
	n := uint64(len(f.byPos))
	for _, c := range []struct {
		from uint64
		max  int
		want []uint64
	}{
		{1, 4, seqRange(1, 4)},
		{7, 3, seqRange(7, 9)},
		{n, 10, []uint64{n}},
		{1, 1000, seqRange(1, n)},
	} {
		what := fmt.Sprintf("ReadAll(from %d, max %d)", c.from, c.max)
		got, err := s.ReadAll(ctx, c.from, c.max)
		wantPage(t, what, got, err, c.max, func(got []eventstore.Event, k int) {
			f.wantLog(t, what, got, c.want[:k]...)
		})
	}
	for _, from := range []uint64{n + 1, n + 1000, math.MaxUint64} {
		got, err := s.ReadAll(ctx, from, 5)
		wantEmpty(t, fmt.Sprintf("ReadAll from %d, past the head", from), got, err)
	}
	for _, from := range []uint64{1, 6} {
		all, err := readForward(func(from uint64, max int) ([]eventstore.Event, error) {
			return s.ReadAll(ctx, from, max)
		}, byPosition, from, 4)
		if err != nil {
			t.Fatal(err)
		}
		f.wantLog(t, fmt.Sprintf("paging through ReadAll from %d", from), all, seqRange(from, n)...)
	}
}

func testReadTag(t *testing.T, s eventstore.Store) {
	f := writeReadFixture(t, s)
	ctx := t.Context()
	// "ho" is a prefix of "hot", which is a prefix of "hot2".
	for _, tag := range []string{"hot", "ho", "hot2"} {
		var tagged []uint64
		for i, e := range f.byPos {
			if slices.Contains(e.Tags, tag) {
				tagged = append(tagged, uint64(i+1))
			}
		}
		if len(tagged) < 4 {
			t.Fatalf("fixture: tag %q on only %d events", tag, len(tagged))
		}
		for _, from := range []uint64{1, tagged[0], tagged[0] + 1, tagged[2], tagged[len(tagged)-1]} {
			want := slices.DeleteFunc(slices.Clone(tagged), func(p uint64) bool { return p < from })
			what := fmt.Sprintf("ReadTag(%q, from %d, max 2)", tag, from)
			got, err := s.ReadTag(ctx, tag, from, 2)
			wantPage(t, what, got, err, 2, func(got []eventstore.Event, n int) {
				f.wantLog(t, what, got, want[:n]...)
			})
			all, err := readForward(func(from uint64, max int) ([]eventstore.Event, error) {
				return s.ReadTag(ctx, tag, from, max)
			}, byPosition, from, 2)
			if err != nil {
				t.Fatal(err)
			}
			f.wantLog(t, "paging through "+what, all, want...)
		}
		got, err := s.ReadTag(ctx, tag, tagged[len(tagged)-1]+1, 5)
		wantEmpty(t, "ReadTag past the last tagged event", got, err)
	}
	for _, tag := range []string{"h", "hot3", "unknown"} {
		got, err := s.ReadTag(ctx, tag, 1, 5)
		wantEmpty(t, "ReadTag of unknown tag "+tag, got, err)
	}
}

func testListStreams(t *testing.T, s eventstore.Store) {
	ctx := t.Context()
	names := []string{"b", "a", "ab", "a b", "é", "z", "b/1", "B", "a-"}
	for _, name := range names {
		mustAppend(t, s, name, eventstore.NoStream, evs("e", 2)...)
	}
	mustAppend(t, s, "a", eventstore.Any, evs("more", 1)...) // a stream counts once
	sorted := slices.Clone(names)
	slices.Sort(sorted) // byte order: B a a b a- ab b b/1 z é

	got, err := s.ListStreams(ctx, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || len(got) > len(sorted) || !slices.Equal(got, sorted[:len(got)]) {
		t.Fatalf("ListStreams(\"\", 100) = %q, want (a prefix of) %q", got, sorted)
	}
	if all := listStreams(t, s); !slices.Equal(all, sorted) {
		t.Fatalf("paging through ListStreams: %q, want %q", all, sorted)
	}
	for _, c := range []struct {
		after string
		max   int
	}{
		{"", 2},
		{"a", 3},   // an existing stream: excluded
		{"a ", 10}, // between streams
		{"aa", 2},
		{"b", 10},
		{"b/", 1},
		{"A", 4},
	} {
		var want []string
		for _, n := range sorted {
			if n > c.after {
				want = append(want, n)
			}
		}
		got, err := s.ListStreams(ctx, c.after, c.max)
		what := fmt.Sprintf("ListStreams(%q, %d)", c.after, c.max)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(got) == 0 || len(got) > c.max || !slices.Equal(got, want[:len(got)]) {
			t.Fatalf("%s = %q, want (a prefix of) %q", what, got, want[:min(c.max, len(want))])
		}
	}
	for _, after := range []string{"é", "ë", "\U0010ffff"} {
		got, err := s.ListStreams(ctx, after, 10)
		if err != nil || len(got) != 0 {
			t.Fatalf("ListStreams(%q) after the last stream = %q, %v; want none", after, got, err)
		}
	}
}

func testStreamVersionAndHead(t *testing.T, s eventstore.Store) {
	versions := map[string]uint64{}
	var pos uint64
	for i, n := range []int{2, 1, 3, 1, 4} {
		stream := []string{"x", "y"}[i%2]
		mustAppend(t, s, stream, eventstore.Any, evs("e", n)...)
		versions[stream] += uint64(n)
		pos += uint64(n)
		if h := head(t, s); h != pos {
			t.Fatalf("Head = %d, want %d", h, pos)
		}
		for name, v := range versions {
			if got := streamVersion(t, s, name); got != v {
				t.Fatalf("StreamVersion(%q) = %d, want %d", name, got, v)
			}
		}
	}
	for _, unknown := range []string{"z", "xy", "x "} {
		if v := streamVersion(t, s, unknown); v != 0 {
			t.Fatalf("StreamVersion(%q) of an unknown stream = %d", unknown, v)
		}
	}
}
