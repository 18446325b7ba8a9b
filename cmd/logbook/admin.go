package main

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/admin"
	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/kafkabus"
)

// mountAdmin mounts the admin API (engine/admin) over a server's store on
// mux: the views' positions from reg, which every view of the server
// reports to; the state of the Kafka publishers mons watch; deleting and
// truncating streams if the store offers them. The admin page itself is
// the web UI's /admin.html, which every server's UI handler serves.
func mountAdmin(mux *http.ServeMux, store eventstore.Store, tokens *auth.Tokens, reg prometheus.Gatherer, opts admin.Options, mons ...*kafkabus.Monitor) {
	opts.Positions = admin.ViewPositions(reg)
	if len(mons) > 0 {
		opts.Publishers = func(context.Context) []admin.PublisherState {
			out := make([]admin.PublisherState, 0, len(mons))
			for _, m := range mons {
				out = append(out, publisherState(m.State()))
			}
			return out
		}
	}
	mux.Handle("/admin/api/", admin.New(store, tokens, opts.WithStore(store)))
}

// browseOnly is a store the admin API may read but not remove from: it
// offers only eventstore.Store's methods, so neither a Deleter nor an
// Unwrap to one is found through it.
type browseOnly struct{ eventstore.Store }

// publisherState is a kafkabus publisher's state as the admin API shows it.
func publisherState(s kafkabus.PublisherState) admin.PublisherState {
	p := admin.PublisherState{Topic: s.Topic, Running: s.Running, Position: s.Position, Published: s.Published, Restarts: s.Restarts}
	if s.LastError != nil {
		at := s.LastAt
		p.LastError, p.LastErrorTime = s.LastError.Error(), &at
	}
	return p
}
