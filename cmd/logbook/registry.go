package main

import (
	"context"
	"net/http"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/registry"
)

// serveRegistry serves the schema registry kept in store at /registry —
// Confluent's REST API, so a client configured with the base URL
// http://HOST:PORT/registry works unchanged. Any token reads; writing
// needs a schema-admin token. Write nodes serve it (a read replica does
// not write to the store).
func (n *node) serveRegistry(ctx context.Context, store eventstore.Store) (*registry.Registry, error) {
	reg, err := registry.Open(ctx, store, registry.Options{})
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() { reg.Close() })
	n.mux.Handle("/registry/", http.StripPrefix("/registry", registry.Handler(reg, n.cfg.tokens)))
	return reg, nil
}
