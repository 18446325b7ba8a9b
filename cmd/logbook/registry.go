package main

import (
	"context"
	"net/http"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/registry"
)

// serveRegistry serves the schema registry kept in store at /registry —
// Confluent's REST API, so a client configured with the base URL
// http://HOST:PORT/registry works unchanged. Any token reads; writing
// needs a schema-admin token. Write nodes serve it (a read replica does
// not write to the store). On a shared store (--store) the registry
// polls its stream every registryPoll rather than subscribing: a
// subscription would make the write node follow every other node's
// commits.
func (n *node) serveRegistry(ctx context.Context, store eventstore.Store) (*registry.Registry, error) {
	var opts registry.Options
	if n.cfg.store.store != "" {
		opts.Poll = registryPoll
	}
	reg, err := registry.Open(ctx, store, opts)
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() { reg.Close() })
	n.mux.Handle("/registry/", http.StripPrefix("/registry", registry.Handler(reg, n.cfg.tokens)))
	return reg, nil
}

// registryPoll is how often a write node on a shared store reads the
// registry's stream: how soon a mode, a level or a deletion set on
// another node reaches the answers that do not catch up first.
const registryPoll = time.Second
