package storetest

import (
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

func appendTests() []testCase {
	return []testCase{
		{"NoStream", testAppendNoStream},
		{"Exactly", testAppendExactly},
		{"Any", testAppendAny},
		{"Result", testAppendResult},
		{"MultiEventContiguous", testAppendMultiEventContiguous},
		{"PositionsAcrossStreams", testAppendPositionsAcrossStreams},
		{"RoundTrip", testAppendRoundTrip},
		{"GeneratedIDs", testAppendGeneratedIDs},
		{"CallerBuffersNotRetained", testAppendCallerBuffersNotRetained},
	}
}

func testAppendNoStream(t *testing.T, s eventstore.Store) {
	res := mustAppend(t, s, "order-1", eventstore.NoStream, evs("created", 2)...)
	wantResult(t, "first append", res, eventstore.AppendResult{Stream: "order-1", FirstSeq: 1, LastSeq: 2, FirstPosition: 1, LastPosition: 2})

	before := captureState(t, s)
	_, err := s.Append(t.Context(), "order-1", eventstore.NoStream, evs("again", 1))
	wantConflict(t, "NoStream on a stream at version 2", err, "order-1", eventstore.NoStream, 2)
	wantUnchanged(t, "after the conflict", s, before)

	// NoStream concerns only the named stream.
	res = mustAppend(t, s, "order-2", eventstore.NoStream, evs("created", 1)...)
	wantResult(t, "NoStream on another stream", res, eventstore.AppendResult{Stream: "order-2", FirstSeq: 1, LastSeq: 1, FirstPosition: 3, LastPosition: 3})
}

func testAppendExactly(t *testing.T, s eventstore.Store) {
	// Exactly(0) is the version of a stream without events.
	res := mustAppend(t, s, "acct", eventstore.Exactly(0), evs("opened", 1)...)
	wantResult(t, "Exactly(0) on a new stream", res, eventstore.AppendResult{Stream: "acct", FirstSeq: 1, LastSeq: 1, FirstPosition: 1, LastPosition: 1})
	res = mustAppend(t, s, "acct", eventstore.Exactly(1), evs("deposited", 3)...)
	wantResult(t, "Exactly(1)", res, eventstore.AppendResult{Stream: "acct", FirstSeq: 2, LastSeq: 4, FirstPosition: 2, LastPosition: 4})

	before := captureState(t, s)
	for _, v := range []uint64{0, 1, 3, 5, 100} {
		_, err := s.Append(t.Context(), "acct", eventstore.Exactly(v), evs("stale", 2))
		wantConflict(t, "Exactly on a stream at version 4", err, "acct", eventstore.Exactly(v), 4)
	}
	_, err := s.Append(t.Context(), "nothing-here", eventstore.Exactly(2), evs("x", 1))
	wantConflict(t, "Exactly(2) on an empty stream", err, "nothing-here", eventstore.Exactly(2), 0)
	wantUnchanged(t, "after the conflicts", s, before)

	res = mustAppend(t, s, "acct", eventstore.Exactly(4), evs("closed", 1)...)
	wantResult(t, "Exactly(4)", res, eventstore.AppendResult{Stream: "acct", FirstSeq: 5, LastSeq: 5, FirstPosition: 5, LastPosition: 5})
	if v := streamVersion(t, s, "acct"); v != 5 {
		t.Fatalf("StreamVersion = %d, want 5", v)
	}
}

func testAppendAny(t *testing.T, s eventstore.Store) {
	for i := uint64(0); i < 4; i++ {
		res := mustAppend(t, s, "log", eventstore.Any, evs("line", 2)...)
		wantResult(t, "Any", res, eventstore.AppendResult{Stream: "log", FirstSeq: 2*i + 1, LastSeq: 2*i + 2, FirstPosition: 2*i + 1, LastPosition: 2*i + 2})
	}
	wantSeqs(t, "ReadStream after Any appends", readStream(t, s, "log"), 1, 8)
}

func testAppendResult(t *testing.T, s eventstore.Store) {
	steps := []struct {
		stream string
		n      int
		want   eventstore.AppendResult
	}{
		{"a", 3, eventstore.AppendResult{Stream: "a", FirstSeq: 1, LastSeq: 3, FirstPosition: 1, LastPosition: 3}},
		{"b", 1, eventstore.AppendResult{Stream: "b", FirstSeq: 1, LastSeq: 1, FirstPosition: 4, LastPosition: 4}},
		{"a", 2, eventstore.AppendResult{Stream: "a", FirstSeq: 4, LastSeq: 5, FirstPosition: 5, LastPosition: 6}},
		{"b", 4, eventstore.AppendResult{Stream: "b", FirstSeq: 2, LastSeq: 5, FirstPosition: 7, LastPosition: 10}},
		{"c", 1, eventstore.AppendResult{Stream: "c", FirstSeq: 1, LastSeq: 1, FirstPosition: 11, LastPosition: 11}},
	}
	for _, st := range steps {
		events := withIDs(evs("e", st.n))
		res := mustAppend(t, s, st.stream, eventstore.Any, events...)
		wantResult(t, "append to "+st.stream, res, st.want)
		// The result names exactly where the events are.
		got := readStream(t, s, st.stream)[res.FirstSeq-1:]
		for i := range events {
			wantStored(t, "event of the append", got[i], events[i], st.stream, res.FirstSeq+uint64(i), res.FirstPosition+uint64(i))
		}
		if h := head(t, s); h != res.LastPosition {
			t.Fatalf("Head = %d after an append ending at %d", h, res.LastPosition)
		}
		if v := streamVersion(t, s, st.stream); v != res.LastSeq {
			t.Fatalf("StreamVersion(%q) = %d after an append ending at seq %d", st.stream, v, res.LastSeq)
		}
	}
}

func testAppendMultiEventContiguous(t *testing.T, s eventstore.Store) {
	mustAppend(t, s, "other", eventstore.Any, evs("x", 2)...)
	events := withIDs(evs("batch", 50, "multi"))
	res := mustAppend(t, s, "big", eventstore.NoStream, events...)
	wantResult(t, "50-event append", res, eventstore.AppendResult{Stream: "big", FirstSeq: 1, LastSeq: 50, FirstPosition: 3, LastPosition: 52})
	mustAppend(t, s, "other", eventstore.Any, evs("y", 2)...)

	got := readStream(t, s, "big")
	wantSeqs(t, "the 50-event stream", got, 1, 50)
	wantPositions(t, "the 50-event stream", got, 3, 52)
	for i := range events {
		wantStored(t, "event of the batch", got[i], events[i], "big", uint64(i+1), uint64(i+3))
	}
	// The same events, in the same order, through the global log and the tag index.
	all := readAll(t, s)
	wantPositions(t, "ReadAll", all, 1, 54)
	for i := range events {
		if all[i+2].ID != events[i].ID {
			t.Fatalf("ReadAll position %d holds %s, want event %d of the batch", i+3, all[i+2].ID, i)
		}
	}
	tagged := readTag(t, s, "multi", 1)
	wantPositions(t, "ReadTag", tagged, 3, 52)
}

func testAppendPositionsAcrossStreams(t *testing.T, s eventstore.Store) {
	// Interleave appends of various sizes to several streams: per-stream
	// seqs count 1, 2, 3… and global positions run without gaps.
	sizes := []int{1, 3, 2, 5, 1, 4, 2, 1, 3}
	streams := []string{"s1", "s2", "s3"}
	var pos uint64
	seq := map[string]uint64{}
	for i, n := range sizes {
		stream := streams[i%len(streams)]
		res := mustAppend(t, s, stream, eventstore.Exactly(seq[stream]), evs("e", n)...)
		want := eventstore.AppendResult{Stream: stream, FirstSeq: seq[stream] + 1, LastSeq: seq[stream] + uint64(n), FirstPosition: pos + 1, LastPosition: pos + uint64(n)}
		wantResult(t, "interleaved append", res, want)
		seq[stream] += uint64(n)
		pos += uint64(n)
	}
	all := readAll(t, s)
	wantPositions(t, "ReadAll", all, 1, pos)
	for _, stream := range streams {
		got := readStream(t, s, stream)
		wantSeqs(t, "ReadStream("+stream+")", got, 1, seq[stream])
		for i := 1; i < len(got); i++ {
			if got[i].Position <= got[i-1].Position {
				t.Fatalf("stream %s: seq %d at position %d, after seq %d at %d", stream, got[i].Seq, got[i].Position, got[i-1].Seq, got[i-1].Position)
			}
		}
		for _, e := range got {
			if d := diffEvent(e, all[e.Position-1]); d != "" {
				t.Fatalf("stream %s seq %d differs from ReadAll at position %d: %s", stream, e.Seq, e.Position, d)
			}
		}
	}
	if h := head(t, s); h != pos {
		t.Fatalf("Head = %d, want %d", h, pos)
	}
}

func testAppendRoundTrip(t *testing.T, s eventstore.Store) {
	start := time.Now()
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	events := []eventstore.NewEvent{
		{
			ID:      eventstore.NewID(),
			Type:    "OrderPlaced",
			Version: 3,
			Tags:    []string{"customer:7", "region:eu", "ünïcode ✓"},
			Meta:    map[string]string{"correlation": "c-1", "user": "ann", "empty": "", "": "empty key"},
			Data:    binary,
		},
		{
			// The bare minimum: only a type.
			ID:   eventstore.NewID(),
			Type: "Pinged",
		},
		{
			ID:      eventstore.NewID(),
			Type:    "json",
			Version: 1 << 20,
			Tags:    []string{"customer:7"},
			Data:    []byte(`{"a":1,"b":"\u0000"}`),
		},
	}
	res := mustAppend(t, s, "order-7", eventstore.NoStream, events...)

	check := func(what string, got []eventstore.Event, idx ...int) {
		t.Helper()
		if len(got) != len(idx) {
			t.Fatalf("%s: %d events, want %d", what, len(got), len(idx))
		}
		for i, k := range idx {
			wantStored(t, what, got[i], events[k], "order-7", res.FirstSeq+uint64(k), res.FirstPosition+uint64(k))
			if got[i].Time.Before(start.Add(-time.Minute)) {
				t.Fatalf("%s: Time %v is long before the append at %v", what, got[i].Time, start)
			}
		}
	}
	check("ReadStream", readStream(t, s, "order-7"), 0, 1, 2)
	check("ReadAll", readAll(t, s), 0, 1, 2)
	check("ReadTag", readTag(t, s, "customer:7", 1), 0, 2)
	check("ReadTag", readTag(t, s, "ünïcode ✓", 1), 0)
	back, err := s.ReadStreamBackward(t.Context(), "order-7", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	check("ReadStreamBackward", back, 2, 1, 0)
}

func testAppendGeneratedIDs(t *testing.T, s eventstore.Store) {
	events := evs("gen", 5) // no ids
	events[2].ID = eventstore.NewID()
	given := events[2].ID
	res := mustAppend(t, s, "gen", eventstore.NoStream, events...)
	seen := map[eventstore.ID]bool{}
	for i, e := range events {
		if e.ID.IsZero() {
			t.Fatalf("event %d: the generated id was not written back into the caller's slice", i)
		}
		if seen[e.ID] {
			t.Fatalf("event %d: generated id %s used twice", i, e.ID)
		}
		seen[e.ID] = true
	}
	if events[2].ID != given {
		t.Fatalf("the caller's id %s was replaced by %s", given, events[2].ID)
	}
	got := readStream(t, s, "gen")
	for i := range events {
		wantStored(t, "event with generated id", got[i], events[i], "gen", res.FirstSeq+uint64(i), res.FirstPosition+uint64(i))
	}
	// Ids are generated per append, never reused.
	more := evs("gen", 5)
	mustAppend(t, s, "gen", eventstore.Any, more...)
	for i, e := range more {
		if seen[e.ID] {
			t.Fatalf("second append, event %d: id %s was already generated", i, e.ID)
		}
	}
}

func testAppendCallerBuffersNotRetained(t *testing.T, s eventstore.Store) {
	data := []byte("original")
	tags := []string{"t1"}
	meta := map[string]string{"k": "v"}
	mustAppend(t, s, "buf", eventstore.NoStream, eventstore.NewEvent{Type: "e", Data: data, Tags: tags, Meta: meta})
	// The store must not keep referring to the caller's memory.
	copy(data, "MUTATED!")
	tags[0] = "t2"
	meta["k"] = "changed"
	got := readStream(t, s, "buf")
	if len(got) != 1 {
		t.Fatalf("%d events, want 1", len(got))
	}
	if d := diffContent(got[0], eventstore.NewEvent{Type: "e", Data: []byte("original"), Tags: []string{"t1"}, Meta: map[string]string{"k": "v"}}); d != "" {
		t.Fatalf("stored event changed with the caller's buffers: %s", d)
	}
}
