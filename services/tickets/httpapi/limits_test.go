package httpapi

import (
	"context"
	"encoding/json"
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
	"github.com/logbook/logbook/services/tickets"
)

// Requests at every limit at once are answered in bounded time and
// memory: a book with the longest owner (64 characters), and a search
// of the largest page (tickets.MaxLimit)
// of tickets each held by that owner, filtered on every parameter —
// within 5 seconds each, allocating at most 16 MiB; a body beyond
// maxBody is refused.
func TestRequestsAtEveryLimit(t *testing.T) {
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := tickets.New(ctx, store, tickets.Config{Catalogue: tickets.Catalogue{Sports: tickets.DefaultSports, PerSport: 2 * tickets.MaxLimit, Days: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); svc.Close(); store.Close() }()
	tokens, _ := auth.ParseEnv(viewer+":viewer,"+booker+":booker", Roles())
	srv := httptest.NewServer(New(ctx, svc, tokens))
	defer srv.Close()
	sport := tickets.DefaultSports[0]
	owner := strings.Repeat("o", 64)
	body, _ := json.Marshal(ownerBody{Owner: owner})
	call := func(method, path, token string, body []byte) (int, []byte) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(string(body)))
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
	var last []byte
	for i := range tickets.MaxLimit {
		code, b := call("POST", fmt.Sprintf("/api/tickets/%s.%d/book", sport, i), booker, body)
		if code != 200 {
			t.Fatalf("book %d: %d %s", i, code, b)
		}
		last = b
	}
	var ans struct{ Position uint64 }
	_ = json.Unmarshal(last, &ans)
	httpfuzz.Bounded(t, "a book with the largest owner", 5*time.Second, 16<<20, func() {
		if code, b := call("POST", fmt.Sprintf("/api/tickets/%s.%d/book", sport, tickets.MaxLimit), booker, body); code != 200 {
			t.Fatalf("book: %d %s", code, b)
		}
	})
	q := url.Values{"sport": {sport}, "owner": {owner}, "day": {"1"}, "available": {"false"},
		"limit": {fmt.Sprint(tickets.MaxLimit)}, "min_position": {fmt.Sprint(ans.Position)}}
	httpfuzz.Bounded(t, "a search of the largest page", 5*time.Second, 16<<20, func() {
		// Searching by owner takes a booker's token (bookers act for owners).
		code, b := call("GET", "/api/tickets/search?"+q.Encode(), booker, nil)
		var res struct{ Tickets []json.RawMessage }
		if code != 200 || json.Unmarshal(b, &res) != nil || len(res.Tickets) != tickets.MaxLimit {
			t.Fatalf("search: %d, %d tickets: %.300s", code, len(res.Tickets), b)
		}
	})
	over := []byte(`{"owner":"x"` + strings.Repeat(" ", maxBody) + `}`)
	if code, _ := call("POST", fmt.Sprintf("/api/tickets/%s.1/book", sport), booker, over); code != 413 {
		t.Errorf("a body one byte over: %d, want 413", code)
	}
}
