package storetest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
)

func snapshotTests() []testCase {
	return []testCase{
		{"SaveLoad", testSnapshotSaveLoad},
		{"OlderDoesNotReplaceNewer", testSnapshotOlderDoesNotReplaceNewer},
		{"Invalid", testSnapshotInvalid},
	}
}

func loadSnapshot(t *testing.T, s eventstore.Store, stream string) (eventstore.Snapshot, bool) {
	t.Helper()
	snap, ok, err := s.LoadSnapshot(t.Context(), stream)
	if err != nil {
		t.Fatalf("LoadSnapshot(%q): %v", stream, err)
	}
	return snap, ok
}

func wantSnapshot(t *testing.T, what string, s eventstore.Store, want eventstore.Snapshot) {
	t.Helper()
	got, ok := loadSnapshot(t, s, want.Stream)
	if !ok {
		t.Fatalf("%s: no snapshot of %q", what, want.Stream)
	}
	if got.Stream != want.Stream || got.Seq != want.Seq || got.Version != want.Version || !bytes.Equal(got.Data, want.Data) {
		t.Fatalf("%s: snapshot {%q seq %d version %d data %q}, want {%q seq %d version %d data %q}",
			what, got.Stream, got.Seq, got.Version, got.Data, want.Stream, want.Seq, want.Version, want.Data)
	}
}

func saveSnapshot(t *testing.T, s eventstore.Store, snap eventstore.Snapshot) {
	t.Helper()
	if err := s.SaveSnapshot(t.Context(), snap); err != nil {
		t.Fatalf("SaveSnapshot(%q at seq %d): %v", snap.Stream, snap.Seq, err)
	}
}

func testSnapshotSaveLoad(t *testing.T, s eventstore.Store) {
	if _, ok := loadSnapshot(t, s, "cart"); ok {
		t.Fatal("LoadSnapshot of a stream without snapshot: ok = true")
	}
	mustAppend(t, s, "cart", eventstore.NoStream, evs("added", 5)...)
	mustAppend(t, s, "cart2", eventstore.NoStream, evs("added", 2)...)
	if _, ok := loadSnapshot(t, s, "cart"); ok {
		t.Fatal("LoadSnapshot of a stream with events but no snapshot: ok = true")
	}

	data := []byte("state after 3")
	first := eventstore.Snapshot{Stream: "cart", Seq: 3, Version: 2, Data: data}
	saveSnapshot(t, s, first)
	copy(data, "XXXXX") // the store keeps its own copy
	first.Data = []byte("state after 3")
	wantSnapshot(t, "first snapshot", s, first)

	latest := eventstore.Snapshot{Stream: "cart", Seq: 5, Version: 3, Data: []byte{0, 1, 2, 0xff}}
	saveSnapshot(t, s, latest)
	wantSnapshot(t, "newer snapshot", s, latest)

	// Snapshots are per stream.
	if _, ok := loadSnapshot(t, s, "cart2"); ok {
		t.Fatal("a snapshot of cart shows up for cart2")
	}
	other := eventstore.Snapshot{Stream: "cart2", Seq: 2, Data: []byte{}}
	saveSnapshot(t, s, other)
	wantSnapshot(t, "snapshot of the other stream", s, other)
	wantSnapshot(t, "snapshot of the first stream", s, latest)
	if _, ok := loadSnapshot(t, s, "car"); ok {
		t.Fatal("a snapshot shows up for a stream whose id is a prefix")
	}
}

func testSnapshotOlderDoesNotReplaceNewer(t *testing.T, s eventstore.Store) {
	mustAppend(t, s, "acct", eventstore.NoStream, evs("e", 10)...)
	newer := eventstore.Snapshot{Stream: "acct", Seq: 8, Version: 1, Data: []byte("at 8")}
	saveSnapshot(t, s, newer)
	for _, seq := range []uint64{1, 7} {
		err := s.SaveSnapshot(t.Context(), eventstore.Snapshot{Stream: "acct", Seq: seq, Version: 1, Data: []byte("older")})
		if err != nil && !errors.Is(err, eventstore.ErrInvalidSnapshot) {
			t.Fatalf("saving an older snapshot: %v, want no error or ErrInvalidSnapshot", err)
		}
		wantSnapshot(t, "after saving an older snapshot", s, newer)
	}
	newest := eventstore.Snapshot{Stream: "acct", Seq: 10, Version: 1, Data: []byte("at 10")}
	saveSnapshot(t, s, newest)
	wantSnapshot(t, "after saving a newer snapshot", s, newest)
}

func testSnapshotInvalid(t *testing.T, s eventstore.Store) {
	mustAppend(t, s, "acct", eventstore.NoStream, evs("e", 3)...)
	good := eventstore.Snapshot{Stream: "acct", Seq: 2, Data: []byte("at 2")}
	saveSnapshot(t, s, good)
	for _, c := range []struct {
		name string
		snap eventstore.Snapshot
		want error
	}{
		{"beyond the stream's version", eventstore.Snapshot{Stream: "acct", Seq: 4, Data: []byte("future")}, eventstore.ErrInvalidSnapshot},
		{"far beyond the stream's version", eventstore.Snapshot{Stream: "acct", Seq: 1 << 40}, eventstore.ErrInvalidSnapshot},
		{"of a stream without events", eventstore.Snapshot{Stream: "nobody", Seq: 1}, eventstore.ErrInvalidSnapshot},
		{"at seq 0", eventstore.Snapshot{Stream: "acct", Seq: 0}, eventstore.ErrInvalidSnapshot},
		{"with a negative schema version", eventstore.Snapshot{Stream: "acct", Seq: 3, Version: -1}, eventstore.ErrInvalidSnapshot},
		{"with an invalid stream id", eventstore.Snapshot{Stream: "a\x00b", Seq: 1}, eventstore.ErrInvalidStreamID},
	} {
		err := s.SaveSnapshot(t.Context(), c.snap)
		wantErrIs(t, "SaveSnapshot "+c.name, err, c.want)
	}
	wantSnapshot(t, "after the refused snapshots", s, good)
	if _, ok := loadSnapshot(t, s, "nobody"); ok {
		t.Fatal("a refused snapshot was stored")
	}
}
