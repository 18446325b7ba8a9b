package httpreplica_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/httpreplica"
	"github.com/logbook/logbook/engine/query"
)

// A replica follows a primary whose log has removed events — a truncated
// stream, a deleted one, swept — without taking the holes for losses:
// the primary says which positions it removed, and the replica reads and
// subscribes across them. A position skipped without that word is still
// a gap (TestGap…).
func TestFollowsAcrossRemovals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(stream string, n int) {
		evs := make([]eventstore.NewEvent, n)
		for i := range evs {
			evs[i] = eventstore.NewEvent{Type: "T", Data: []byte(`{}`)}
		}
		if _, err := s.Append(ctx, stream, eventstore.Any, evs); err != nil {
			t.Fatal(err)
		}
	}
	put("a", 5)                                           // 1-5
	put("b", 3)                                           // 6-8
	put("a", 2)                                           // 9-10
	if err := s.TruncateStream(ctx, "a", 4); err != nil { // removes 1-3
		t.Fatal(err)
	}
	if err := s.DeleteStream(ctx, "b", eventstore.DeleteSoft); err != nil { // removes 6-8
		t.Fatal(err)
	}
	if _, err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	reader, err := query.New(s, query.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	mux := http.NewServeMux()
	mux.Handle("/queries/", query.NewHandler(reader, query.HandlerOptions{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		h, _ := s.Head(r.Context())
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "ok", "head": h})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	want := []uint64{4, 5, 9, 10}
	r := httpreplica.New(srv.URL, "")
	evs, err := r.ReadAll(ctx, 1, 100)
	if err != nil {
		t.Fatalf("ReadAll across removals: %v", err)
	}
	if got := positions(evs); !slices.Equal(got, want) {
		t.Fatalf("ReadAll: positions %v, want %v", got, want)
	}
	sub, err := r.Subscribe(ctx, eventstore.All(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []uint64
	for len(got) < len(want) {
		evs, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("subscription across removals, after %v: %v", got, err)
		}
		got = append(got, positions(evs)...)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("subscription: positions %v, want %v", got, want)
	}
	// A new event after the holes arrives as well.
	put("c", 1)
	evs, err = sub.Next(ctx)
	if err != nil || len(evs) != 1 || evs[0].Position != 11 {
		t.Fatalf("the next event: %v, %v", positions(evs), err)
	}

	// Without the primary's word the same holes are gaps: a stream that
	// skips a position with no removed_through line before it.
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := query.NewHandler(reader, query.HandlerOptions{})
		q := r.URL.Query()
		q.Del("removed")
		r.URL.RawQuery = q.Encode()
		h.ServeHTTP(w, r)
	}))
	defer bare.Close()
	if _, err := httpreplica.New(bare.URL, "").ReadAll(ctx, 1, 100); !errors.Is(err, httpreplica.ErrGap) {
		t.Fatalf("holes without the removed lines: %v, want ErrGap", err)
	}
}

func positions(evs []eventstore.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i := range evs {
		out[i] = evs[i].Position
	}
	return out
}
