package pgstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/internal/testenv"
)

// appendN appends n events to stream, a few at a time so that the stream
// has several rows in appends, each event tagged with the stream's tag and
// one of its own; it returns the positions, in seq order.
func appendN(t *testing.T, s *Store, stream string, n int) []uint64 {
	t.Helper()
	var positions []uint64
	for len(positions) < n {
		var evs []eventstore.NewEvent
		for i := 0; i < 3 && len(positions)+len(evs) < n; i++ {
			seq := len(positions) + len(evs) + 1
			evs = append(evs, eventstore.NewEvent{Type: "x", Data: []byte(`{}`),
				Tags: []string{"t:" + stream, fmt.Sprintf("e:%s:%d", stream, seq)}})
		}
		r, err := s.Append(t.Context(), stream, eventstore.Any, evs)
		if err != nil {
			t.Fatal(err)
		}
		for i := range evs {
			positions = append(positions, r.FirstPosition+uint64(i))
		}
	}
	return positions
}

// rowCounts counts stream's rows in events, appends and event_tags (by the
// positions given), read straight from the tables.
func rowCounts(t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, stream string, positions []uint64) (events, appends, tags int) {
	t.Helper()
	ps := make([]int64, len(positions))
	for i, p := range positions {
		ps[i] = int64(p)
	}
	err := q.QueryRow(t.Context(), `SELECT
			(SELECT count(*) FROM events WHERE stream = $1),
			(SELECT count(*) FROM appends WHERE stream = $1),
			(SELECT count(*) FROM event_tags WHERE position = ANY($2))`, stream, ps).Scan(&events, &appends, &tags)
	if err != nil {
		t.Fatal(err)
	}
	return events, appends, tags
}

// TestSweepDeletesRows: after a sweep, the rows of a deleted stream and of
// a truncated stream's removed part are gone from events, event_tags and
// appends, and the rows of what is still visible are all there.
func TestSweepDeletesRows(t *testing.T) {
	s, err := Open(t.Context(), testenv.URL(t), Options{Schema: testenv.Schema(t), MaxConns: 8, SweepInterval: -1, SweepBatch: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gone := appendN(t, s, "gone", 20)
	cut := appendN(t, s, "cut", 20)
	kept := appendN(t, s, "kept", 5)
	if err := s.DeleteStream(t.Context(), "gone", eventstore.DeleteHard); err != nil {
		t.Fatal(err)
	}
	if err := s.TruncateStream(t.Context(), "cut", 13); err != nil { // seqs 1-12 go: 4 appends of 3
		t.Fatal(err)
	}
	// Removal is logical first: every row is still stored.
	if e, a, tg := rowCounts(t, s.Pool(), "gone", gone); e != 20 || a != 7 || tg != 40 {
		t.Fatalf("before the sweep, gone has %d events, %d appends, %d tags; want 20, 7, 40", e, a, tg)
	}

	st, err := s.Sweep(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Removed != 32 || st.Pending != 0 {
		t.Fatalf("sweep: %+v, want 32 removed, 0 pending", st)
	}
	if e, a, tg := rowCounts(t, s.Pool(), "gone", gone); e != 0 || a != 0 || tg != 0 {
		t.Errorf("after the sweep, hard-deleted stream has %d events, %d appends, %d tags left; want none", e, a, tg)
	}
	if e, _, tg := rowCounts(t, s.Pool(), "cut", cut[:12]); tg != 0 || e != 8 {
		t.Errorf("after the sweep, truncated stream has %d events (want 8) and %d tag rows of removed events (want 0)", e, tg)
	}
	if _, _, tg := rowCounts(t, s.Pool(), "cut", cut[12:]); tg != 16 {
		t.Errorf("truncated stream's visible events have %d tag rows, want 16", tg)
	}
	var minSeq, appendRows int
	if err := s.Pool().QueryRow(t.Context(), `SELECT (SELECT min(seq) FROM events WHERE stream = 'cut'),
			(SELECT count(*) FROM appends WHERE stream = 'cut' AND first_seq + count <= 13)`).Scan(&minSeq, &appendRows); err != nil {
		t.Fatal(err)
	}
	if minSeq != 13 || appendRows != 0 {
		t.Errorf("truncated stream: lowest seq stored %d (want 13), %d append rows wholly removed left (want 0)", minSeq, appendRows)
	}
	if e, a, tg := rowCounts(t, s.Pool(), "kept", kept); e != 5 || a != 2 || tg != 10 {
		t.Errorf("untouched stream has %d events, %d appends, %d tags; want 5, 2, 10", e, a, tg)
	}
	// What stays visible still reads, by stream and by tag.
	evs, err := s.ReadStream(t.Context(), "cut", 1, 100)
	if err != nil || len(evs) != 8 || evs[0].Seq != 13 {
		t.Fatalf("read truncated stream: %d events, err %v; want 8 from seq 13", len(evs), err)
	}
}

// TestSweepKeepsRate: a sweep removing more than one batch spaces its
// batches so that it removes at most SweepRate events a second.
func TestSweepKeepsRate(t *testing.T) {
	const n, batch, rate = 120, 10, 100
	s, err := Open(t.Context(), testenv.URL(t), Options{Schema: testenv.Schema(t), MaxConns: 8, SweepInterval: -1, SweepBatch: batch, SweepRate: rate})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appendN(t, s, "a", n)
	if err := s.DeleteStream(t.Context(), "a", eventstore.DeleteSoft); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	st, err := s.Sweep(t.Context())
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if st.Removed != n {
		t.Fatalf("removed %d, want %d", st.Removed, n)
	}
	// The first batch goes at once, each later one after a pause of
	// batch/rate: (n-batch)/rate at least.
	if want := time.Duration(n-batch) * time.Second / rate; took < want {
		t.Fatalf("removed %d events in %v, faster than %d a second allows (%v)", n, took, rate, want)
	}
	t.Logf("removed %d events in %v at %d a second", n, took, rate)
}

// TestCloseStopsSweep: Close stops a background sweep in the middle of a
// long pass, promptly, and nothing is deleted after it returns.
func TestCloseStopsSweep(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	// 1 event a second: each batch of 10 is followed by a 10 s pause, which
	// Close must cut short.
	s, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 8, SweepInterval: 20 * time.Millisecond, SweepBatch: 10, SweepRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	positions := appendN(t, s, "a", 400)
	if err := s.DeleteStream(t.Context(), "a", eventstore.DeleteSoft); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		e, _, _ := rowCounts(t, s.Pool(), "a", positions)
		if e < 400 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background sweep removed nothing in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	closed := make(chan error, 1)
	start := time.Now()
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5 s of a sweep in progress")
	}
	t.Logf("Close returned in %v", time.Since(start))

	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `SET search_path = `+schema); err != nil {
		t.Fatal(err)
	}
	after, _, _ := rowCounts(t, conn, "a", positions)
	if after == 0 {
		t.Fatal("the sweep finished before Close: the test proves nothing")
	}
	time.Sleep(1500 * time.Millisecond)
	if later, _, _ := rowCounts(t, conn, "a", positions); later != after {
		t.Fatalf("after Close, the sweep went on deleting: %d events, then %d", after, later)
	}
}
