// Command adminserver is the admin page's browser-test server
// (scripts/test-ui.sh runs it, web/e2e/admin.test.mjs drives it): a real
// embedded store in a fresh directory holding a few streams, a real view
// reporting its position and one stalled behind it, a Kafka publisher's
// state (fixed, as a process with a bus reports it), the admin API and
// the embedded web UI — deletion and truncation through the store's own
// DeleteStream and TruncateStream, and forgetting. The hooks record each
// call (GET /test/calls lists them), answer an unknown stream as
// admin.ErrNoStream, and deletion and truncation then act for real (a
// deleted stream's page answers 410). Forgetting is a recording function:
// this server keeps no personal data (notify's test covers forgetting).
// It lives under testdata: no part of the product builds it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/logbook/logbook/engine/admin"
	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/metrics"
	"github.com/logbook/logbook/engine/projection"
	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/internal/webui"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "adminserver:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) != 2 {
		return fmt.Errorf("usage: adminserver DATA-DIR (tokens in LOGBOOK_TOKENS)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	tokens, err := server.LoadTokens("", []auth.Role{auth.Admin}, auth.Viewer, auth.Admin)
	if err != nil {
		return err
	}
	store, err := pebblestore.Open(os.Args[1], pebblestore.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	if err := seed(ctx, store); err != nil {
		return err
	}
	reg := metrics.NewRegistry()
	view := projection.NewRunner(store, projection.NewMemory(map[string]int{}, func(n *map[string]int, ev eventstore.Event) error {
		(*n)[ev.Type]++
		return nil
	}), projection.Options{Name: "event-types", Registerer: reg, Logger: log})
	vctx, vcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = view.Run(vctx) }()
	defer func() { vcancel(); <-done }()
	// A view that stalls after three events, so that the page has a lag
	// to show: applying the fourth waits until the server stops.
	stalled := projection.NewRunner(store, projection.NewMemory(0, func(n *int, ev eventstore.Event) error {
		if *n == 3 {
			<-vctx.Done()
			return vctx.Err()
		}
		*n++
		return nil
	}), projection.Options{Name: "stalled", Registerer: reg, Logger: log, MaxBatch: 1})
	stalledDone := make(chan struct{})
	go func() { defer close(stalledDone); _ = stalled.Run(vctx) }()
	defer func() { vcancel(); <-stalledDone }()

	var mu sync.Mutex
	calls := []string{}
	record := func(s string) {
		mu.Lock()
		calls = append(calls, s)
		mu.Unlock()
	}
	known := func(ctx context.Context, stream string) error {
		v, err := store.StreamVersion(ctx, stream)
		if err != nil {
			return err
		}
		if v == 0 {
			return fmt.Errorf("stream %q: %w", stream, admin.ErrNoStream)
		}
		return nil
	}
	opts := admin.Options{
		Positions: admin.ViewPositions(reg),
		Delete: func(ctx context.Context, stream string, hard bool) error {
			if err := known(ctx, stream); err != nil {
				return err
			}
			record(fmt.Sprintf("delete %s hard=%v", stream, hard))
			mode := eventstore.DeleteSoft
			if hard {
				mode = eventstore.DeleteHard
			}
			return store.DeleteStream(ctx, stream, mode)
		},
		Truncate: func(ctx context.Context, stream string, before uint64) error {
			if err := known(ctx, stream); err != nil {
				return err
			}
			record(fmt.Sprintf("truncate %s before=%d", stream, before))
			return store.TruncateStream(ctx, stream, before)
		},
		Forget: func(_ context.Context, subject string) error {
			record("forget " + subject)
			return nil
		},
		// A publisher's state as a process with a bus reports it
		// (kafkabus.Monitor; TestAdminShowsThePublisher covers a real
		// one): two events behind the head, after a failure.
		Publishers: func(ctx context.Context) []admin.PublisherState {
			head, _ := store.Head(ctx)
			at := time.Date(2026, 11, 27, 9, 30, 0, 0, time.UTC)
			return []admin.PublisherState{{Topic: "test-topic", Running: true, Position: head - min(head, 2), Published: 5, Restarts: 1, LastError: "broker unreachable", LastErrorTime: &at}}
		},
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/api/", admin.New(store, tokens, opts))
	mux.HandleFunc("GET /test/calls", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(calls)
	})
	mux.Handle("/", webui.Handler())
	return server.Run(ctx, server.Config{Name: "logbook admin test server", Addr: "127.0.0.1:0", Tokens: tokens, Metrics: reg, Logger: log}, mux)
}

// seed writes the streams the test browses: customers with JSON events,
// and a document whose payload is not JSON.
func seed(ctx context.Context, s eventstore.Store) error {
	for i := 1; i <= 3; i++ {
		stream := fmt.Sprintf("customer-%d", i)
		evs := []eventstore.NewEvent{
			{Type: "CustomerRegistered", Tags: []string{"customer"}, Meta: map[string]string{"by": "signup"},
				Data: fmt.Appendf(nil, `{"name":"Customer %d","city":"Utrecht"}`, i)},
			{Type: "CustomerMoved", Tags: []string{"customer"}, Data: []byte(`{"city":"Delft"}`)},
		}
		if _, err := s.Append(ctx, stream, eventstore.Any, evs); err != nil {
			return err
		}
	}
	_, err := s.Append(ctx, "document-1", eventstore.Any, []eventstore.NewEvent{
		{Type: "Scanned", Meta: map[string]string{"content-type": "image/png"}, Data: []byte("\x89PNG\r\n\x1a\n")},
	})
	return err
}
