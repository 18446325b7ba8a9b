package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/metrics"
	"github.com/logbook/logbook/engine/server"
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
	tokensFile := fs.String("tokens", "", "bearer tokens, one \"token role\" per line: viewer reads, planner writes (default: LOGBOOK_TOKENS, token:role,…)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		tokens, err := loadTokens(*tokensFile, auth.Viewer, auth.Planner)
		if err != nil {
			return err
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
		return serveKV(cmd.Context(), e, repo, server.Config{Addr: *addr, Tokens: tokens, LogAttrs: []any{"repository", where}})
	}
	return cmd
}

// serveKV serves repo's HTTP API; srv gives the address, tokens and log
// attributes.
func serveKV(ctx context.Context, e *env, repo *kv.Repository, srv server.Config) error {
	mux := http.NewServeMux()
	httpapi.Mount(mux, repo, srv.Tokens)
	srv.Name, srv.Logger, srv.Metrics = "logbook kv", e.log, metrics.NewRegistry()
	// A read through the backend: a failed database answers 503.
	srv.Check = func(ctx context.Context) (map[string]any, error) {
		if _, err := repo.Exist(ctx, "healthz"); err != nil {
			return nil, server.Unavailable("repository", err)
		}
		return nil, nil
	}
	return server.Run(ctx, srv, mux)
}
