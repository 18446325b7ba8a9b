// Package server runs an HTTP service the way every logbook server runs:
// call Run with a Config and the service's handler, and it serves until
// the context ends or the process gets SIGINT or SIGTERM, then shuts down
// gracefully.
//
// Run puts beside the handler what every server needs:
//
//   - GET /healthz, which needs no token (load balancers ask it) and
//     answers 200 with {"status":"ok",…} while the Config's Check passes,
//     503 when it fails — the failure's details go to the log, not to the
//     anonymous caller;
//   - GET /metrics, the Config's Prometheus registry, to a token of any
//     role (a scraper sends one);
//   - an access log and request metrics by route pattern and status
//     (package accesslog) around everything;
//   - a cap on the connections held at once (a connection beyond it is
//     answered 503 and closed at once), and timeouts on reading requests
//     and on idle connections;
//   - optionally, HTTPS (Config.TLS): TLS 1.2 or later, the certificate
//     reloaded on SIGHUP or when its files change, and mutual TLS whose
//     client certificates may carry a role;
//   - optionally, answers to pipelined requests sent in one write
//     (Config.Coalesce), and Go's pprof profiles on a second address,
//     behind a token (Config.DebugAddr).
//
// The first SIGINT or SIGTERM starts the graceful shutdown: the listener
// closes, requests in flight finish (up to Timeouts.Shutdown), the
// Config's OnShutdown functions end what would hold them (queues, live
// streams). A second signal ends the process at once.
//
// The package also has what a server process sets up before it serves:
// its logger (NewLogWriter, NewLogger), the garbage collector's tuning
// (TuneGC), its bearer tokens (LoadTokens),
// the Kafka bus it publishes to or follows (ParseBus), and the health
// check of an event store (StoreCheck).
//
//	tokens, err := server.LoadTokens(file, myservice.Roles(), auth.Viewer, myservice.Writer)
//	…
//	reg := metrics.NewRegistry()
//	err = server.Run(ctx, server.Config{
//		Name: "myservice", Addr: "127.0.0.1:8080",
//		Tokens: tokens, Metrics: reg, Check: server.StoreCheck(store),
//	}, handler)
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/accesslog"
	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/metrics"
)

// Config is what Run serves and how. Addr is required; every other field
// may be left zero.
type Config struct {
	// Name names the server in its log lines: "Name serving" with its
	// URL once it listens, "Name stopped" at the end.
	Name string
	// Addr is the address to listen on, host:port; port 0 picks a free
	// one (the "serving" line says which).
	Addr string
	// MaxConns caps the connections held at once (0: DefaultMaxConns).
	MaxConns int
	// Timeouts bound reading requests, idle connections and the
	// shutdown; zero fields take DefaultTimeouts'.
	Timeouts Timeouts
	// TLS, if set, makes the server speak HTTPS, optionally asking its
	// clients for certificates (mutual TLS); see TLSConfig. /healthz
	// is then served over TLS too.
	TLS *TLSConfig
	// Coalesce sends the answers to pipelined requests in one write
	// instead of one each. An answer may then wait up to a millisecond:
	// not for a handler whose streams must leave at once.
	Coalesce bool

	// Tokens are the bearer tokens /metrics and the pprof listener take,
	// of any role (nil: none, so both answer 401).
	Tokens *auth.Tokens
	// Metrics is the registry served at GET /metrics; the access log's
	// request metrics are registered on it (nil: no /metrics, no
	// request metrics).
	Metrics *prometheus.Registry
	// Check is what GET /healthz asks (nil: the server is healthy while
	// it serves).
	Check Check
	// DebugAddr, if set, serves Go's pprof profiles (/debug/pprof/) on
	// this address, to a token of Tokens. Keep it on loopback: a CPU
	// profile or a trace costs the process while it runs.
	DebugAddr string

	// Logger receives the access log and the server's own lines (nil:
	// slog.Default()).
	Logger *slog.Logger
	// LogAttrs are added to the "serving" line (key, value, …).
	LogAttrs []any
	// OnShutdown run when the shutdown begins, to end what would hold
	// it: a queue of waiting requests, live streams.
	OnShutdown []func()
}

// Run serves h on cfg.Addr, with /healthz, /metrics and the rest the
// package describes, until ctx ends or the process gets SIGINT or
// SIGTERM; then it shuts the server down gracefully and returns nil. It
// returns an error if it cannot listen, or if serving fails.
//
// h gets every request but GET /healthz and GET /metrics; a ServeMux's
// patterns in h name the routes in the access log and request metrics.
func Run(ctx context.Context, cfg Config, h http.Handler) error {
	ctx, stop := SignalContext(ctx)
	defer stop()
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	handler, err := cfg.handler(h, log)
	if err != nil {
		return err
	}
	var tc *tls.Config
	if cfg.TLS != nil {
		if tc, err = LoadTLS(ctx, *cfg.TLS, log); err != nil {
			return fmt.Errorf("tls: %w", err)
		}
	}
	conns := cfg.MaxConns
	if conns <= 0 {
		conns = DefaultMaxConns
	}
	ln, err := listen(cfg.Addr, conns)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	scheme := "http://"
	if cfg.Coalesce {
		ln = coalescingListener{ln}
	}
	if tc != nil {
		// Over the coalescing connection, so that the answers' TLS
		// records leave in one write, and under net/http, which then
		// sees a *tls.Conn: it bounds the handshake by the head timeout
		// and gives handlers the client's verified certificate.
		// The connection cap is below TLS: a connection beyond it gets
		// its plain 503 instead of a handshake, and is closed at once.
		ln = tls.NewListener(ln, tc)
		scheme = "https://"
	}
	srv := NewHTTPServer(handler, log, cfg.Timeouts)
	// http.Server runs its shutdown functions in goroutines of their own;
	// Run returns only once they have finished.
	var shutdowns sync.WaitGroup
	for _, f := range cfg.OnShutdown {
		shutdowns.Add(1)
		srv.RegisterOnShutdown(func() { defer shutdowns.Done(); f() })
	}
	if cfg.DebugAddr != "" {
		stopDebug, err := startDebug(cfg.DebugAddr, cfg.tokens(), log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopDebug()
	}
	log.Info(cfg.Name+" serving", append([]any{"url", scheme + ln.Addr().String()}, cfg.LogAttrs...)...)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), cfg.Timeouts.orDefault().Shutdown)
	defer cancel()
	err = srv.Shutdown(shutdown)
	shutdowns.Wait()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info(cfg.Name + " stopped")
	return nil
}

// tokens is cfg.Tokens, or none.
func (cfg *Config) tokens() *auth.Tokens {
	if cfg.Tokens == nil {
		return &auth.Tokens{}
	}
	return cfg.Tokens
}

// handler is h with /healthz and /metrics beside it, all in the access
// log.
func (cfg *Config) handler(h http.Handler, log *slog.Logger) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", healthHandler(cfg.Check, log))
	var reg prometheus.Registerer
	if cfg.Metrics != nil {
		reg = cfg.Metrics
		mux.Handle("GET /metrics", cfg.tokens().RequireRole(auth.Viewer, metrics.Handler(cfg.Metrics)))
	}
	mux.Handle("/", h)
	return accesslog.Wrap(mux, accesslog.Options{Logger: log, Registerer: reg})
}

// SignalContext returns a context that ends with parent or at the first
// SIGINT or SIGTERM the process gets, and the function that releases it.
// Once the context has ended, the process no longer catches these
// signals: a second one ends it at once, as it would without a handler.
// Run calls it; a command that does long work may call it too.
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	return ctx, stop
}

// ErrNoTokens is LoadTokens' error when there is no token at all.
var ErrNoTokens = errors.New("no bearer tokens")

// LoadTokens reads a server's bearer tokens from file, one "token role"
// per line, or, when file is "", from the environment variable
// LOGBOOK_TOKENS (token:role,…). A role must be auth.Viewer or one of
// known, the roles the binary's services declare (auth.Load). A server
// that finds no token cannot be used, so none is an error, ErrNoTokens,
// whose message names need, the roles this server takes, to say what to
// give.
func LoadTokens(file string, known []auth.Role, need ...auth.Role) (*auth.Tokens, error) {
	t, err := auth.Load(file, known)
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	if t.Len() == 0 {
		names := ""
		for i, r := range need {
			if i > 0 {
				names += ", "
			}
			names += string(r)
		}
		return nil, fmt.Errorf("%w: give --tokens FILE, set LOGBOOK_TOKENS=token:role,…, or give --jwks-url (roles: %s)", ErrNoTokens, names)
	}
	return t, nil
}

// listenAddr is where ln listens, as a URL.
func listenAddr(ln net.Listener) string { return "http://" + ln.Addr().String() }
