package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime/debug"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/metrics"
	"github.com/logbook/logbook/engine/query"
	"github.com/logbook/logbook/engine/replica"
	"github.com/logbook/logbook/internal/webui"
	"github.com/logbook/logbook/services/flights"
	"github.com/logbook/logbook/services/flights/httpapi"
)

func runServe(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "serve", "serve [--data DIR | --store postgres://…] [--bus kafka://host:port/topic] [--read-only | --commands-only] [--addr HOST:PORT] [--tokens FILE]")
	var sf storeFlags
	sf.register(fs, "./data")
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	tokensFile := fs.String("tokens", "", "bearer tokens, one \"token role\" per line (default: LOGBOOK_TOKENS, token:role,…)")
	debugAddr := fs.String("debug-addr", "", "serve Go's pprof profiles on this address (off by default; keep it on loopback)")
	replicaOf := fs.String("replica-of", "", "run as a read replica of the logbook server at this URL (its validation queries, fed over HTTP); no local store")
	replicaToken := fs.String("replica-token", os.Getenv("LOGBOOK_REPLICA_TOKEN"), "bearer token for the primary (default: LOGBOOK_REPLICA_TOKEN)")
	readOnly := fs.Bool("read-only", false, "run as a read replica of the shared --store: the validation view and queries, no commands")
	commandsOnly := fs.Bool("commands-only", false, "a write node of a cluster whose queries go to read replicas: no validation view")
	busURL := fs.String("bus", "", "kafka://host:port/topic: write nodes publish the log to this topic, read replicas (--read-only) follow it")
	if err := parse(fs, args); err != nil {
		return err
	}
	var bus *busFlag
	if *busURL != "" {
		var err error
		if bus, err = parseBus(*busURL); err != nil {
			return err
		}
	}
	tokens, err := auth.Load(*tokensFile)
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	if tokens.Len() == 0 {
		return usageError{"no bearer tokens: give --tokens FILE or set LOGBOOK_TOKENS=token:role,… (roles: planner, viewer, schema-admin)"}
	}
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		// The views keep the whole schedule in memory while requests
		// allocate briefly. Collecting only when the heap has grown
		// tenfold spends far less CPU rescanning that live heap — under
		// read load, GC was the source of the latency tail — and the
		// memory limit makes the collector work harder before the
		// process grows past 4 GiB.
		debug.SetGCPercent(1000)
		debug.SetMemoryLimit(4 << 30)
	}
	reg := metrics.NewRegistry()
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(reg))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	var svc *flights.Service
	if *replicaOf != "" {
		// A read replica: the validation view in this process, fed by
		// the primary's live query stream.
		if *replicaToken == "" {
			return usageError{"--replica-of needs --replica-token (or LOGBOOK_REPLICA_TOKEN): a token the primary accepts"}
		}
		rs := replica.New(*replicaOf, *replicaToken)
		defer rs.Close()
		if svc, err = flights.NewReplica(ctx, rs, flights.Options{Registerer: reg}); err != nil {
			return err
		}
		defer svc.Close()
		mux.HandleFunc("GET /healthz", healthz(rs))
		sf.data = "(replica of " + *replicaOf + ")"
	} else {
		if (*readOnly || *commandsOnly) && sf.store == "" {
			return usageError{"--read-only and --commands-only need a shared --store postgres://…: the embedded store has one process"}
		}
		if *readOnly && *commandsOnly {
			return usageError{"--read-only and --commands-only exclude each other: a replica answers queries, a commands-only node commands"}
		}
		sf.readOnly = *readOnly
		s, err := sf.open()
		if err != nil {
			return err
		}
		defer s.Close()
		store, err := metrics.InstrumentStore(s, reg)
		if err != nil {
			return err
		}
		if *readOnly {
			viewStore := store
			if bus != nil {
				if viewStore, err = bus.replicaStore(ctx, store); err != nil {
					return err
				}
			}
			svc, err = flights.NewReplica(ctx, viewStore, flights.Options{Registerer: reg})
		} else {
			svc, err = flights.NewService(ctx, store, flights.Options{Registerer: reg, CommandsOnly: *commandsOnly})
		}
		if err != nil {
			return err
		}
		defer svc.Close()
		if bus != nil && !*readOnly {
			pubCtx, stopPub := context.WithCancel(ctx)
			pubDone := make(chan struct{})
			go func() { defer close(pubDone); _ = bus.publish(pubCtx, store, reg, log, s.pg) }()
			defer func() { stopPub(); <-pubDone }()
		}
		queries, err := query.New(store, query.Options{Registerer: reg})
		if err != nil {
			return err
		}
		defer queries.Close()
		mux.HandleFunc("GET /healthz", healthz(store))
		mux.Handle("/queries/", tokens.Require(query.NewHandler(queries, query.HandlerOptions{})))
		if err := mountRegistry(ctx, srv, mux, store, tokens); err != nil {
			return err
		}
		srv.RegisterOnShutdown(queries.Close) // live query streams end, so Shutdown need not wait for them
	}
	mux.Handle("/api/", httpapi.New(ctx, svc, tokens))
	mux.Handle("/", webui.Handler())
	if *readOnly {
		// A replica joins the pool once it has replayed the log: until
		// it listens, the load balancer passes it over.
		start := time.Now()
		if err := svc.Validation.WaitCaughtUp(ctx); err != nil {
			return fmt.Errorf("replica: replay the log: %w", err)
		}
		log.Info("replica caught up", "seconds", time.Since(start).Seconds())
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if *debugAddr != "" {
		dbg := http.NewServeMux()
		dbg.HandleFunc("/debug/pprof/", pprof.Index)
		dbg.HandleFunc("/debug/pprof/profile", pprof.Profile)
		dbg.HandleFunc("/debug/pprof/trace", pprof.Trace)
		go func() {
			if err := http.ListenAndServe(*debugAddr, dbg); err != nil {
				log.Error("debug server", "err", err)
			}
		}()
	}
	log.Info("logbook serving", "url", "http://"+ln.Addr().String(), "store", sf.describe())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	go func() {
		// The API answers at once; queries reflect the log as the view
		// catches up (min_position waits for it).
		if svc.Validation == nil {
			return
		}
		start := time.Now()
		if err := svc.Validation.WaitCaughtUp(ctx); err == nil {
			c, pos := svc.Validation.Current().Counts()
			log.Info("validation view caught up", "position", pos, "violations", c.Total, "seconds", time.Since(start).Seconds())
		}
	}()
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
