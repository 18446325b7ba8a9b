package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/engine/accesslog"
	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/metrics"
	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/httpapi"
	"github.com/logbook/logbook/services/kv/pebblekv"
	"github.com/logbook/logbook/services/kv/pgkv"
)

func newKVCmd(e *env) *cobra.Command {
	return group("kv", "the versioned key/value repository: serve its HTTP API",
		newKVServeCmd(e),
	)
}

func newKVServeCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "serve the key/value repository under /api/kv/{id}: versions as entity tags, compare-and-set by If-Match",
		Args:  noArgs,
	}
	fs := cmd.Flags()
	data := fs.String("data", "./data-kv", "directory of the embedded key/value database")
	store := fs.String("store", "", "postgres://… URL: keep the repository in PostgreSQL instead (default: the embedded database in --data)")
	fromEnv(fs, "store")
	addr := fs.String("addr", "127.0.0.1:8082", "address to listen on")
	fromEnv(fs, "addr")
	tokensFile := fs.String("tokens", "", "bearer tokens, one \"token role\" per line: viewer reads, writer writes (default: LOGBOOK_TOKENS, token:role,…)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		tokens, err := loadTokens(*tokensFile)
		if err != nil {
			return fmt.Errorf("tokens: %w", err)
		}
		if tokens.Len() == 0 {
			return usageError{"no bearer tokens: give --tokens FILE or set LOGBOOK_TOKENS=token:role,… (roles: viewer reads, writer writes)"}
		}
		var b kv.Backend
		where := *data
		if *store != "" {
			if !isPostgresURL(*store) {
				return usageError{fmt.Sprintf("--store %q: want a postgres:// URL (the embedded database is chosen with --data)", redactURL(*store))}
			}
			where = redactURL(*store)
			b, err = pgkv.Open(cmd.Context(), *store, pgkv.Options{})
		} else {
			b, err = pebblekv.Open(*data, pebblekv.Options{})
		}
		if err != nil {
			return fmt.Errorf("open the repository %s: %w", where, err)
		}
		repo := kv.New(b, kv.Limits{})
		defer repo.Close()
		return serveKV(cmd.Context(), e, repo, tokens, *addr, where)
	}
	return cmd
}

func serveKV(ctx context.Context, e *env, repo *kv.Repository, tokens *auth.Tokens, addr, where string) error {
	reg := metrics.NewRegistry()
	mux := http.NewServeMux()
	httpapi.Mount(mux, repo, tokens)
	mux.Handle("GET /metrics", tokens.RequireRole(auth.Viewer, metrics.Handler(reg)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		// A read through the backend: a failed database answers 503.
		if _, err := repo.Exist(r.Context(), "healthz"); err != nil {
			e.log.Error("healthz: repository unavailable", "err", err)
			http.Error(w, "repository unavailable", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{\"status\":\"ok\"}\n"))
	})
	h, err := accesslog.Wrap(mux, accesslog.Options{Logger: e.log, Registerer: reg})
	if err != nil {
		return err
	}
	return serveUntil(ctx, e.log, addr, defaultMaxConns, h, "logbook kv serving", []any{"repository", where})
}
