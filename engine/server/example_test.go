package server_test

import (
	"context"
	"io"
	"log"
	"net/http"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/metrics"
	"github.com/logbook/logbook/engine/server"
)

// A service's serving command: its own routes on a mux, and Run for the
// rest — /healthz from the store, /metrics to a token, the access log,
// the connection cap, and a graceful shutdown at SIGINT or SIGTERM.
func ExampleRun() {
	// The store, opened by the command (pebblestore.Open, pgstore.Open).
	var store eventstore.Store
	// The tokens in LOGBOOK_TOKENS=token:role,….
	tokens, err := server.LoadTokens("", nil, auth.Viewer)
	if err != nil {
		log.Fatal(err)
	}
	reg := metrics.NewRegistry()
	store, err = metrics.InstrumentStore(store, reg)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /api/hello", tokens.RequireRole(auth.Viewer, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n")
	})))
	err = server.Run(context.Background(), server.Config{
		Name: "hello", Addr: "127.0.0.1:8080",
		Tokens: tokens, Metrics: reg, Check: server.StoreCheck(store),
	}, mux)
	if err != nil {
		log.Fatal(err)
	}
}
