package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/services/flights"
)

// countingStore counts the subscriptions opened on a store.
type countingStore struct {
	eventstore.Store
	subscribes atomic.Int64
}

func (c *countingStore) Subscribe(ctx context.Context, f eventstore.Filter, from uint64) (eventstore.Subscription, error) {
	c.subscribes.Add(1)
	return c.Store.Subscribe(ctx, f, from)
}

// Every /api/live client of a node shares one subscription to the store
// (on a replica, one stream from the primary or Kafka, not one per
// client), each gets every change, and clients beyond the cap get 503.
func TestLiveSharesOneSubscription(t *testing.T) {
	pebble, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pebble.Close()
	store := &countingStore{Store: pebble}
	svc, err := flights.New(context.Background(), store, flights.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	tokens := auth.NewTokens(Roles())
	_ = tokens.Add(plannerToken, Planner)
	_ = tokens.Add(viewerToken, auth.Viewer)
	a := newAPIValue(context.Background(), svc, tokens)
	a.hub.max = 40
	srv := httptest.NewServer(a.handler())
	defer srv.Close()

	// The view subscribes too, once caught up: count after it.
	if err := svc.Validation.WaitCaughtUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	r0 := expect(t, call(t, srv, plannerToken, "POST", "/api/rotations", `{"id":"R0"}`), http.StatusCreated)
	expect(t, call(t, srv, viewerToken, "GET", "/api/validity?min_position="+r0.header.Get("X-Logbook-Position"), ""), http.StatusOK)
	before := store.subscribes.Load()
	var streams []chan sseEvent
	for range 40 {
		req, _ := http.NewRequest("GET", srv.URL+"/api/live", nil)
		req.Header.Set("Authorization", "Bearer "+viewerToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("live: %d", res.StatusCode)
		}
		events := make(chan sseEvent, 16)
		go readEvents(t, res.Body, events)
		if hello := next(t, events); hello.event != "hello" {
			t.Fatalf("first event %+v", hello)
		}
		streams = append(streams, events)
	}
	// One more is over the cap.
	expect(t, call(t, srv, viewerToken, "GET", "/api/live", ""), http.StatusServiceUnavailable)
	if n := store.subscribes.Load() - before; n != 1 {
		t.Fatalf("40 live clients opened %d subscriptions on the store, want 1", n)
	}
	last := expect(t, call(t, srv, plannerToken, "POST", "/api/rotations", `{"id":"R9"}`), http.StatusCreated)
	want := uint64(last.body["position"].(float64))
	for i, events := range streams {
		var c Change
		for c.Position < want {
			ev := next(t, events)
			if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
				t.Fatal(err)
			}
		}
		if len(c.Rotations) != 1 || c.Rotations[0] != "R9" || !c.Lanes {
			t.Fatalf("client %d: change %+v, want rotation R9 created", i, c)
		}
	}
}
