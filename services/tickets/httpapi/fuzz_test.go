package httpapi

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/internal/httpfuzz"
	"github.com/logbook/logbook/services/tickets"
)

// FuzzAPI sends the tickets API arbitrary requests — method, path,
// query, Idempotency-Key and body, as a booker or a viewer — against a
// real service on a fresh embedded store. Whatever the request: no
// panic, no 5xx (but a 503 when a min_position wait times out, the
// answer for a view that is behind), every error a problem+json document
// with its status, an answer within a second. (The live stream is left
// out: it streams until the client leaves.)
func FuzzAPI(f *testing.F) {
	store, err := pebblestore.Open(f.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := tickets.New(ctx, store, tickets.Config{Catalogue: tickets.Catalogue{Sports: tickets.DefaultSports, PerSport: 20, Days: 4}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { cancel(); svc.Close(); store.Close() })
	tokens, _ := auth.ParseEnv(viewer+":viewer,"+booker+":booker", Roles())
	h := New(ctx, svc, tokens)
	type seed struct{ method, path, key, body string }
	for _, s := range []seed{
		{"GET", "/api/tickets/search?sport=diving&day=1&available=true&limit=5", "", ""},
		{"GET", "/api/tickets/search?owner=ann&limit=1000000", "", ""},
		{"GET", "/api/tickets/search?min_position=99999999", "", ""},
		{"GET", "/api/tickets/search?sport=&day=-1&available=maybe", "", ""},
		{"POST", "/api/tickets/diving.5/book", "k1", `{"owner":"ann"}`},
		{"POST", "/api/tickets/diving.5/book", "k1", `{"owner":"bob"}`},
		{"POST", "/api/tickets/diving.5/return", "", `{"owner":"ann"}`},
		{"POST", "/api/tickets/nope.99999999999999999999/book", "", `{"owner":""}`},
		{"POST", "/api/tickets/diving.5/book", "", `{"owner":"` + string(make([]byte, 300)) + `"}`},
		{"POST", "/api/tickets/diving.5/book", "", `[`},
		{"GET", "/api/tickets/control", "", ""},
		{"GET", "/api/tickets/stats", "", ""},
		{"GET", "/api/tickets/session", "", ""},
		{"GET", "/api/tickets/openapi.json", "", ""},
		{"PUT", "/api/tickets/search", "", ""},
		{"GET", "/api/tickets/%zz", "", ""},
	} {
		f.Add(s.method, s.path, s.key, []byte(s.body), true)
	}
	f.Fuzz(func(t *testing.T, method, path, key string, body []byte, asBooker bool) {
		if len(path) < len("/api/tickets/") || path[:len("/api/tickets/")] != "/api/tickets/" {
			path = "/api/tickets/" + path
		}
		if len(path) >= len("/api/tickets/live") && path[:len("/api/tickets/live")] == "/api/tickets/live" {
			return // streams until the client leaves
		}
		token := viewer
		if asBooker {
			token = booker
		}
		req := httpfuzz.Request{Method: method, Target: path, Header: http.Header{}, Body: body}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		httpfuzz.Do(t, h, req, time.Second, func(status int) bool { return status == http.StatusServiceUnavailable })
	})
}
