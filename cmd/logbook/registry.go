package main

import (
	"context"
	"net/http"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/registry"
)

// mountRegistry serves the schema registry kept in store at /registry —
// Confluent's REST API, so a client configured with the base URL
// http://HOST:PORT/registry works unchanged — and closes it when srv shuts
// down. Any token reads; writing needs a schema-admin token.
func mountRegistry(ctx context.Context, srv *http.Server, mux *http.ServeMux, store eventstore.Store, tokens *auth.Tokens) error {
	reg, err := registry.Open(ctx, store, registry.Options{})
	if err != nil {
		return err
	}
	srv.RegisterOnShutdown(func() { reg.Close() })
	mux.Handle("/registry/", http.StripPrefix("/registry", registry.Handler(reg, tokens)))
	return nil
}
