package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/services/tickets"
)

const (
	viewer = "viewer-token"
	booker = "booker-token"
)

func newServer(t *testing.T, gate tickets.Gate) *httptest.Server {
	t.Helper()
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := tickets.New(ctx, store, tickets.Config{Catalogue: tickets.Catalogue{Sports: tickets.DefaultSports, PerSport: 20, Days: 4}, Gate: gate})
	if err != nil {
		t.Fatal(err)
	}
	tokens, _ := auth.ParseEnv(viewer+":viewer,"+booker+":booker,planner-token:planner", append(Roles(), "planner")) // planner: another service's role
	srv := httptest.NewServer(New(ctx, svc, tokens))
	t.Cleanup(func() {
		srv.Close()
		cancel()
		svc.Close()
		store.Close()
	})
	return srv
}

// call sends a request and checks a JSON answer against the OpenAPI
// document; errors must be problem+json.
func call(t *testing.T, srv *httptest.Server, ctx context.Context, method, path, token, body string, header ...string) (int, http.Header, map[string]any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	ct := res.Header.Get("Content-Type")
	if res.StatusCode >= 400 && ct != "application/problem+json" {
		t.Errorf("%s %s: %d with %q, want problem+json", method, path, res.StatusCode, ct)
	}
	answers.Check(t, method, path, res.StatusCode, ct, raw)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return res.StatusCode, res.Header, m
}

func TestAPI(t *testing.T) {
	srv := newServer(t, nil)
	ctx := context.Background()
	for _, c := range []struct {
		method, path, token, body string
		status                    int
	}{
		{"GET", "/api/tickets/search?sport=cycling", "", "", 401},
		{"GET", "/api/tickets/search?sport=cycling", "wrong-token", "", 401},
		{"GET", "/api/tickets/search?sport=cycling", viewer, "", 200},
		{"GET", "/api/tickets/search?sport=cycling&day=2&available=true&limit=3", booker, "", 200},
		{"GET", "/api/tickets/search", viewer, "", 400},
		{"GET", "/api/tickets/search?sport=rowing", viewer, "", 404},
		{"GET", "/api/tickets/search?sport=cycling&day=5", viewer, "", 400},
		{"GET", "/api/tickets/search?sport=cycling&day=x", viewer, "", 400},
		{"GET", "/api/tickets/search?sport=cycling&limit=0", viewer, "", 400},
		{"GET", "/api/tickets/search?sport=cycling&limit=1001", viewer, "", 400},
		{"GET", "/api/tickets/search?sport=cycling&available=maybe", viewer, "", 400},
		{"GET", "/api/tickets/search?sport=cycling&colour=red", viewer, "", 400},
		{"GET", "/api/tickets/search?sport=cycling&min_position=x", viewer, "", 400},
		{"GET", "/api/tickets/search?sport=cycling&min_position=0", viewer, "", 200},
		// Who holds what is a booker's question: bookers act for owners,
		// a viewer may not list a named person's tickets.
		{"GET", "/api/tickets/search?sport=cycling&owner=ann", viewer, "", 403},
		{"GET", "/api/tickets/search?sport=cycling&owner=ann", "planner-token", "", 403},
		{"GET", "/api/tickets/search?sport=cycling&owner=ann", booker, "", 200},
		{"POST", "/api/tickets/cycling.1/book", viewer, `{"owner":"ann"}`, 403},
		{"POST", "/api/tickets/cycling.1/book", "planner-token", `{"owner":"ann"}`, 403},
		{"POST", "/api/tickets/cycling.1/book", booker, `{"owner":""}`, 400},
		{"POST", "/api/tickets/cycling.1/book", booker, `{"owner":"ann","x":1}`, 400},
		{"POST", "/api/tickets/cycling.1/book", booker, `{"owner":"a\u0000b"}`, 400},
		{"POST", "/api/tickets/cycling.1/book", booker, `not json`, 400},
		{"POST", "/api/tickets/cycling.20/book", booker, `{"owner":"ann"}`, 404},
		{"POST", "/api/tickets/rowing.1/book", booker, `{"owner":"ann"}`, 404},
		{"POST", "/api/tickets/cycling.1/return", booker, `{"owner":"ann"}`, 409},
		{"GET", "/api/tickets/control", viewer, "", 200},
		{"GET", "/api/tickets/stats", viewer, "", 200},
		{"GET", "/api/tickets/nothing", viewer, "", 404},
		{"GET", "/api/tickets/openapi.json", "", "", 200},
	} {
		if got, _, m := call(t, srv, ctx, c.method, c.path, c.token, c.body); got != c.status {
			t.Errorf("%s %s as %q: %d %v, want %d", c.method, c.path, c.token, got, m, c.status)
		}
	}

	// Book, have it refused to another without naming the holder, search
	// one's own, retry with the same key, return.
	status, h, m := call(t, srv, ctx, "POST", "/api/tickets/diving.5/book", booker, `{"owner":"ann"}`, "Idempotency-Key", "k1")
	if status != 200 || m["ticket"].(map[string]any)["owner"] != "ann" || h.Get("X-Logbook-Position") == "" || h.Get("ETag") != `"1"` {
		t.Fatalf("book: %d %v %v", status, h, m)
	}
	pos := m["position"]
	status, _, m = call(t, srv, ctx, "POST", "/api/tickets/diving.5/book", booker, `{"owner":"bob"}`)
	if status != 409 || m["type"] != TypeTaken || strings.Contains(fmt.Sprint(m), "ann") {
		t.Fatalf("taken: %d %v (must not name the holder)", status, m)
	}
	status, _, m = call(t, srv, ctx, "POST", "/api/tickets/diving.5/book", booker, `{"owner":"ann"}`, "Idempotency-Key", "k1")
	if status != 200 || m["duplicate"] != true || m["position"] != pos {
		t.Fatalf("retry: %d %v", status, m)
	}
	// The search view follows the log; min_position reads one's own write.
	_, _, m = call(t, srv, ctx, "GET", fmt.Sprintf("/api/tickets/search?sport=diving&owner=ann&min_position=%.0f", pos), booker, "")
	if m["matches"] != float64(1) || m["tickets"].([]any)[0].(map[string]any)["id"] != "diving.5" {
		t.Fatalf("ann's tickets: %v", m)
	}
	_, _, m = call(t, srv, ctx, "GET", "/api/tickets/search?sport=diving&limit=1000", viewer, "")
	if strings.Contains(fmt.Sprint(m), "ann") {
		t.Errorf("a search not by owner shows owners: %v", m)
	}
	if status, _, m = call(t, srv, ctx, "POST", "/api/tickets/diving.5/return", booker, `{"owner":"bob"}`); status != 409 || m["type"] != TypeNotHeld {
		t.Fatalf("bob returns ann's: %d %v", status, m)
	}
	if status, _, m = call(t, srv, ctx, "POST", "/api/tickets/diving.5/return", booker, `{"owner":"ann"}`); status != 200 || m["ticket"].(map[string]any)["owner"] != nil {
		t.Fatalf("return: %d %v", status, m)
	}
	if status, _, _ = call(t, srv, ctx, "POST", "/api/tickets/diving.5/book", booker, `{"owner":"bob"}`); status != 200 {
		t.Fatalf("book after return: %d", status)
	}
}

// Full queues answer at once, with Retry-After: 429 when one sport has
// as many waiting as it may, 503 when all queues are; a closed service
// 503 without. Control requests are still served.
func TestOverload(t *testing.T) {
	srv := newServer(t, newTestGate(map[int]error{0: tickets.ErrKeyBusy, 1: tickets.ErrBusy, 2: tickets.ErrClosed}))
	ctx := context.Background()
	for _, c := range []struct {
		sport, typ string
		status     int
		retry      bool
	}{
		{"athletics", TypeBusy, 429, true},
		{"cycling", TypeBusy, 503, true},
		{"diving", "urn:logbook:problem:unavailable", 503, false},
	} {
		status, h, m := call(t, srv, ctx, "GET", "/api/tickets/search?sport="+c.sport, viewer, "")
		if status != c.status || m["type"] != c.typ || (h.Get("Retry-After") != "") != c.retry {
			t.Errorf("%s refused: %d %v (Retry-After %q), want %d %s, Retry-After %v", c.sport, status, m, h.Get("Retry-After"), c.status, c.typ, c.retry)
		}
	}
	if status, h, m := call(t, srv, ctx, "POST", "/api/tickets/athletics.1/book", booker, `{"owner":"ann"}`); status != 429 || h.Get("Retry-After") == "" || m["type"] != TypeBusy {
		t.Errorf("a booking refused: %d %v %v", status, h, m)
	}
	if status, _, _ := call(t, srv, ctx, "GET", "/api/tickets/control", viewer, ""); status != 200 {
		t.Errorf("control under overload: %d", status)
	}
}
