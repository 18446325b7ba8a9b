package httpreplica_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/httpreplica"
)

// Subscribe must give up when its ctx ends (a Runner/Live Close cancels it).
func TestSubscribeIgnoresCtx(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-time.After(3 * time.Second):
		}
	}))
	defer srv.Close()
	defer close(release)
	s := httpreplica.New(srv.URL, "x")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _ = s.Subscribe(ctx, eventstore.All(), 1)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Subscribe returned after %v, ctx ended after 100ms", d)
	}
}
