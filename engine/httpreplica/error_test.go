package httpreplica_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/logbook/logbook/engine/httpreplica"
)

// A primary whose store fails in the middle of a query has already
// answered 200: it ends the stream with an error line. The replica must
// take it for the error it is, not for the end of the log — a read that
// came back empty would tell a read-your-writes waiter that the events it
// waits for were removed, and it would answer from a view that lacks
// them (the cluster fault test met exactly that while PostgreSQL
// restarted).
func TestErrorLineIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			fmt.Fprint(w, `{"status":"ok","head":5}`)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		from, _ := strconv.Atoi(r.URL.Query().Get("from"))
		for i := max(from, 1); i <= 2; i++ {
			fmt.Fprintf(w, `{"position":%d,"stream":"s","seq":%d,"id":"%032d","type":"T","time":"2026-01-01T00:00:00Z","data":{}}`+"\n", i, i, i)
		}
		fmt.Fprint(w, `{"error":{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"pgstore: read all: connection refused"}}`+"\n")
	}))
	defer srv.Close()
	s := httpreplica.New(srv.URL, "x")
	defer s.Close()
	evs, err := s.ReadAll(context.Background(), 1, 100)
	if !errors.Is(err, httpreplica.ErrPrimary) || len(evs) != 2 {
		t.Fatalf("ReadAll: %d events, %v; want the 2 before the error line and ErrPrimary", len(evs), err)
	}
	evs, err = s.ReadAll(context.Background(), 3, 100)
	if !errors.Is(err, httpreplica.ErrPrimary) || len(evs) != 0 {
		t.Fatalf("ReadAll from 3: %d events, %v; want none and ErrPrimary, not an empty log", len(evs), err)
	}
}
