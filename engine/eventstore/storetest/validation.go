package storetest

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/backend"
)

// The default limits (eventstore.Limits), which the suite expects open's
// stores to use.
const (
	maxStreamIDBytes = 256
	maxTypeBytes     = 256
	maxTagBytes      = 128
	maxTags          = 16
	maxEventBytes    = 1 << 20
	maxAppendBytes   = 16 << 20
	maxAppendEvents  = 10_000
)

func validationTests() []testCase {
	return []testCase{
		{"Refused", testValidationRefused},
		{"AtTheLimits", testValidationAtTheLimits},
	}
}

// sized returns an event whose backend.EventSize is exactly size.
func sized(typ string, size int, tags []string, meta map[string]string) eventstore.NewEvent {
	e := eventstore.NewEvent{Type: typ, Tags: tags, Meta: meta}
	e.Data = make([]byte, size-backend.EventSize(&e))
	for i := range e.Data {
		e.Data[i] = byte(i)
	}
	return e
}

// afterGood puts bad after two good events, so that a store that writes as
// it validates would leave the good ones behind.
func afterGood(bad ...eventstore.NewEvent) []eventstore.NewEvent {
	return append(withIDs(evs("good", 2)), bad...)
}

func manyTags(n int) []string {
	tags := make([]string, n)
	for i := range tags {
		tags[i] = fmt.Sprintf("tag-%02d", i)
	}
	return tags
}

func testValidationRefused(t *testing.T, s eventstore.Store) {
	mustAppend(t, s, "victim", eventstore.NoStream, evs("seed", 2, "seeded")...)

	oneMiB := sized("big", maxEventBytes, nil, nil)
	tooBig := sized("big", maxEventBytes+1, nil, nil)
	tooBigWithMeta := sized("big", maxEventBytes+1, []string{"t"}, map[string]string{"key": "value"})
	sixteen := make([]eventstore.NewEvent, maxAppendBytes/maxEventBytes+1)
	for i := range sixteen {
		sixteen[i] = oneMiB // the same Data backs all of them
	}

	type badCase struct {
		name   string
		stream string
		expect eventstore.ExpectedVersion
		events []eventstore.NewEvent
		want   error
	}
	cases := []badCase{
		{name: "empty stream id", stream: "", want: eventstore.ErrInvalidStreamID},
		{name: "stream id of 257 bytes", stream: strings.Repeat("s", maxStreamIDBytes+1), want: eventstore.ErrInvalidStreamID},
		{name: "stream id of 257 bytes in 129 characters", stream: strings.Repeat("é", maxStreamIDBytes/2) + "x", want: eventstore.ErrInvalidStreamID},
		{name: "stream id with NUL", stream: "a\x00b", want: eventstore.ErrInvalidStreamID},
		{name: "stream id with newline", stream: "a\nb", want: eventstore.ErrInvalidStreamID},
		{name: "stream id with tab", stream: "a\tb", want: eventstore.ErrInvalidStreamID},
		{name: "stream id with DEL", stream: "a\x7f", want: eventstore.ErrInvalidStreamID},
		{name: "stream id with unit separator", stream: "\x1f", want: eventstore.ErrInvalidStreamID},
		{name: "stream id with invalid UTF-8", stream: "bad\xffid", want: eventstore.ErrInvalidStreamID},
		{name: "stream id with truncated UTF-8", stream: "caf\xc3", want: eventstore.ErrInvalidStreamID},
		{name: "empty tag", events: afterGood(ev("e", "", "ok", "")), want: eventstore.ErrInvalidTag},
		{name: "tag of 129 bytes", events: afterGood(ev("e", "", strings.Repeat("t", maxTagBytes+1))), want: eventstore.ErrInvalidTag},
		{name: "tag with NUL", events: afterGood(ev("e", "", "a\x00")), want: eventstore.ErrInvalidTag},
		{name: "tag with newline", events: afterGood(ev("e", "", "a\nb")), want: eventstore.ErrInvalidTag},
		{name: "tag with invalid UTF-8", events: afterGood(ev("e", "", "\xfe")), want: eventstore.ErrInvalidTag},
		{name: "repeated tag", events: afterGood(ev("e", "", "a", "b", "a")), want: eventstore.ErrInvalidTag},
		{name: "17 tags", events: afterGood(ev("e", "", manyTags(maxTags+1)...)), want: eventstore.ErrInvalidTag},
		{name: "empty type", events: afterGood(ev("", "data")), want: eventstore.ErrInvalidEvent},
		{name: "type of 257 bytes", events: afterGood(ev(strings.Repeat("T", maxTypeBytes+1), "")), want: eventstore.ErrInvalidEvent},
		{name: "type with control character", events: afterGood(ev("Order\x01Placed", "")), want: eventstore.ErrInvalidEvent},
		{name: "type with invalid UTF-8", events: afterGood(ev("Order\xff", "")), want: eventstore.ErrInvalidEvent},
		{name: "negative schema version", events: afterGood(eventstore.NewEvent{Type: "e", Version: -1}), want: eventstore.ErrInvalidEvent},
		{name: "event of 1 MiB + 1", events: afterGood(tooBig), want: eventstore.ErrEventTooLarge},
		{name: "event of 1 MiB + 1 counting tags and meta", events: afterGood(tooBigWithMeta), want: eventstore.ErrEventTooLarge},
		{name: "append of 17 MiB", events: sixteen, want: eventstore.ErrAppendTooLarge},
		{name: "append of 10001 events", events: evs("many", maxAppendEvents+1), want: eventstore.ErrAppendTooLarge},
		{name: "nil events", events: nil, want: eventstore.ErrEmptyAppend},
		{name: "empty events", events: []eventstore.NewEvent{}, want: eventstore.ErrEmptyAppend},
		{name: "expected version -3", expect: eventstore.ExpectedVersion(-3), want: eventstore.ErrInvalidExpectedVersion},
		{name: "expected version MinInt64", expect: eventstore.ExpectedVersion(math.MinInt64), want: eventstore.ErrInvalidExpectedVersion},
	}
	for _, tc := range cases {
		if tc.stream == "" && tc.want != eventstore.ErrInvalidStreamID {
			tc.stream = "victim"
		}
		if tc.events == nil && tc.want != eventstore.ErrEmptyAppend {
			tc.events = afterGood()
		}
		expects := []eventstore.ExpectedVersion{tc.expect}
		if tc.expect == 0 {
			// Refused whatever the expected version, including one the
			// stream satisfies.
			expects = []eventstore.ExpectedVersion{eventstore.Any, eventstore.Exactly(2)}
		}
		for _, expect := range expects {
			wantRefused(t, s, fmt.Sprintf("%s (%v)", tc.name, expect), tc.stream, expect, tc.events, tc.want)
		}
	}
	// The store still works, and the stream is where it was.
	res := mustAppend(t, s, "victim", eventstore.Exactly(2), evs("after", 1)...)
	wantResult(t, "append after the refusals", res, eventstore.AppendResult{Stream: "victim", FirstSeq: 3, LastSeq: 3, FirstPosition: 3, LastPosition: 3})
}

func testValidationAtTheLimits(t *testing.T, s eventstore.Store) {
	// Exactly at each limit is allowed.
	accepted := []struct {
		name   string
		stream string
		events []eventstore.NewEvent
	}{
		{"stream id of 256 bytes", strings.Repeat("s", maxStreamIDBytes), evs("e", 1)},
		{"stream id of 256 bytes in 128 characters", strings.Repeat("é", maxStreamIDBytes/2), evs("e", 1)},
		{"stream id with spaces and symbols", "Order 42/line:1 → ✓", evs("e", 1)},
		{"tag of 128 bytes", "tags", []eventstore.NewEvent{ev("e", "", strings.Repeat("t", maxTagBytes))}},
		{"16 tags", "tags", []eventstore.NewEvent{ev("e", "", manyTags(maxTags)...)}},
		{"type of 256 bytes", "types", []eventstore.NewEvent{ev(strings.Repeat("T", maxTypeBytes), "")}},
		{"schema version 0", "types", []eventstore.NewEvent{{Type: "v0", Version: 0}}},
		{"event of 1 MiB", "big", []eventstore.NewEvent{sized("big", maxEventBytes, nil, nil)}},
		{"event of 1 MiB with tags and meta", "big", []eventstore.NewEvent{sized("big", maxEventBytes, []string{"t1", "t2"}, map[string]string{"k": "v"})}},
	}
	for _, a := range accepted {
		v := streamVersion(t, s, a.stream)
		res := mustAppend(t, s, a.stream, eventstore.Exactly(v), a.events...)
		got, err := s.ReadStream(t.Context(), a.stream, res.FirstSeq, len(a.events))
		if err != nil {
			t.Fatalf("%s: ReadStream: %v", a.name, err)
		}
		if len(got) != len(a.events) {
			t.Fatalf("%s: read %d events back, want %d", a.name, len(got), len(a.events))
		}
		for i := range got {
			wantStored(t, a.name, got[i], a.events[i], a.stream, res.FirstSeq+uint64(i), res.FirstPosition+uint64(i))
		}
	}

	// An append of 16 events of 1 MiB each: 16 MiB, the append limit.
	full := make([]eventstore.NewEvent, maxAppendBytes/maxEventBytes)
	data := sized("full", maxEventBytes, nil, nil)
	for i := range full {
		full[i] = data
	}
	res := mustAppend(t, s, "full", eventstore.NoStream, full...)
	if res.LastSeq != uint64(len(full)) || res.LastPosition-res.FirstPosition+1 != uint64(len(full)) {
		t.Fatalf("16 MiB append: result %+v", res)
	}
	last, err := s.ReadStreamBackward(t.Context(), "full", 0, 1)
	if err != nil || len(last) != 1 {
		t.Fatalf("ReadStreamBackward of the 16 MiB stream: %d events, %v", len(last), err)
	}
	wantStored(t, "last event of the 16 MiB append", last[0], full[15], "full", 16, res.LastPosition)

	// An append of 10,000 events, the count limit.
	many := evs("many", maxAppendEvents)
	res = mustAppend(t, s, "many", eventstore.NoStream, many...)
	if res.FirstSeq != 1 || res.LastSeq != maxAppendEvents || res.LastPosition-res.FirstPosition+1 != maxAppendEvents {
		t.Fatalf("10,000-event append: result %+v", res)
	}
	if h := head(t, s); h != res.LastPosition {
		t.Fatalf("Head = %d, want %d", h, res.LastPosition)
	}
	tail := must[[]eventstore.Event](t)(readStreamE(t.Context(), s, "many", maxAppendEvents-2))
	wantSeqs(t, "the end of the 10,000-event stream", tail, maxAppendEvents-2, maxAppendEvents)
	for i, e := range tail {
		wantStored(t, "event of the 10,000-event append", e, many[maxAppendEvents-3+i], "many", e.Seq, res.FirstPosition+e.Seq-1)
	}
}
