package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

// pageSize is the max the read helpers ask for: small, so that reading a
// test's few hundred events exercises paging.
const pageSize = 7

// ev builds a NewEvent with data and tags.
func ev(typ, data string, tags ...string) eventstore.NewEvent {
	return eventstore.NewEvent{Type: typ, Data: []byte(data), Tags: tags}
}

// evs builds n events "<typ>-<i>" without ids.
func evs(typ string, n int, tags ...string) []eventstore.NewEvent {
	out := make([]eventstore.NewEvent, n)
	for i := range out {
		out[i] = ev(typ, fmt.Sprintf("%s-%d", typ, i), tags...)
	}
	return out
}

// withIDs gives each event a fresh client-chosen id.
func withIDs(events []eventstore.NewEvent) []eventstore.NewEvent {
	for i := range events {
		events[i].ID = eventstore.NewID()
	}
	return events
}

func idsOf(events []eventstore.NewEvent) []eventstore.ID {
	ids := make([]eventstore.ID, len(events))
	for i := range events {
		ids[i] = events[i].ID
	}
	return ids
}

func storedIDs(events []eventstore.Event) []eventstore.ID {
	ids := make([]eventstore.ID, len(events))
	for i := range events {
		ids[i] = events[i].ID
	}
	return ids
}

func mustAppend(t *testing.T, s eventstore.Store, stream string, expect eventstore.ExpectedVersion, events ...eventstore.NewEvent) eventstore.AppendResult {
	t.Helper()
	res, err := s.Append(t.Context(), stream, expect, events)
	if err != nil {
		t.Fatalf("Append(%q, %v, %d events): %v", stream, expect, len(events), err)
	}
	if res.Duplicate {
		t.Fatalf("Append(%q, %v, %d events) of new events: Duplicate set in %+v", stream, expect, len(events), res)
	}
	return res
}

// wantResult checks an AppendResult field by field.
func wantResult(t *testing.T, what string, got, want eventstore.AppendResult) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: AppendResult %+v, want %+v", what, got, want)
	}
}

// wantErrIs checks that err matches target with errors.Is.
func wantErrIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %v", what, target)
	}
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v (%T), want errors.Is %v", what, err, err, target)
	}
}

// wantConflict checks that err is a *ConflictError with the given fields.
func wantConflict(t *testing.T, what string, err error, stream string, expect eventstore.ExpectedVersion, actual uint64) {
	t.Helper()
	wantErrIs(t, what, err, eventstore.ErrVersionConflict)
	var ce *eventstore.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: error %v (%T) is not a *eventstore.ConflictError", what, err, err)
	}
	if ce.Stream != stream || ce.Expected != expect || ce.Actual != actual {
		t.Fatalf("%s: ConflictError{Stream: %q, Expected: %v, Actual: %d}, want {%q, %v, %d}",
			what, ce.Stream, ce.Expected, ce.Actual, stream, expect, actual)
	}
}

// readForward pages through a forward read from from until it returns an
// empty page, checking that each page respects max, starts at or after
// from, and that key (seq or position) strictly increases.
func readForward(read func(from uint64, max int) ([]eventstore.Event, error), key func(eventstore.Event) uint64, from uint64, max int) ([]eventstore.Event, error) {
	var out []eventstore.Event
	for pages := 0; ; pages++ {
		if pages > 1_000_000 {
			return nil, errors.New("read does not end")
		}
		page, err := read(from, max)
		if err != nil {
			return nil, err
		}
		if len(page) > max {
			return nil, fmt.Errorf("read from %d with max %d returned %d events", from, max, len(page))
		}
		if len(page) == 0 {
			return out, nil
		}
		for _, e := range page {
			if key(e) < from {
				return nil, fmt.Errorf("read from %d returned an event at %d", from, key(e))
			}
			from = key(e) + 1
		}
		out = append(out, page...)
	}
}

func bySeq(e eventstore.Event) uint64      { return e.Seq }
func byPosition(e eventstore.Event) uint64 { return e.Position }

func readStreamE(ctx context.Context, s eventstore.Store, stream string, from uint64) ([]eventstore.Event, error) {
	evs, err := readForward(func(from uint64, max int) ([]eventstore.Event, error) {
		return s.ReadStream(ctx, stream, from, max)
	}, bySeq, from, pageSize)
	if err != nil {
		return nil, fmt.Errorf("ReadStream(%q): %w", stream, err)
	}
	for _, e := range evs {
		if e.Stream != stream {
			return nil, fmt.Errorf("ReadStream(%q) returned an event of stream %q", stream, e.Stream)
		}
	}
	return evs, nil
}

func readAllE(ctx context.Context, s eventstore.Store, from uint64) ([]eventstore.Event, error) {
	evs, err := readForward(func(from uint64, max int) ([]eventstore.Event, error) {
		return s.ReadAll(ctx, from, max)
	}, byPosition, from, 100)
	if err != nil {
		return nil, fmt.Errorf("ReadAll: %w", err)
	}
	return evs, nil
}

func readTagE(ctx context.Context, s eventstore.Store, tag string, from uint64) ([]eventstore.Event, error) {
	evs, err := readForward(func(from uint64, max int) ([]eventstore.Event, error) {
		return s.ReadTag(ctx, tag, from, max)
	}, byPosition, from, pageSize)
	if err != nil {
		return nil, fmt.Errorf("ReadTag(%q): %w", tag, err)
	}
	for _, e := range evs {
		if !slices.Contains(e.Tags, tag) {
			return nil, fmt.Errorf("ReadTag(%q) returned event at %d with tags %q", tag, e.Position, e.Tags)
		}
	}
	return evs, nil
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func readStream(t *testing.T, s eventstore.Store, stream string) []eventstore.Event {
	t.Helper()
	return must[[]eventstore.Event](t)(readStreamE(t.Context(), s, stream, 1))
}

func readAll(t *testing.T, s eventstore.Store) []eventstore.Event {
	t.Helper()
	return must[[]eventstore.Event](t)(readAllE(t.Context(), s, 1))
}

func readTag(t *testing.T, s eventstore.Store, tag string, from uint64) []eventstore.Event {
	t.Helper()
	return must[[]eventstore.Event](t)(readTagE(t.Context(), s, tag, from))
}

func listStreamsE(ctx context.Context, s eventstore.Store) ([]string, error) {
	var out []string
	after := ""
	for {
		page, err := s.ListStreams(ctx, after, 3)
		if err != nil {
			return nil, fmt.Errorf("ListStreams(%q): %w", after, err)
		}
		if len(page) > 3 {
			return nil, fmt.Errorf("ListStreams(%q, 3) returned %d streams", after, len(page))
		}
		if len(page) == 0 {
			return out, nil
		}
		for _, name := range page {
			if name <= after {
				return nil, fmt.Errorf("ListStreams(%q) returned %q, not after it", after, name)
			}
			after = name
		}
		out = append(out, page...)
	}
}

func listStreams(t *testing.T, s eventstore.Store) []string {
	t.Helper()
	return must[[]string](t)(listStreamsE(t.Context(), s))
}

func head(t *testing.T, s eventstore.Store) uint64 {
	t.Helper()
	h, err := s.Head(t.Context())
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	return h
}

func streamVersion(t *testing.T, s eventstore.Store, stream string) uint64 {
	t.Helper()
	v, err := s.StreamVersion(t.Context(), stream)
	if err != nil {
		t.Fatalf("StreamVersion(%q): %v", stream, err)
	}
	return v
}

// storeState is everything a reader can see, to check that a refused
// append wrote nothing.
type storeState struct {
	head     uint64
	versions map[string]uint64
	events   []eventstore.Event
}

func captureState(t *testing.T, s eventstore.Store) storeState {
	t.Helper()
	st := storeState{head: head(t, s), versions: map[string]uint64{}}
	for _, name := range listStreams(t, s) {
		st.versions[name] = streamVersion(t, s, name)
	}
	st.events = readAll(t, s)
	return st
}

func wantUnchanged(t *testing.T, what string, s eventstore.Store, before storeState) {
	t.Helper()
	after := captureState(t, s)
	if after.head != before.head {
		t.Fatalf("%s: Head moved from %d to %d", what, before.head, after.head)
	}
	if !maps.Equal(after.versions, before.versions) {
		t.Fatalf("%s: stream versions changed from %v to %v", what, before.versions, after.versions)
	}
	if len(after.events) != len(before.events) {
		t.Fatalf("%s: ReadAll returns %d events, before %d", what, len(after.events), len(before.events))
	}
	for i := range after.events {
		if d := diffEvent(after.events[i], before.events[i]); d != "" {
			t.Fatalf("%s: event %d changed: %s", what, i, d)
		}
	}
}

// diffEvent describes how two stored events differ, "" if they do not.
// Nil and empty slices and maps count as equal.
func diffEvent(got, want eventstore.Event) string {
	var d []string
	if got.Stream != want.Stream {
		d = append(d, fmt.Sprintf("Stream %q, want %q", got.Stream, want.Stream))
	}
	if got.Seq != want.Seq {
		d = append(d, fmt.Sprintf("Seq %d, want %d", got.Seq, want.Seq))
	}
	if got.Position != want.Position {
		d = append(d, fmt.Sprintf("Position %d, want %d", got.Position, want.Position))
	}
	if got.ID != want.ID {
		d = append(d, fmt.Sprintf("ID %s, want %s", got.ID, want.ID))
	}
	if !got.Time.Equal(want.Time) {
		d = append(d, fmt.Sprintf("Time %v, want %v", got.Time, want.Time))
	}
	if dc := diffContent(got, eventstore.NewEvent{Type: want.Type, Version: want.Version, Tags: want.Tags, Meta: want.Meta, Data: want.Data}); dc != "" {
		d = append(d, dc)
	}
	return strings.Join(d, "; ")
}

// diffContent compares what a writer gave (except the id) with what was
// stored.
func diffContent(got eventstore.Event, want eventstore.NewEvent) string {
	var d []string
	if got.Type != want.Type {
		d = append(d, fmt.Sprintf("Type %q, want %q", got.Type, want.Type))
	}
	if got.Version != want.Version {
		d = append(d, fmt.Sprintf("Version %d, want %d", got.Version, want.Version))
	}
	if !slices.Equal(got.Tags, want.Tags) {
		d = append(d, fmt.Sprintf("Tags %q, want %q", got.Tags, want.Tags))
	}
	if !maps.Equal(got.Meta, want.Meta) {
		d = append(d, fmt.Sprintf("Meta %v, want %v", got.Meta, want.Meta))
	}
	if !bytes.Equal(got.Data, want.Data) {
		d = append(d, fmt.Sprintf("Data %q, want %q", trunc(got.Data), trunc(want.Data)))
	}
	return strings.Join(d, "; ")
}

func trunc(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

// wantStored checks a stored event against the NewEvent it came from and
// where its append was acknowledged.
func wantStored(t *testing.T, what string, got eventstore.Event, want eventstore.NewEvent, stream string, seq, pos uint64) {
	t.Helper()
	if err := checkStored(got, want, stream, seq, pos); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func checkStored(got eventstore.Event, want eventstore.NewEvent, stream string, seq, pos uint64) error {
	var d []string
	if got.Stream != stream || got.Seq != seq || got.Position != pos {
		d = append(d, fmt.Sprintf("at %q seq %d position %d, want %q seq %d position %d", got.Stream, got.Seq, got.Position, stream, seq, pos))
	}
	if !want.ID.IsZero() && got.ID != want.ID {
		d = append(d, fmt.Sprintf("ID %s, want %s", got.ID, want.ID))
	}
	if got.ID.IsZero() {
		d = append(d, "zero ID")
	}
	if got.Time.IsZero() {
		d = append(d, "zero Time")
	} else if got.Time.After(time.Now()) {
		d = append(d, fmt.Sprintf("Time %v is in the future", got.Time))
	}
	if dc := diffContent(got, want); dc != "" {
		d = append(d, dc)
	}
	if len(d) > 0 {
		return errors.New(strings.Join(d, "; "))
	}
	return nil
}

// wantSeqs checks that events have exactly the sequence numbers from..to.
func wantSeqs(t *testing.T, what string, events []eventstore.Event, from, to uint64) {
	t.Helper()
	wantKeys(t, what, "seq", events, bySeq, from, to)
}

// wantPositions checks that events have exactly the positions from..to.
func wantPositions(t *testing.T, what string, events []eventstore.Event, from, to uint64) {
	t.Helper()
	wantKeys(t, what, "position", events, byPosition, from, to)
}

func wantKeys(t *testing.T, what, name string, events []eventstore.Event, key func(eventstore.Event) uint64, from, to uint64) {
	t.Helper()
	if err := checkKeys(name, events, key, from, to); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func checkKeys(name string, events []eventstore.Event, key func(eventstore.Event) uint64, from, to uint64) error {
	n := uint64(0)
	if to >= from {
		n = to - from + 1
	}
	got := make([]uint64, len(events))
	for i, e := range events {
		got[i] = key(e)
	}
	ok := uint64(len(events)) == n
	for i := 0; ok && i < len(got); i++ {
		ok = got[i] == from+uint64(i)
	}
	if !ok {
		return fmt.Errorf("%ss %v, want %d..%d", name, abbrev(got), from, to)
	}
	return nil
}

// abbrev shortens a long list of numbers for a failure message.
func abbrev(v []uint64) string {
	if len(v) <= 40 {
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("%v … %v (%d in all)", v[:20], v[len(v)-20:], len(v))
}
