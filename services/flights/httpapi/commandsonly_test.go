package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/logbook/logbook/services/flights"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
)

// TestCommandsOnly: a write node without a view takes commands and sends
// view queries elsewhere with 421, as a replica does with commands.
func TestCommandsOnly(t *testing.T) {
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	svc, err := flights.New(context.Background(), store, flights.Options{CommandsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if svc.Validation != nil {
		t.Fatal("a commands-only service runs a validation view")
	}
	tokens := auth.NewTokens(Roles())
	if err := tokens.Add(plannerToken, Planner); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(context.Background(), svc, tokens))
	defer srv.Close()
	expect(t, call(t, srv, plannerToken, "POST", "/api/rotations", `{"id":"r1"}`), http.StatusCreated)
	expect(t, call(t, srv, plannerToken, "GET", "/api/rotations/r1", ""), http.StatusOK)
	for _, path := range []string{"/api/validity", "/api/checks/continuity", "/api/violations?min_position=1", "/api/board/meta", "/api/validation/digest"} {
		expect(t, call(t, srv, plannerToken, "GET", path, ""), http.StatusMisdirectedRequest)
	}
}
