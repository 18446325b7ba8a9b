package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/logbook/logbook/engine/admin"
	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/httpreplica"
	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/engine/metrics"
	"github.com/logbook/logbook/engine/query"
	"github.com/logbook/logbook/engine/registry"
	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/internal/webui"
	"github.com/logbook/logbook/services/flights"
	"github.com/logbook/logbook/services/flights/httpapi"
)

// serveFlags are the flags of `logbook flights serve`, as given.
type serveFlags struct {
	store        storeFlags
	addr         string
	maxConns     int
	tokens       tokenFlags
	debugAddr    string
	replicaOf    string
	replicaToken string
	readOnly     bool
	commandsOnly bool
	bus          string
	busFormat    string
	backupDir    string
	cacheMiB     int
	tls          cliutil.TLSFlags
	follow       cliutil.ClientTLSFlags
}

func newServeCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the flights service: HTTP API, queries, metrics and web UI",
		Long: `Serves the flights service: its HTTP API, stream queries, Prometheus
metrics and the web UI, as one of these kinds of node:

  one process on the embedded store       [--data DIR]
  a write node of a cluster               --store postgres://… [--bus kafka://…] [--commands-only]
  a read replica of a cluster             --read-only --store postgres://… [--bus kafka://…]
  a read replica of one server, over HTTP --replica-of URL --replica-token T`,
		Example: `  LOGBOOK_TOKENS=viewer-tok:viewer,planner-tok:planner logbook flights serve
  logbook flights serve --store postgres://localhost/logbook --bus kafka://127.0.0.1:9092/logbook --tokens ./dev-tokens
  logbook flights serve --read-only --store postgres://localhost/logbook --addr 127.0.0.1:8180 --tokens ./dev-tokens`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	var f serveFlags
	f.store.register(fs, "./data")
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "address to listen on")
	fromEnv(fs, "addr")
	fs.IntVar(&f.maxConns, "max-conns", server.DefaultMaxConns, "connections held at once; beyond, a new one is answered 503 and closed")
	f.tokens.register(fs, ", roles viewer and planner")
	fs.StringVar(&f.debugAddr, "debug-addr", "", "serve Go's pprof profiles on this address, to any token (off by default; keep it on loopback)")
	fromEnv(fs, "debug-addr")
	fs.StringVar(&f.replicaOf, "replica-of", "", "run as a read replica of the logbook server at this URL (its validation queries, fed over HTTP); no local store")
	fromEnv(fs, "replica-of")
	fs.StringVar(&f.replicaToken, "replica-token", "", "bearer token for the primary of --replica-of")
	secretFlag(fs, "replica-token")
	fs.BoolVar(&f.readOnly, "read-only", false, "run as a read replica of the shared --store: the validation view and queries, no commands")
	fs.IntVar(&f.cacheMiB, "aggregate-cache-mib", 32, "MiB of rotations not used in the last second that a write node keeps in memory (by their estimated size; split over the cache's shards); beyond it the least recently used are reloaded from their snapshots and events")
	fromEnv(fs, "aggregate-cache-mib")
	fs.BoolVar(&f.commandsOnly, "commands-only", false, "a write node of a cluster whose queries go to read replicas: no validation view")
	fs.StringVar(&f.bus, "bus", "", "kafka://host:port/topic[?tls_ca=…&sasl=…]: write nodes publish the log to this topic, read replicas (--read-only) follow it")
	secretFlag(fs, "bus")
	fs.StringVar(&f.busFormat, "bus-format", "logbook", "format of the values on --bus: logbook (its own), or avro (the schema registry's wire format, schema registered under <topic>-value, for stock Confluent deserializers)")
	fromEnv(fs, "bus-format")
	_ = cmd.RegisterFlagCompletionFunc("bus-format", cobra.FixedCompletions([]string{"logbook", "avro"}, cobra.ShellCompDirectiveNoFileComp))
	fs.StringVar(&f.backupDir, "backup-dir", "", "directory under which POST /admin/backup (a token of role admin) writes backups of the embedded store, each in a new directory (off by default)")
	fromEnv(fs, "backup-dir")
	f.tls.Register(fs)
	f.follow.Register(fs, "follow", "the primary of --replica-of")
	cmd.MarkFlagsMutuallyExclusive("read-only", "commands-only", "replica-of")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		cfg, err := f.parse(ctx, e.log)
		if err != nil {
			return err
		}
		n, err := openNode(ctx, e.log, cfg)
		if err != nil {
			return err
		}
		defer n.close()
		return n.run(ctx)
	}
	return cmd
}

// mode is what a node serves.
type mode int

const (
	// modeFull serves commands, the validation view and queries on its
	// own store: one process on the embedded store, or a write node of
	// a cluster on a shared one.
	modeFull mode = iota
	// modeCommandsOnly is a cluster's write node without the view: its
	// queries go to read replicas.
	modeCommandsOnly
	// modeReadOnly is a cluster's read replica: the view and queries on
	// the shared store (or the bus), no commands.
	modeReadOnly
	// modeReplicaOf is a read replica of one server, fed over HTTP, with
	// no store of its own.
	modeReplicaOf
)

// nodeConfig is a node's configuration, checked.
type nodeConfig struct {
	mode   mode
	store  storeFlags
	bus    *server.Bus // nil: no bus
	tokens *auth.Tokens
	addr   string
	conns  int // the connection cap
	debug  string
	// replicaOf and replicaToken name the primary of modeReplicaOf;
	// followTLS is how the replica verifies it (nil: Go's defaults).
	replicaOf, replicaToken string
	// backupDir is the root of the backups POST /admin/backup takes.
	backupDir string
	followTLS *tls.Config
	// tls makes the node serve HTTPS (nil: plain HTTP).
	tls *server.TLSConfig
	// cacheBytes bounds each aggregate runtime's cache.
	cacheBytes int64
}

// parse checks the flags and decides the node's mode: every usage error
// of serve is found here, before anything is opened.
func (f *serveFlags) parse(ctx context.Context, log *slog.Logger) (*nodeConfig, error) {
	if f.maxConns <= 0 {
		return nil, usageError{Msg: "--max-conns must be positive"}
	}
	if f.cacheMiB < 1 || f.cacheMiB > 1<<20 {
		return nil, usageError{Msg: fmt.Sprintf("--aggregate-cache-mib %d: want 1 to 1048576 (MiB)", f.cacheMiB)}
	}
	c := &nodeConfig{store: f.store, addr: f.addr, conns: f.maxConns, debug: f.debugAddr, replicaOf: f.replicaOf, replicaToken: f.replicaToken, backupDir: f.backupDir,
		cacheBytes: int64(f.cacheMiB) << 20}
	if f.backupDir != "" && (f.store.store != "" || f.replicaOf != "") {
		return nil, usageError{Msg: "--backup-dir backs up the embedded store (--data); back up a PostgreSQL store with pg_dump or pg_basebackup (docs/operations.md)"}
	}
	switch {
	case f.replicaOf != "":
		c.mode = modeReplicaOf
		if f.replicaToken == "" {
			return nil, usageError{Msg: "--replica-of needs --replica-token (or LOGBOOK_REPLICA_TOKEN): a token the primary accepts"}
		}
	case f.readOnly && f.commandsOnly:
		return nil, usageError{Msg: "--read-only and --commands-only exclude each other: a replica answers queries, a commands-only node commands"}
	case (f.readOnly || f.commandsOnly) && f.store.store == "":
		return nil, usageError{Msg: "--read-only and --commands-only need a shared --store postgres://…: the embedded store has one process"}
	case f.readOnly:
		c.mode = modeReadOnly
	case f.commandsOnly:
		c.mode = modeCommandsOnly
	}
	// A replica never appends, so it must not become the shared store's
	// sequencer, which every append of the cluster would then wait on.
	c.store.readOnly = c.mode == modeReadOnly
	bus, err := server.ParseBus(f.bus)
	if err != nil {
		return nil, usageError{Msg: "--bus " + err.Error()}
	}
	c.bus = bus
	switch f.busFormat {
	case "logbook", "":
	case "avro":
		if c.bus == nil {
			return nil, usageError{Msg: "--bus-format avro needs a --bus"}
		}
		c.bus.Avro = true
	default:
		return nil, usageError{Msg: fmt.Sprintf("--bus-format %q: want logbook or avro", f.busFormat)}
	}
	if c.tls, err = f.tls.Config(); err != nil {
		return nil, err
	}
	if f.follow.Set() && c.mode != modeReplicaOf {
		return nil, usageError{Msg: "--follow-ca, --follow-cert and --follow-key are for a replica of an HTTPS primary (--replica-of https://…)"}
	}
	if c.followTLS, err = f.follow.Config(); err != nil {
		return nil, err
	}
	tokens, err := f.tokens.load(ctx, log, true, httpapi.Planner, auth.Viewer)
	if err != nil {
		return nil, err
	}
	c.tokens = tokens
	return c, nil
}

// node is one serving process: what it opened, in the order to close it,
// and its routes.
type node struct {
	cfg *nodeConfig
	log *slog.Logger
	reg *prometheus.Registry
	mux *http.ServeMux
	svc *flights.Service
	// health is the store /healthz reads the head of.
	health eventstore.Store
	// store is the node's own store (nil for a replica of a server over
	// HTTP), which the admin API reads; publisher watches its Kafka
	// publisher, if it runs one.
	store     eventstore.Store
	publisher *kafkabus.Monitor
	// describe names what the node serves from, for the log.
	describe string
	// closers release what was opened, last first.
	closers []func()
	// onShutdown runs when the HTTP server shuts down.
	onShutdown []func()
}

// openNode opens what cfg's mode needs and sets up the routes. On error,
// whatever was opened is closed.
func openNode(ctx context.Context, log *slog.Logger, cfg *nodeConfig) (*node, error) {
	server.TuneGC(ctx, server.LeanFloor)
	if cfg.mode == modeFull && cfg.store.store == "" {
		// The node writes to an embedded store of its own, which syncs.
		if n := server.TuneProcs(); n > runtime.NumCPU() {
			log.Info("one processor more than the CPUs, for the store's syncs (GOMAXPROCS sets it)", "gomaxprocs", n)
		}
	}
	n := &node{cfg: cfg, log: log, reg: metrics.NewRegistry(), mux: http.NewServeMux(), describe: cfg.store.describe()}
	var err error
	switch cfg.mode {
	case modeFull:
		err = n.openFull(ctx)
	case modeCommandsOnly:
		err = n.openCommandsOnly(ctx)
	case modeReadOnly:
		err = n.openReadOnly(ctx)
	case modeReplicaOf:
		err = n.openReplicaOf(ctx)
	}
	if err != nil {
		n.close()
		return nil, err
	}
	n.mux.Handle("/api/", httpapi.New(ctx, n.svc, cfg.tokens))
	if n.store != nil {
		var mons []*kafkabus.Monitor
		if n.publisher != nil {
			mons = append(mons, n.publisher)
		}
		adminStore := n.store
		if cfg.mode == modeReadOnly {
			// A read replica never writes the shared store: its admin
			// page browses, and removals go to a write node.
			adminStore = browseOnly{n.store}
		}
		mountAdmin(n.mux, adminStore, cfg.tokens, n.reg, admin.Options{}, mons...)
	}
	n.mux.Handle("/", webui.Handler())
	return n, nil
}

// openFull is a node on its own store that serves commands, the view and
// queries, publishing the log to the bus if there is one.
func (n *node) openFull(ctx context.Context) error { return n.openWriter(ctx, false) }

// writerOptions are the flights service's options on a write node.
func (n *node) writerOptions(commandsOnly bool) flights.Options {
	return flights.Options{Registerer: n.reg, Logger: n.log, CommandsOnly: commandsOnly,
		Aggregates: aggregate.Options{CacheBytes: n.cfg.cacheBytes}}
}

// openCommandsOnly is a cluster's write node without the view.
func (n *node) openCommandsOnly(ctx context.Context) error { return n.openWriter(ctx, true) }

func (n *node) openWriter(ctx context.Context, commandsOnly bool) error {
	s, store, err := n.openStore()
	if err != nil {
		return err
	}
	n.serveBackup(s)
	n.svc, err = flights.New(ctx, store, n.writerOptions(commandsOnly))
	if err != nil {
		return err
	}
	n.closers = append(n.closers, func() { n.svc.Close() })
	reg, err := n.serveRegistry(ctx, store)
	if err != nil {
		return err
	}
	if b := n.cfg.bus; b != nil {
		var schemas registry.Schemas
		if b.Avro {
			schemas = reg
			// The ids of its messages must stay readable: no hard
			// delete of the bus's subject.
			reg.Protect(b.Topic + "-value")
		}
		n.publisher = &kafkabus.Monitor{}
		n.closers = append(n.closers, startPublisher(ctx, n.log, store, s, b, n.reg, schemas, n.publisher))
	}
	return n.serveQueries(store)
}

// openReadOnly is a cluster's read replica: the view, fed by the bus if
// there is one, and queries on the shared store.
func (n *node) openReadOnly(ctx context.Context) error {
	_, store, err := n.openStore()
	if err != nil {
		return err
	}
	viewStore := store
	if b := n.cfg.bus; b != nil {
		if err := kafkabus.EnsureTopic(ctx, b.Config, b.Topic, 12, -1); err != nil {
			return err
		}
		// Kafka feeds the view; the store gives what Kafka no longer holds.
		viewStore = kafkabus.NewReplicaStore(b.Config, b.Topic, store)
	}
	n.svc, err = flights.NewReplica(ctx, viewStore, flights.Options{Registerer: n.reg, Logger: n.log})
	if err != nil {
		return err
	}
	n.closers = append(n.closers, func() { n.svc.Close() })
	return n.serveQueries(store)
}

// openReplicaOf is a read replica of one server: the view in this
// process, fed by the primary's live query stream.
func (n *node) openReplicaOf(ctx context.Context) error {
	rs := httpreplica.NewWithOptions(n.cfg.replicaOf, n.cfg.replicaToken, httpreplica.Options{TLS: n.cfg.followTLS})
	n.closers = append(n.closers, func() { rs.Close() })
	n.health = rs
	n.describe = "(replica of " + n.cfg.replicaOf + ")"
	var err error
	n.svc, err = flights.NewReplica(ctx, rs, flights.Options{Registerer: n.reg, Logger: n.log})
	if err != nil {
		return err
	}
	n.closers = append(n.closers, func() { n.svc.Close() })
	return nil
}

// openStore opens the node's store, measured.
func (n *node) openStore() (*openedStore, eventstore.Store, error) {
	s, err := n.cfg.store.open(n.log)
	if err != nil {
		return nil, nil, err
	}
	n.closers = append(n.closers, func() { s.Close() })
	store, err := metrics.InstrumentStore(s, n.reg)
	if err != nil {
		return nil, nil, err
	}
	n.health, n.store = store, store
	return s, store, nil
}

// serveQueries adds the stream queries on store.
func (n *node) serveQueries(store eventstore.Store) error {
	queries, err := query.New(store, query.Options{Registerer: n.reg})
	if err != nil {
		return err
	}
	n.closers = append(n.closers, queries.Close)
	n.mux.Handle("/queries/", n.cfg.tokens.RequireRole(auth.Viewer, query.NewHandler(queries, query.HandlerOptions{})))
	// Live query streams end, so that Shutdown need not wait for them.
	n.onShutdown = append(n.onShutdown, queries.Close)
	return nil
}

// startPublisher publishes the log to the bus until stopped (logbook
// serve's write nodes, logbook notify serve). On a shared store one
// process at a time publishes, under a lock among them, and keeps its
// progress in the store. With schemas (--bus-format avro) the values are
// in the schema registry's wire format, their schema registered under
// <topic>-value. mon, if not nil, receives the publisher's state.
func startPublisher(ctx context.Context, log *slog.Logger, store eventstore.Store, s *openedStore, b *server.Bus, reg prometheus.Registerer, schemas registry.Schemas, mon *kafkabus.Monitor) (stop func()) {
	name := "kafka publisher " + b.Topic
	cfg := kafkabus.SuperviseConfig{
		PublisherConfig: kafkabus.PublisherConfig{
			Config: b.Config, Topic: b.Topic, TransactionalID: "logbook-publisher-" + b.Topic, Logger: log,
			Schemas: schemas,
		},
		Registerer: reg,
		Monitor:    mon,
	}
	if s.pg != nil {
		cfg.Progress = s.pg.Progress(name)
		cfg.Exclusive = func(ctx context.Context, run func(context.Context) error) error {
			return s.pg.Exclusive(ctx, name, run)
		}
	}
	pubCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := kafkabus.Supervise(pubCtx, store, cfg); err != nil && pubCtx.Err() == nil {
			log.Error("Kafka publisher ended", "err", err)
		}
	}()
	return func() { cancel(); <-done }
}

// run serves until ctx ends (or a signal), then shuts the server down.
func (n *node) run(ctx context.Context) error {
	if n.cfg.mode == modeReadOnly {
		// A replica joins the pool once it has replayed the log: until
		// it listens, the load balancer passes it over.
		start := time.Now()
		if err := n.svc.Validation.WaitCaughtUp(ctx); err != nil {
			return fmt.Errorf("replica: replay the log: %w", err)
		}
		n.log.Info("replica caught up", "seconds", time.Since(start).Seconds())
	}
	go n.logCaughtUp(ctx)
	return server.Run(ctx, server.Config{
		Name: "logbook", Addr: n.cfg.addr, MaxConns: n.cfg.conns, TLS: n.cfg.tls,
		Tokens: n.cfg.tokens, Metrics: n.reg, Check: server.StoreCheck(n.health), DebugAddr: n.cfg.debug,
		Logger: n.log, LogAttrs: []any{"store", n.describe}, OnShutdown: n.onShutdown,
	}, n.mux)
}

// logCaughtUp says when the view has caught up with the log. The API
// answers at once; queries reflect the log as the view catches up
// (min_position waits for it).
func (n *node) logCaughtUp(ctx context.Context) {
	if n.svc.Validation == nil {
		return
	}
	start := time.Now()
	if err := n.svc.Validation.WaitCaughtUp(ctx); err == nil {
		c, pos := n.svc.Validation.Current().Counts()
		n.log.Info("validation view caught up", "position", pos, "violations", c.Total, "seconds", time.Since(start).Seconds())
	}
}

// close releases what the node opened, last first.
func (n *node) close() {
	for i := len(n.closers) - 1; i >= 0; i-- {
		n.closers[i]()
	}
	n.closers = nil
}

// serviceOptions are the flights service's options for a command that is
// not a server: the process's logger, no metrics.
func serviceOptions(e *env) flights.Options {
	return flights.Options{Aggregates: aggregate.Options{Logger: e.log}}
}
