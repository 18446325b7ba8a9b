package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/metrics"
	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/httpapi"
)

func newKVCmd(e *env) *cobra.Command {
	g := group("kv", "Serve the versioned key/value repository",
		newKVServeCmd(e),
	)
	g.Long = `The kv service is a versioned key/value repository: every key has a
version, and writes can be made conditional on it (compare-and-set), on
one of several backends (embedded, PostgreSQL, Redis, etcd).`
	return g
}

func newKVServeCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the key/value repository's HTTP API",
		Long: `Serves the key/value repository under /api/kv/{id}: a key's version is its
entity tag, If-None-Match: * adds, If-Match compares and sets. The
repository is kept in the embedded database in --data, or in PostgreSQL,
Redis or etcd (--store).`,
		Example: `  logbook kv serve --tokens ./dev-tokens
  logbook kv serve --max-value-size 100MB --tokens ./dev-tokens
  logbook kv serve --store redis://127.0.0.1:6379 --tokens ./dev-tokens
  logbook kv serve --store etcd://127.0.0.1:2379 --tokens ./dev-tokens`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	data := fs.String("data", "./data-kv", "directory of the embedded key/value database")
	store := fs.String("store", "", kvStoreHelp)
	secretFlag(fs, "store")
	addr := fs.String("addr", "127.0.0.1:8083", "address to listen on")
	fromEnv(fs, "addr")
	maxValue := fs.String("max-value-size", humanize.IBytes(uint64(kv.DefaultLimits.MaxValueBytes)), "largest value a key takes (as 8MiB, 100MB or bytes); a larger value is answered 413. The embedded store and PostgreSQL (through large objects) stream values; the others hold each whole in memory, up to 4 at once, and have limits of their own (etcd 64 MiB, Cassandra 15 MiB)")
	maxConns := fs.Int("max-conns", server.DefaultMaxConns, "connections held at once; beyond, a new one is answered 503 and closed")
	debugAddr := fs.String("debug-addr", "", "serve Go's pprof profiles on this address, to any token (off by default; keep it on loopback)")
	fromEnv(fs, "debug-addr")
	var tf tokenFlags
	tf.register(fs, ": viewer reads, writer writes")
	var tlsf cliutil.TLSFlags
	tlsf.Register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *maxConns <= 0 {
			return usageError{Msg: "--max-conns must be positive"}
		}
		maxValueBytes, err := humanize.ParseBytes(*maxValue)
		if err != nil || maxValueBytes == 0 || maxValueBytes > 1<<40 {
			return usageError{Msg: fmt.Sprintf("--max-value-size %q: a size from 1 byte to 1 TiB, as 8MiB, 100MB or 1048576", *maxValue)}
		}
		tlsCfg, err := tlsf.Config()
		if err != nil {
			return err
		}
		tokens, err := tf.load(cmd.Context(), e.log, true, auth.Viewer, httpapi.Writer)
		if err != nil {
			return err
		}
		b, where, err := openKVBackend(cmd.Context(), *data, *store)
		if err != nil {
			return err
		}
		// A memory limit, as every server has: requests allocate
		// briefly and the live heap is small.
		server.TuneGC(cmd.Context(), server.AllocFloor)
		if max, why := kv.BackendValueLimit(b); max > 0 && int64(maxValueBytes) > max {
			_ = b.Close()
			return usageError{Msg: fmt.Sprintf("--max-value-size %s: the repository %s takes values of at most %d bytes (%s)", *maxValue, where, max, why)}
		}
		repo := kv.New(b, kv.Limits{MaxValueBytes: int(maxValueBytes)})
		defer repo.Close()
		return serveKV(cmd.Context(), e, repo, server.Config{Addr: *addr, MaxConns: *maxConns, DebugAddr: *debugAddr, Tokens: tokens, TLS: tlsCfg, LogAttrs: []any{"repository", where}})
	}
	return cmd
}

// serveKV serves repo's HTTP API; srv gives the address, tokens and log
// attributes.
func serveKV(ctx context.Context, e *env, repo *kv.Repository, srv server.Config) error {
	mux := http.NewServeMux()
	httpapi.Mount(mux, repo, srv.Tokens)
	srv.Name, srv.Logger, srv.Metrics = "logbook kv", e.log, metrics.NewRegistry()
	// A backend that failed (pebblekv after a failed commit) or cannot
	// be read answers 503. The check reads no value: anyone may ask it.
	srv.Check = func(ctx context.Context) (map[string]any, error) {
		if err := repo.Healthy(ctx); err != nil {
			return nil, server.Unavailable("repository", err)
		}
		return nil, nil
	}
	return server.Run(ctx, srv, mux)
}
