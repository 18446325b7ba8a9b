package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/services/flights"
)

// Unknown query parameters are refused: they would otherwise make every
// request a new response-cache entry (and defeat the cache).
func TestUnknownQueryParametersRefused(t *testing.T) {
	srv, _ := newAPI(t)
	for _, path := range []string{
		"/api/validation/digest?nonce=1",
		"/api/violations?bogus=1",
		"/api/violations/counts?x=1",
		"/api/board/lanes?from=2026-03-29&x=1",
		"/api/checks/continuity?limit=5&y=2",
		"/api/session?z=1",
	} {
		r := expect(t, call(t, srv, viewerToken, "GET", path, ""), http.StatusBadRequest)
		if !strings.Contains(r.body["detail"].(string), "unknown query parameter") {
			t.Errorf("%s: %s", path, r.raw)
		}
	}
	// Known ones still work, min_position on every view query.
	expect(t, call(t, srv, viewerToken, "GET", "/api/violations?check=continuity&limit=5&min_position=0", ""), http.StatusOK)
	expect(t, call(t, srv, viewerToken, "GET", "/api/validation/digest?min_position=0", ""), http.StatusOK)
}

// A rotation named twice in /api/board/legs is one lane.
func TestBoardLegsNamesEachRotationOnce(t *testing.T) {
	srv, _ := newAPI(t)
	r := expect(t, call(t, srv, planner(), "POST", "/api/rotations", `{"id":"R1"}`), http.StatusCreated)
	pos := r.header.Get("X-Logbook-Position")
	r = expect(t, call(t, srv, viewerToken, "GET", "/api/board/legs?from=2026-03-29&to=2026-03-30&rotations=R1&rotations=R1&rotations=R1&min_position="+pos, ""), http.StatusOK)
	if lanes := r.body["lanes"].([]any); len(lanes) != 1 {
		t.Fatalf("%d lanes for one rotation named three times", len(lanes))
	}
}

// The response cache holds at most its byte budget, whatever it is fed.
func TestResponseCacheByteBudget(t *testing.T) {
	var c responseCache
	body := make([]byte, 1<<20)
	for i := range 4096 {
		c.put(fmt.Sprint("key", i), 1, body)
		if c.bytes > maxCachedBytes {
			t.Fatalf("after %d puts of 1 MiB the cache holds %d MiB, over its budget of %d MiB", i+1, c.bytes>>20, maxCachedBytes>>20)
		}
	}
	if _, ok := c.get("key4095", 1); !ok {
		t.Fatal("the latest answer is not cached")
	}
	// An answer larger than the whole budget is not cached at all.
	c.put("huge", 1, make([]byte, maxCachedBytes+1))
	if _, ok := c.get("huge", 1); ok {
		t.Fatal("an answer over the budget was cached")
	}
}

// At most maxRunningImports imports run at once on a node; another is
// refused with 429 before its body is read.
func TestConcurrentImportsBounded(t *testing.T) {
	svc, _ := newService(t)
	tokens := auth.NewTokens(Roles())
	_ = tokens.Add(plannerToken, Planner)
	a := newAPIValue(context.Background(), svc, tokens)
	for range maxRunningImports {
		if !a.imports.acquire() {
			t.Fatal("an import slot was refused while free")
		}
	}
	srv := httptest.NewServer(a.handler())
	defer srv.Close()
	g, err := flights.GenerateSchedule(flights.GenerateOptions{Weeks: 1, FlightsPerWeek: 50, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var sched, rots strings.Builder
	if err := flights.WriteSchedule(&sched, &rots, g.Airline, g.Rotations); err != nil {
		t.Fatal(err)
	}
	r := upload(t, srv.URL, plannerToken, map[string][]byte{"ssim": []byte(sched.String())})
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("a third concurrent import: %d %s", r.status, r.raw)
	}
	a.imports.release()
	r = upload(t, srv.URL, plannerToken, map[string][]byte{"ssim": []byte(sched.String())})
	if r.status != http.StatusAccepted {
		t.Fatalf("an import with a free slot: %d %s", r.status, r.raw)
	}
}

// A body over MaxBody is 413, not a JSON syntax error.
func TestOversizedBodyIs413(t *testing.T) {
	srv, _ := newAPI(t)
	expect(t, call(t, srv, planner(), "POST", "/api/rotations", `{"id":"r1"}`), http.StatusCreated)
	body := `{"legs":[` + strings.Repeat(" ", MaxBody) + `]}`
	r := expect(t, call(t, srv, planner(), "POST", "/api/rotations/r1/legs/bulk", body), http.StatusRequestEntityTooLarge)
	if !strings.Contains(r.body["detail"].(string), "MiB") {
		t.Fatalf("413 without the limit: %s", r.raw)
	}
}

// Ids the store cannot take are the client's error: 400, not 500.
func TestInvalidIDsAre400(t *testing.T) {
	srv, _ := newAPI(t)
	for _, path := range []string{
		"/api/rotations/" + strings.Repeat("x", 300),
		"/api/rotations/%01",
		"/api/airplanes/%7F",
	} {
		expect(t, call(t, srv, viewerToken, "GET", path, ""), http.StatusBadRequest)
		expect(t, call(t, srv, planner(), "DELETE", path, ""), http.StatusBadRequest)
	}
}

// An Idempotency-Key reused with another request is refused with 422:
// answering it as a duplicate would tell the client its leg was added.
func TestIdempotencyKeyReusedIs422(t *testing.T) {
	srv, _ := newAPI(t)
	p := planner()
	expect(t, call(t, srv, p, "POST", "/api/rotations", `{"id":"r1"}`), http.StatusCreated)
	expect(t, call(t, srv, p, "POST", "/api/rotations/r1/legs", fmt.Sprintf(legJSON, 1, "FRA", "MUC", 6, 7), "Idempotency-Key", "k1"), http.StatusCreated)
	r := expect(t, call(t, srv, p, "POST", "/api/rotations/r1/legs", fmt.Sprintf(legJSON, 2, "MUC", "FRA", 8, 9), "Idempotency-Key", "k1"), http.StatusUnprocessableEntity)
	if r.body["type"] != "urn:logbook:problem:idempotency-key-reused" {
		t.Fatalf("type %v", r.body["type"])
	}
	// The true retry is still a duplicate.
	r = expect(t, call(t, srv, p, "POST", "/api/rotations/r1/legs", fmt.Sprintf(legJSON, 1, "FRA", "MUC", 6, 7), "Idempotency-Key", "k1"), http.StatusOK)
	if r.body["duplicate"] != true {
		t.Fatalf("retry: %s", r.raw)
	}
	got := expect(t, call(t, srv, p, "GET", "/api/rotations/r1", ""), http.StatusOK)
	if legs := got.body["legs"].([]any); len(legs) != 1 {
		t.Fatalf("%d legs, want 1", len(legs))
	}
}
