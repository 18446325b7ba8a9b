package pgstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/internal/testenv"
)

// TestWrongGuessesFallBack: an append written in one round trip guesses
// its stream's version — the one its process last saw, else its
// expectation. A guess made stale by another process, or an expectation
// above the stream's version, must fail that round trip and be decided
// again on what is stored: the right seqs and positions, or the conflict
// with the stream's real version, and never a gap in the stream.
func TestWrongGuessesFallBack(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	ctx := t.Context()
	a, b, c := openProcess(t, url, Options{Schema: schema}), openProcess(t, url, Options{Schema: schema}), openProcess(t, url, Options{Schema: schema})

	if _, err := a.Append(ctx, "s", eventstore.NoStream, evs(2, "a")); err != nil {
		t.Fatal(err)
	}
	if got := a.guessed.Load(); got != 1 {
		t.Fatalf("a new stream with NoStream: %d batches guessed, want 1", got)
	}
	if _, err := b.Append(ctx, "s", eventstore.Any, evs(3, "b")); err != nil { // b has nothing to guess
		t.Fatal(err)
	}
	if got := b.guessed.Load() + b.guessesFailed.Load(); got != 0 {
		t.Fatalf("Any to a stream b never saw was guessed (%d)", got)
	}

	// a still believes the stream is at 2.
	res, err := a.Append(ctx, "s", eventstore.Any, evs(1, "a2"))
	if err != nil {
		t.Fatal(err)
	}
	if a.guessesFailed.Load() != 1 {
		t.Fatalf("a's stale guess did not fail: %d failed", a.guessesFailed.Load())
	}
	if res.FirstSeq != 6 || res.FirstPosition != 6 {
		t.Fatalf("after a stale guess: seq %d position %d, want 6 and 6", res.FirstSeq, res.FirstPosition)
	}

	// c expects more than there is: its guess, taken from the
	// expectation, must not leave a gap.
	_, err = c.Append(ctx, "s", eventstore.Exactly(9), evs(1, "c"))
	var conflict *eventstore.ConflictError
	if !errors.As(err, &conflict) || conflict.Actual != 6 {
		t.Fatalf("Exactly(9) on a stream at 6: %v, want a conflict with 6", err)
	}
	if c.guessesFailed.Load() != 1 {
		t.Fatalf("c's guess from its expectation did not fail: %d failed", c.guessesFailed.Load())
	}
	// Having read the version, c guesses right.
	if _, err := c.Append(ctx, "s", eventstore.Exactly(6), evs(1, "c2")); err != nil {
		t.Fatal(err)
	}
	if c.guessed.Load() != 1 {
		t.Fatalf("c's second append: %d batches guessed, want 1", c.guessed.Load())
	}

	// A retry of a's first append, guessed from a's memory of the
	// stream, is recognized.
	first := evs(2, "a")
	if _, err := a.Append(ctx, "t", eventstore.NoStream, first); err != nil {
		t.Fatal(err)
	}
	again, err := a.Append(ctx, "t", eventstore.Any, first)
	if err != nil || !again.Duplicate || again.FirstSeq != 1 {
		t.Fatalf("retry after a guessed append: %+v, %v; want the duplicate at seq 1", again, err)
	}

	got, err := c.ReadStream(ctx, "s", 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	wantTypes := []string{"a", "a", "b", "b", "b", "a2", "c2"}
	if len(got) != len(wantTypes) {
		t.Fatalf("stream s has %d events, want %d", len(got), len(wantTypes))
	}
	for i, ev := range got {
		if ev.Seq != uint64(i+1) || ev.Position != uint64(i+1) || ev.Type != wantTypes[i] {
			t.Fatalf("event %d: seq %d position %d type %s, want %d %d %s", i, ev.Seq, ev.Position, ev.Type, i+1, i+1, wantTypes[i])
		}
	}
}

// openProcess opens a Store, as one process of several sharing a schema
// would, closed when the test ends.
// withParam adds a query parameter (k=v) to a postgres:// URL.
func withParam(url, kv string) string {
	if strings.Contains(url, "?") {
		return url + "&" + kv
	}
	return url + "?" + kv
}

func openProcess(t *testing.T, url string, opts Options) *Store {
	t.Helper()
	s, err := Open(t.Context(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
