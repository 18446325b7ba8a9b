package pipeline

import (
	"encoding/json"
	"runtime"
	"sync"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
)

// pick does not sort (or copy) every pending request each time it is
// asked for work: with 50,000 small requests pending, 200 picks
// allocate far less than one copy of the pending list each, and still
// hand out the oldest first, skipping what is in flight or done.
func TestPickDoesNotScanEveryPendingRequest(t *testing.T) {
	st := newState()
	const n = 50_000
	var pos uint64
	apply := func(typ string, v any) {
		t.Helper()
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		pos++
		if err := st.apply(eventstore.Event{Type: typ, Position: pos, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		apply(TypeRequested, Requested{ID: itoa(i), Chunks: 1})
	}
	// The first two are done, the third in flight.
	apply(TypeOutcome, Outcome{Request: "0", Chunk: 0})
	apply(TypeOutcome, Outcome{Request: "1", Chunk: 0})
	s := &Service{}
	var mu sync.Mutex
	inflight := map[string]bool{"2/0": true}
	got := s.pick(&st, inflight, &mu, 3)
	if len(got) != 3 || got[0].req.ID != "3" || got[1].req.ID != "4" || got[2].req.ID != "5" {
		t.Fatalf("picked %+v, want requests 3, 4, 5", got)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 200 {
		s.pick(&st, inflight, &mu, 4)
	}
	runtime.ReadMemStats(&after)
	// One copy of the pending list is 8 bytes a request.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 200*8*n/10 {
		t.Fatalf("200 picks allocated %d bytes: they copy the %d pending requests", alloc, n)
	}
	// Done requests leave the order; new ones join its end.
	for i := 2; i < n-1; i++ {
		apply(TypeOutcome, Outcome{Request: itoa(i), Chunk: 0})
	}
	apply(TypeRequested, Requested{ID: "new", Chunks: 2})
	got = s.pick(&st, map[string]bool{}, &mu, 10)
	if len(got) != 3 || got[0].req.ID != itoa(n-1) || got[1].req.ID != "new" || got[1].chunk != 0 || got[2].chunk != 1 {
		t.Fatalf("picked %+v after most were done", got)
	}
}
