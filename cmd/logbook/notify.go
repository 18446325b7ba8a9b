package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/logbook/logbook/engine/admin"
	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/backup"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/engine/metrics"
	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/engine/shred"
	"github.com/logbook/logbook/engine/window"
	"github.com/logbook/logbook/engine/window/pgsink"
	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/internal/webui"
	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/deliver"
	"github.com/logbook/logbook/services/notify/httpapi"
	"github.com/logbook/logbook/services/notify/pipeline"
	"github.com/logbook/logbook/services/notify/sink"
	"github.com/logbook/logbook/services/notify/userscdc"
)

func newNotifyCmd(e *env) *cobra.Command {
	g := group("notify", "Serve the mass-notification service and its test endpoint",
		newNotifyServeCmd(e),
		newNotifySinkCmd(e),
		newNotifyUsersCmd(e),
		newNotifyKeysCmd(e),
		newNotifyStageCmd(e),
	)
	g.Long = `The notify service sends a notification to many users at once: a send
request is an event on the log; a pipeline checks each recipient's
preferences (followed from the users' database by change data capture),
builds the messages and delivers them by push and e-mail, keeping what
failed as dead letters. sink is a loopback delivery endpoint for trying it
out; users fills a users' database.`
	return g
}

// notifyServeFlags are `logbook notify serve`'s flags.
type notifyServeFlags struct {
	store                storeFlags
	state                string
	bus                  string
	usersDB, usersSchema string
	slot                 string
	pushURL, emailURL    string
	rate                 float64
	attempts             int
	addr, debugAddr      string
	tokens               tokenFlags
	metricsSink          string
	metricsGrace         time.Duration
	maxAge, maxSkew      time.Duration
	parallel, senders    int
	chunk, maxRecipients int
	maxConns             int
	backupDir            string
	tls                  cliutil.TLSFlags
	deliverTLS           cliutil.ClientTLSFlags
	// Checked from tls and deliverTLS.
	tlsCfg              *server.TLSConfig
	deliverTLSCfg       *tls.Config
	masterKeyFile, keys string
}

func newNotifyServeCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve --users-db postgres://… --push-url URL --email-url URL",
		Short: "Serve the notify service: send requests, delivery pipeline, metrics",
		Long: `Serves the notify service: its HTTP API and web page take send requests
onto the log; the pipeline checks preferences (followed from the users'
database by change data capture), builds the messages, delivers them to
--push-url and --email-url and keeps dead letters; delivery outcomes are
aggregated into minute, hour and day windows.`,
		Example: `  logbook notify sink &
  LOGBOOK_TOKENS=viewer-tok:viewer,sender-tok:sender logbook notify serve \
      --users-db postgres://localhost/users \
      --push-url http://127.0.0.1:8084/deliver --email-url http://127.0.0.1:8084/deliver`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	var f notifyServeFlags
	f.store.register(fs, "./data-notify")
	fs.StringVar(&f.state, "state", "./data-notify-state", "directory of the users view (CDC) and the metrics windows")
	fs.StringVar(&f.bus, "bus", "", "kafka://host:port/topic[?tls_ca=…&sasl=…]: publish the log to this topic and follow it from there (default: follow the store)")
	secretFlag(fs, "bus")
	fs.StringVar(&f.usersDB, "users-db", "", "postgres://… URL of the users' database, followed by logical replication (required; its role needs REPLICATION)")
	secretFlag(fs, "users-db")
	fs.StringVar(&f.usersSchema, "users-schema", "public", "schema of the users' tables (users, user_settings, user_devices)")
	fs.StringVar(&f.slot, "slot", "logbook_notify_users", "name of the replication slot and of the publication")
	fs.StringVar(&f.pushURL, "push-url", "", "URL push batches are posted to (e.g. a logbook notify sink's http://127.0.0.1:8084/deliver)")
	fs.StringVar(&f.emailURL, "email-url", "", "URL e-mail batches are posted to")
	fs.Float64Var(&f.rate, "rate", 0, "most delivery calls per second per channel (0: no limit)")
	fs.IntVar(&f.attempts, "attempts", 6, "calls per batch before it fails for good and becomes a dead letter")
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8082", "address to listen on")
	fromEnv(fs, "addr")
	fs.StringVar(&f.debugAddr, "debug-addr", "", "serve Go's pprof profiles on this address, to any token (off by default; keep it on loopback)")
	fromEnv(fs, "debug-addr")
	fs.IntVar(&f.maxConns, "max-conns", server.DefaultMaxConns, "connections held at once; beyond, a new one is answered 503 and closed")
	f.tokens.register(fs, ", roles viewer and sender")
	fs.StringVar(&f.metricsSink, "metrics-sink", "", "postgres://… URL: write closed metrics windows to tables notifications_minute, _hour and _day there")
	secretFlag(fs, "metrics-sink")
	fs.DurationVar(&f.metricsGrace, "metrics-grace", time.Hour, "how long after its end a metrics window still takes outcomes (later ones count as late)")
	fs.DurationVar(&f.maxAge, "max-timestamp-age", 24*time.Hour, "how far behind the server's clock a send's timestamp may be (older: 400)")
	fs.DurationVar(&f.maxSkew, "max-timestamp-skew", time.Minute, "how far ahead of the server's clock a send's timestamp may be (later: 400)")
	fs.IntVar(&f.parallel, "parallel", 4, "chunks of recipients the pipeline works on at once")
	fs.IntVar(&f.senders, "senders", 8, "delivery calls each chunk keeps in flight")
	fs.IntVar(&f.chunk, "chunk", 10_000, "recipients per chunk event (and pipeline step)")
	fs.IntVar(&f.maxRecipients, "max-recipients", 1_000_000, "most recipients of one request")
	fs.StringVar(&f.backupDir, "backup-dir", "", "directory under which POST /admin/backup (a token of role admin) writes backups of the embedded store and the metrics windows, each in a new directory (off by default)")
	fromEnv(fs, "backup-dir")
	f.tls.Register(fs)
	f.deliverTLS.Register(fs, "deliver", "the https:// --push-url and --email-url")
	fs.StringVar(&f.masterKeyFile, "master-key-file", "", "file (mode 600) of the master key, 64 hex digits, that wraps each user's key: names, e-mail addresses and device tokens are then sealed and users can be forgotten (default: LOGBOOK_MASTER_KEY; neither: kept in clear)")
	fs.StringVar(&f.keys, "keys", "", "directory of the users' keys (default STATE/keys; with --store postgres://… the table logbook_subject_keys there)")
	for _, name := range []string{"users-db", "push-url", "email-url"} {
		_ = cmd.MarkFlagRequired(name)
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		switch {
		case f.usersDB == "" || !isPostgresURL(f.usersDB):
			return usageError{Msg: "--users-db postgres://… is required: the users' database the preference check follows"}
		case f.pushURL == "" || f.emailURL == "":
			return usageError{Msg: "--push-url and --email-url are required (a logbook notify sink serves both)"}
		case deliver.CheckURL(f.pushURL) != nil:
			return usagef("--push-url: %v", deliver.CheckURL(f.pushURL))
		case deliver.CheckURL(f.emailURL) != nil:
			return usagef("--email-url: %v", deliver.CheckURL(f.emailURL))
		case f.metricsSink != "" && !isPostgresURL(f.metricsSink):
			return usagef("--metrics-sink %q: want a postgres:// URL", redactURL(f.metricsSink))
		case f.rate < 0 || f.attempts < 1 || f.parallel < 1 || f.senders < 1 || f.chunk < 1 || f.chunk > 50_000 || f.maxRecipients < 1 || f.metricsGrace <= 0 || f.maxAge <= 0 || f.maxSkew <= 0 || f.maxConns < 1:
			return usageError{Msg: "--rate must not be negative; --attempts, --parallel, --senders, --max-recipients, --metrics-grace, --max-timestamp-age, --max-timestamp-skew, --max-conns positive; --chunk 1-50000"}
		case f.state == "":
			return usageError{Msg: "--state must name a directory"}
		case f.backupDir != "" && f.store.store != "":
			return usageError{Msg: "--backup-dir backs up the embedded store (--data); back up a PostgreSQL store with pg_dump or pg_basebackup (docs/operations.md)"}
		}
		bus, err := server.ParseBus(f.bus)
		if err != nil {
			return usageError{Msg: "--bus " + err.Error()}
		}
		if f.tlsCfg, err = f.tls.Config(); err != nil {
			return err
		}
		if f.deliverTLSCfg, err = f.deliverTLS.Config(); err != nil {
			return err
		}
		tokens, err := f.tokens.load(cmd.Context(), e.log, true, auth.Viewer, httpapi.Sender)
		if err != nil {
			return err
		}
		return serveNotify(cmd.Context(), e, &f, bus, tokens)
	}
	return cmd
}

func serveNotify(ctx context.Context, e *env, f *notifyServeFlags, bus *server.Bus, tokens *auth.Tokens) error {
	// Requests and deliveries allocate briefly and the live heap is
	// small; the windows' live ingest allocates fast (AllocFloor).
	server.TuneGC(ctx, server.AllocFloor)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reg := metrics.NewRegistry()
	s, err := f.store.open(e.log)
	if err != nil {
		return err
	}
	defer s.Close()
	store, err := metrics.InstrumentStore(s, reg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.state, 0o755); err != nil {
		return err
	}
	keyring, err := openNotifyKeyring(ctx, e, f, s, store)
	if err != nil {
		return err
	}
	if keyring != nil {
		defer keyring.Close()
		// A keyring restored from a backup older than a forgetting holds
		// the key again: the audit stream destroys it again.
		n, err := keyring.Reforget(ctx, store)
		if err != nil {
			return err
		}
		if n > 0 {
			e.log.Warn("destroyed again keys the audit stream says were forgotten: the keyring was restored from a backup older than their forgetting", "keys", n)
		}
	} else {
		e.log.Warn("no master key (--master-key-file, LOGBOOK_MASTER_KEY): the users' names and addresses are kept in clear and users cannot be forgotten")
	}
	view, err := userscdc.OpenView(filepath.Join(f.state, "users"), userscdc.ViewOptions{Logger: e.log, Keyring: keyring})
	if err != nil {
		return err
	}
	defer view.Close()
	e.log.Info("following the users' database", "users_db", redactURL(f.usersDB), "position", view.Position())
	// A fresh view serves as soon as the slot exists: until the copy of
	// its snapshot is in, reads go to that snapshot in the users'
	// database (userscdc.Config.ServeDuringCopy).
	follower, err := userscdc.Start(ctx, view, userscdc.Config{URL: f.usersDB, Schema: f.usersSchema, Publication: f.slot, Slot: f.slot,
		ServeDuringCopy: true, Logger: e.log})
	if err != nil {
		return fmt.Errorf("users' database: %w", err)
	}
	defer follower.Close()
	d, err := deliver.New(deliver.Config{
		Endpoints: map[notify.Channel]string{notify.Push: f.pushURL, notify.Email: f.emailURL},
		Rate:      map[notify.Channel]float64{notify.Push: f.rate, notify.Email: f.rate},
		Attempts:  f.attempts,
		// Calls to every endpoint share one transport: keep enough idle
		// connections for every sender of every chunk. deliver.New makes
		// the client follow no redirect.
		Client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * f.parallel * f.senders, IdleConnTimeout: time.Minute, TLSClientConfig: f.deliverTLSCfg}},
	})
	if err != nil {
		return usageError{Msg: err.Error()}
	}
	var follow eventstore.Store // nil: the store itself
	var publishers []*kafkabus.Monitor
	if bus != nil {
		if err := kafkabus.EnsureTopic(ctx, bus.Config, bus.Topic, 12, -1); err != nil {
			return err
		}
		mon := &kafkabus.Monitor{}
		publishers = append(publishers, mon)
		stop := startPublisher(ctx, e.log, store, s, bus, reg, nil, mon)
		defer stop()
		follow = kafkabus.NewReplicaStore(bus.Config, bus.Topic, store)
	}
	var exclusive func(context.Context, func(context.Context) error) error
	if s.pg != nil {
		exclusive = func(ctx context.Context, run func(context.Context) error) error {
			return s.pg.Exclusive(ctx, "notify pipeline", run)
		}
	}
	svc, err := pipeline.New(ctx, store, pipeline.Config{
		Exclusive: exclusive, Keyring: keyring,
		Follow: follow, Users: view, Deliverer: d, StateDir: f.state,
		ChunkSize: f.chunk, MaxRecipients: f.maxRecipients, Parallel: f.parallel, Senders: f.senders,
		MetricsGrace: f.metricsGrace, MaxAge: f.maxAge, MaxSkew: f.maxSkew, Registerer: reg, Logger: e.log,
	})
	if err != nil {
		return err
	}
	defer svc.Close()
	if f.metricsSink != "" {
		stop, err := startMetricsSinks(ctx, e, f.metricsSink, svc.Aggregation())
		if err != nil {
			return err
		}
		defer stop()
	}
	// A follower that stops (the slot dropped, the source gone for good)
	// stops the server: sends would be checked against a stale view.
	go func() {
		select {
		case <-follower.Done():
			if err := follower.Err(); err != nil {
				e.log.Error("the users' database follower stopped", "err", err)
				cancel()
			}
		case <-ctx.Done():
		}
	}()
	mux := http.NewServeMux()
	httpapi.Mount(mux, svc, tokens)
	mux.Handle("/api/windows/", tokens.RequireRole(auth.Viewer, window.NewHandler([]*window.Aggregation{svc.Aggregation()}, window.HandlerOptions{})))
	var adminOpts admin.Options
	if keyring != nil {
		// The admin page forgets a user, named "user/ID" (the subject
		// the users view seals under) or by the bare id.
		adminOpts.Forget = func(ctx context.Context, subject string) error {
			id, err := strconv.ParseInt(strings.TrimPrefix(subject, "user/"), 10, 64)
			if err != nil || id <= 0 {
				return httpkit.BadRequest("subject %q: a user, as user/ID or ID", subject)
			}
			_, err = svc.Forget(ctx, id, "the admin page")
			return err
		}
	}
	mountAdmin(mux, store, tokens, reg, adminOpts, publishers...)
	mux.Handle("/", webui.NotifyHandler()) // the notify page: send, dead letters, live metrics
	// The metrics windows are a durable view: backed up with the store,
	// restored into --state (logbook restore --views STATE).
	serveBackupOn(mux, tokens, s, f.backupDir, map[string]backup.View{"windows": svc.Aggregation()})
	// The socket's backups copy the windows: it stops before they close.
	defer s.runOnClose()
	err = server.Run(ctx, server.Config{
		Name: "logbook notify", Addr: f.addr, MaxConns: f.maxConns, TLS: f.tlsCfg, Tokens: tokens, Metrics: reg, Check: notifyCheck(store, view, svc), DebugAddr: f.debugAddr, Logger: e.log,
		LogAttrs: []any{"store", f.store.describe(), "users_position", view.Position().String(), "push_url", deliver.RedactURL(f.pushURL), "email_url", deliver.RedactURL(f.emailURL)},
	}, mux)
	if ferr := follower.Err(); ferr != nil && err == nil {
		err = ferr
	}
	return err
}

// openNotifyKeyring opens the users' keys when a master key is given
// (nil when none is): in --keys, by default the state directory's keys,
// or in the PostgreSQL store's database. Forgetting appends its audit
// event to the store.
func openNotifyKeyring(ctx context.Context, e *env, f *notifyServeFlags, s *openedStore, audit shred.AuditAppender) (*shred.Keyring, error) {
	var master shred.MasterKey
	var err error
	switch v := e.getenv(shred.MasterKeyEnv); {
	case f.masterKeyFile != "":
		master, err = shred.LoadMasterKey(f.masterKeyFile)
	case v != "":
		master, err = shred.ParseMasterKey(v)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, usageError{Msg: err.Error()}
	}
	opts := shred.Options{Audit: audit}
	if s.pg != nil && f.keys == "" {
		return shred.OpenPostgres(ctx, s.pg.Pool(), master, shred.PostgresOptions{Options: opts})
	}
	dir := f.keys
	if dir == "" {
		dir = filepath.Join(f.state, "keys")
	}
	return shred.OpenDir(ctx, dir, master, shred.DirOptions{Options: opts, Logger: e.log})
}

// notifyCheck passes when the service can answer and deliver: the
// store reads, the service has not failed (its state, metrics or
// pipeline stopped: svc.Err) and the users view answers lookups — from
// its own rows ("users": "view"), or while its first snapshot is copied
// from that snapshot in the users' database ("users": "snapshot").
func notifyCheck(s eventstore.Store, view usersHealth, svc interface{ Err() error }) server.Check {
	storeCheck := server.StoreCheck(s)
	return func(ctx context.Context) (map[string]any, error) {
		fields, err := storeCheck(ctx)
		if err != nil {
			return nil, err
		}
		if err := svc.Err(); err != nil {
			return nil, server.Unavailable("notify pipeline", err)
		}
		users, err := view.Ready()
		if err != nil {
			return nil, server.Unavailable("users view", err)
		}
		fields["users"] = users
		fields["users_position"] = view.Position().String()
		return fields, nil
	}
}

// usersHealth is what notifyCheck asks of the users view
// (*userscdc.View).
type usersHealth interface {
	Ready() (string, error)
	Position() userscdc.LSN
}

// startMetricsSinks writes the closed metrics windows to PostgreSQL, one
// table per unit, the window start a key column.
func startMetricsSinks(ctx context.Context, e *env, url string, agg *window.Aggregation) (stop func(), err error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("--metrics-sink: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var sinks []*pgsink.Sink
	for _, u := range []struct {
		table string
		unit  time.Duration
	}{{"notifications_minute", time.Minute}, {"notifications_hour", time.Hour}, {"notifications_day", 24 * time.Hour}} {
		s, err := pgsink.New(ctx, pool, agg, pgsink.Config{Table: u.table, Unit: u.unit})
		if err != nil {
			cancel()
			pool.Close()
			return nil, fmt.Errorf("--metrics-sink: %w", err)
		}
		sinks = append(sinks, s)
	}
	go func() {
		defer close(done)
		errc := make(chan error, len(sinks))
		for _, s := range sinks {
			go func() { errc <- s.Run(ctx) }()
		}
		for range sinks {
			if err := <-errc; err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
				e.log.Error("metrics sink stopped", "err", err)
			}
		}
	}()
	return func() { cancel(); <-done; pool.Close() }, nil
}

func newNotifySinkCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sink",
		Short: "Serve a loopback delivery endpoint that counts what it receives",
		Long: `Serves a delivery endpoint for trying the notify service out: POST /deliver
takes a batch of messages and counts them per idempotency key, GET /stats
says what arrived. --latency and --error-rate make it slow or failing.`,
		Example: `  logbook notify sink
  logbook notify sink --addr 127.0.0.1:9000 --error-rate 0.2`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	addr := fs.String("addr", "127.0.0.1:8084", "address to listen on")
	latency := fs.Duration("latency", 0, "added before each call is answered")
	errorRate := fs.Float64("error-rate", 0, "share of calls (0…1) answered 503 without taking the batch")
	seed := fs.Uint64("seed", 1, "seed of the failure draws")
	maxConns := fs.Int("max-conns", server.DefaultMaxConns, "connections held at once; beyond, a new one is answered 503 and closed")
	debugAddr := fs.String("debug-addr", "", "serve Go's pprof profiles on this address, to any token (off by default; keep it on loopback)")
	var tf tokenFlags
	tf.register(fs, " for /metrics (none: /metrics answers 401)")
	var tlsf cliutil.TLSFlags
	tlsf.Register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *maxConns <= 0 {
			return usageError{Msg: "--max-conns must be positive"}
		}
		tlsCfg, err := tlsf.Config()
		if err != nil {
			return err
		}
		s, err := sink.New(sink.Options{Latency: *latency, ErrorRate: *errorRate, Seed: *seed})
		if err != nil {
			return usageError{Msg: err.Error()}
		}
		// The delivery endpoint takes no token (the notify service posts
		// to it without one); only /metrics asks for one, if any is given.
		tokens, err := tf.load(cmd.Context(), e.log, false)
		if err != nil {
			return err
		}
		// A memory limit, as every server has; its live heap is small.
		server.TuneGC(cmd.Context(), server.AllocFloor)
		return server.Run(cmd.Context(), server.Config{
			Name: "logbook notify sink", Addr: *addr, MaxConns: *maxConns, TLS: tlsCfg, DebugAddr: *debugAddr, Tokens: tokens, Metrics: metrics.NewRegistry(), Logger: e.log,
			LogAttrs: []any{"latency", *latency, "error_rate", *errorRate},
		}, s)
	}
	return cmd
}
