package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/logbook/logbook/eventstore"
)

func runServe(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "serve", "serve [--data DIR] [--addr HOST:PORT]")
	var sf storeFlags
	sf.register(fs, "./data")
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	if err := parse(fs, args); err != nil {
		return err
	}
	s, err := sf.open()
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz(s))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	log.Info("logbook serving", "url", "http://"+ln.Addr().String(), "data", sf.data)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("logbook stopped")
	return nil
}

// healthz answers 200 with the log's head when the store can be read.
func healthz(s eventstore.Store) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		head, err := s.Head(r.Context())
		if err != nil {
			http.Error(w, "store unavailable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"status\":\"ok\",\"head\":%d}\n", head)
	}
}
