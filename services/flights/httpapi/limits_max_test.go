package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/internal/httpfuzz"
	"github.com/logbook/logbook/services/flights"
)

// Requests at every limit at once are answered in bounded time and
// memory: a bulk add of as many legs as one event holds, a bulk add of
// MaxBody bytes (refused, 413), the largest page of violations with
// every filter, and the board's legs of the most rotations over the
// widest window — within 10 seconds each, allocating at most 64 MiB,
// 32 times MaxBody.
func TestRequestsAtEveryLimit(t *testing.T) {
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := flights.New(context.Background(), store, flights.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); svc.Close(); store.Close() }()
	tokens := auth.NewTokens(Roles())
	_ = tokens.Add(plannerToken, Planner)
	_ = tokens.Add(viewerToken, auth.Viewer)
	srv := httptest.NewServer(New(ctx, svc, tokens))
	defer srv.Close()
	call := func(method, path, token string, body []byte) (int, []byte) {
		req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	for _, id := range []string{"R1", "R2"} {
		if code, b := call("POST", "/api/rotations", plannerToken, []byte(`{"id":"`+id+`"}`)); code != 201 {
			t.Fatalf("rotation: %d %s", code, b)
		}
	}
	bulk := func(n, size int) []byte {
		var b bytes.Buffer
		b.WriteString(`{"legs":[`)
		for i := 0; i < n || b.Len() < size; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			dep := time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 2 * time.Hour)
			from, to := "FRA", "MUC"
			if i%2 == 1 {
				from, to = to, from
			}
			fmt.Fprintf(&b, `{"airline":"LH","number":%d,"origin":%q,"destination":%q,"departure":%q,"arrival":%q}`,
				1+i%9999, from, to, dep.Format(time.RFC3339), dep.Add(time.Hour).Format(time.RFC3339))
			if size > 0 && b.Len() > size-200 {
				break
			}
		}
		b.WriteString("]}")
		return b.Bytes()
	}
	const maxAlloc = 32 * MaxBody
	atLimit, huge := bulk(0, MaxBody), bulk(0, 16<<20)
	httpfuzz.Bounded(t, "a bulk add of 4,000 legs", 10*time.Second, maxAlloc, func() {
		if code, b := call("POST", "/api/rotations/R1/legs/bulk", plannerToken, bulk(4000, 0)); code != 201 && code != 413 {
			t.Fatalf("bulk of 4,000: %d %.300s", code, b)
		}
	})
	httpfuzz.Bounded(t, "a bulk add of MaxBody bytes", 10*time.Second, maxAlloc, func() {
		if code, b := call("POST", "/api/rotations/R2/legs/bulk", plannerToken, atLimit); code != 413 {
			t.Fatalf("bulk of MaxBody bytes: %d %.300s", code, b)
		}
	})
	httpfuzz.Bounded(t, "a bulk add of 16 MiB", 10*time.Second, maxAlloc, func() {
		if code, b := call("POST", "/api/rotations/R2/legs/bulk", plannerToken, huge); code != 413 {
			t.Fatalf("bulk of 16 MiB: %d %.300s", code, b)
		}
	})
	httpfuzz.Bounded(t, "the largest page of violations", 10*time.Second, maxAlloc, func() {
		q := url.Values{"check": {"continuity"}, "rotation": {"R1"}, "airline": {"LH"}, "from": {"2026-01-01"}, "to": {"2027-01-01"}, "limit": {"1000"}}
		if code, b := call("GET", "/api/violations?"+q.Encode(), viewerToken, nil); code != 200 {
			t.Fatalf("violations: %d %.300s", code, b)
		}
	})
	httpfuzz.Bounded(t, "the board's legs of the most rotations over the widest window", 10*time.Second, maxAlloc, func() {
		q := url.Values{"rotations": {strings.Repeat("R1,", maxWindowLanes-1) + "R1"}, "from": {"2026-03-29"}, "to": {"2026-05-30"}}
		if code, b := call("GET", "/api/board/legs?"+q.Encode(), viewerToken, nil); code != 200 {
			t.Fatalf("board legs: %d %.300s", code, b)
		}
	})
}
