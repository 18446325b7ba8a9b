package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/logbook/logbook/services/flights"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/httpreplica"
	"github.com/logbook/logbook/engine/query"
)

// TestReplicaInAnotherProcess runs the validation view on a replica store
// that follows a primary over HTTP, as a replica process would: it
// catches up, follows live edits, answers the same queries as the
// primary, and refuses commands.
func TestReplicaInAnotherProcess(t *testing.T) {
	ctx := context.Background()
	svc, store := newService(t)
	tokens := auth.NewTokens(Roles())
	_ = tokens.Add(plannerToken, Planner)
	_ = tokens.Add(viewerToken, auth.Viewer)
	reader, err := query.New(store, query.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	mux := http.NewServeMux()
	mux.Handle("/queries/", tokens.RequireRole(auth.Viewer, query.NewHandler(reader, query.HandlerOptions{})))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		head, _ := store.Head(r.Context())
		fmt.Fprintf(w, `{"status":"ok","head":%d}`, head)
	})
	mux.Handle("/api/", New(context.Background(), svc, tokens))
	primary := httptest.NewServer(mux)
	defer primary.Close()

	// Some schedule before the replica starts: it must catch up.
	g, err := flights.GenerateSchedule(flights.GenerateOptions{Weeks: 1, FlightsPerWeek: 400, Violations: 0.05, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range g.Rotations {
		if _, err := svc.Rotations.Execute(ctx, r.ID, flights.CreateRotation{}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Rotations.Execute(ctx, r.ID, flights.AddLegs{Legs: r.Legs}); err != nil {
			t.Fatal(err)
		}
	}

	rs := httpreplica.New(primary.URL, viewerToken)
	defer rs.Close()
	rep, err := flights.NewReplica(ctx, rs, flights.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close()
	repSrv := httptest.NewServer(New(context.Background(), rep, tokens))
	defer repSrv.Close()

	same := func(what string) {
		t.Helper()
		head, _ := store.Head(ctx)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := rep.Validation.WaitFor(wctx, head); err != nil {
			t.Fatalf("%s: replica did not reach %d: %v", what, head, err)
		}
		if err := svc.Validation.WaitFor(wctx, head); err != nil {
			t.Fatal(err)
		}
		pc, _ := svc.Validation.Current().Counts()
		rc, _ := rep.Validation.Current().Counts()
		if pc != rc || pc.Total == 0 {
			t.Fatalf("%s: replica counts %+v, primary %+v", what, rc, pc)
		}
		a := call(t, &httptest.Server{URL: primary.URL}, viewerToken, "GET", "/api/checks/continuity?limit=1000", "")
		b := call(t, &httptest.Server{URL: repSrv.URL}, viewerToken, "GET", "/api/checks/continuity?limit=1000", "")
		if a.status != 200 || a.raw != b.raw {
			t.Fatalf("%s: the replica answers differently:\n%.300s\n%.300s", what, a.raw, b.raw)
		}
	}
	same("after catch-up")

	// Live: an edit on the primary reaches the replica.
	r0 := g.Rotations[0]
	if _, err := svc.Rotations.Execute(ctx, r0.ID, flights.RemoveLeg{LegID: r0.Legs[1].ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Airports.Execute(ctx, "FRA", flights.SetAirportMinGroundTime{Minutes: 120}); err != nil {
		t.Fatal(err)
	}
	same("after live edits")

	// Commands are refused with a clear problem.
	r := expect(t, call(t, &httptest.Server{URL: repSrv.URL}, plannerToken, "POST", "/api/rotations", `{"id":"x"}`), 421)
	if r.body["detail"] == "" {
		t.Fatal("no detail")
	}
}
