package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/metrics"
	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/internal/webui"
	"github.com/logbook/logbook/lab/loadtest"
	"github.com/logbook/logbook/lab/plot"
	"github.com/logbook/logbook/services/tickets"
	"github.com/logbook/logbook/services/tickets/httpapi"
)

func newTicketsCmd(e *env) *cobra.Command {
	return group("tickets", "the ticketing service under skewed demand: serve, check",
		newTicketsServeCmd(e),
		newTicketsCheckCmd(e),
	)
}

// catalogueFlags are the flags that say which tickets exist.
type catalogueFlags struct {
	sports, perSport, days int
}

func (c *catalogueFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&c.sports, "sports", 3, "how many sports: athletics, cycling, diving, then sport-0003, …")
	fs.IntVar(&c.perSport, "tickets-per-sport", 500, "tickets of each sport")
	fs.IntVar(&c.days, "days", 10, "days of the event the tickets are spread over")
}

func (c *catalogueFlags) catalogue() (tickets.Catalogue, error) {
	if c.sports < 1 || c.sports > 10_000 {
		return tickets.Catalogue{}, usageError{fmt.Sprintf("--sports %d: want 1–10000", c.sports)}
	}
	cat := tickets.Catalogue{Sports: tickets.Sports(c.sports), PerSport: c.perSport, Days: c.days}
	if err := cat.Validate(); err != nil {
		return cat, usageError{err.Error()}
	}
	return cat, nil
}

func newTicketsServeCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "serve [--arch micro|queue|queue-rep|fair] [--node-rate R]", Short: "serve the tickets API (search, book, return, control, live throughput) and its web page, with emulated store nodes behind a scheduler", Args: noArgs}
	fs := cmd.Flags()
	var sf storeFlags
	sf.register(fs, "./data-tickets")
	var cf catalogueFlags
	cf.register(fs)
	addr := fs.String("addr", "127.0.0.1:8081", "address to listen on")
	fromEnv(fs, "addr")
	debugAddr := fs.String("debug-addr", "", "serve Go's pprof profiles on this address, to any token (off by default; keep it on loopback)")
	fromEnv(fs, "debug-addr")
	tokensFile := fs.String("tokens", "", "bearer tokens, one \"token role\" per line, roles viewer and booker (default: LOGBOOK_TOKENS, token:role,…)")
	var sc tickets.SchedConfig
	arch := fs.String("arch", "fair", "how requests reach the store nodes: micro, queue, queue-rep or fair")
	fs.Float64Var(&sc.NodeRate, "node-rate", 100, "each emulated store node's capacity in requests/s (exponential service times); 0: unlimited, the real store only")
	fs.IntVar(&sc.Workers, "workers", 16, "workers of the queue architectures")
	fs.IntVar(&sc.Replicas, "replicas", 0, "nodes holding each sport, 1 or 2 (default: 2 for queue-rep and fair, else 1)")
	fs.IntVar(&sc.QueueLimit, "queue-limit", 4096, "requests waiting at most (then 503)")
	fs.IntVar(&sc.KeyLimit, "key-limit", 1024, "requests of one sport waiting at most under fair (then 429)")
	fs.IntVar(&sc.NodeInFlight, "node-inflight", 0, "requests fair lets into one node at once (default 1, or 64 with --node-rate 0)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		sc.Arch = tickets.Arch(*arch)
		if !slices.Contains(tickets.Archs, sc.Arch) {
			return usagef("--arch %q: want micro, queue, queue-rep or fair", *arch)
		}
		if sc.NodeRate < 0 || sc.Workers < 1 || sc.QueueLimit < 1 || sc.KeyLimit < 1 || sc.NodeInFlight < 0 || sc.Replicas < 0 || sc.Replicas > 2 {
			return usageError{"--node-rate, --node-inflight must not be negative; --workers, --queue-limit, --key-limit positive; --replicas 1 or 2"}
		}
		cat, err := cf.catalogue()
		if err != nil {
			return err
		}
		tokens, err := loadTokens(*tokensFile, auth.Viewer, auth.Booker)
		if err != nil {
			return err
		}
		return serveTickets(cmd.Context(), e, &sf, cat, sc, server.Config{Addr: *addr, Tokens: tokens, DebugAddr: *debugAddr})
	}
	return cmd
}

// serveTickets serves the tickets service on its store; srv gives the
// address, tokens and debug address.
func serveTickets(ctx context.Context, e *env, sf *storeFlags, cat tickets.Catalogue, sc tickets.SchedConfig, srv server.Config) error {
	// As serve's: requests allocate briefly and the live heap is small,
	// so the default collector ran dozens of times a second under load.
	server.TuneGC(ctx)
	reg := metrics.NewRegistry()
	s, err := sf.open(e.log)
	if err != nil {
		return err
	}
	defer s.Close()
	store, err := metrics.InstrumentStore(s, reg)
	if err != nil {
		return err
	}
	svc, err := tickets.New(ctx, store, tickets.Config{Catalogue: cat, Sched: sc, Registerer: reg})
	if err != nil {
		return err
	}
	defer svc.Close()
	mux := http.NewServeMux()
	mux.Handle("/api/tickets/", httpapi.New(ctx, svc, srv.Tokens))
	mux.Handle("/", webui.TicketsHandler()) // the tickets page: search, book, live throughput
	srv.Name, srv.Logger, srv.Metrics, srv.Check = "logbook tickets", e.log, reg, server.StoreCheck(store)
	srv.LogAttrs = []any{"store", sf.describe(), "arch", sc.Arch, "node_rate", sc.NodeRate, "sports", len(cat.Sports)}
	// Answers to pipelined requests leave together. The one streaming
	// route, /api/tickets/live, sends a sample a second: waiting up to a
	// millisecond to leave costs it nothing.
	srv.Coalesce = true
	// Queued requests end at shutdown, so that Shutdown need not wait
	// for them.
	srv.OnShutdown = []func(){svc.Sched.Close}
	return server.Run(ctx, srv, mux)
}

func newTicketsCheckCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "check", Short: "read every ticket's history and report any seat sold twice (run it on a stopped server's store)", Args: noArgs}
	fs := cmd.Flags()
	var sf storeFlags
	sf.register(fs, "./data-tickets")
	asJSON := jsonFlag(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		sf.readOnly = true
		s, err := sf.open(e.log)
		if err != nil {
			return err
		}
		defer s.Close()
		a, err := tickets.AuditLog(cmd.Context(), s)
		if err != nil {
			return err
		}
		if err := report(e.stdout, *asJSON, a, [][2]string{
			{"ticket events", strconv.Itoa(a.Events)},
			{"tickets with a history", strconv.Itoa(a.Tickets)},
			{"tickets held now", strconv.Itoa(a.Booked)},
			{"seats sold twice", strconv.Itoa(len(a.Violations))},
		}); err != nil {
			return err
		}
		if len(a.Violations) > 0 {
			return fmt.Errorf("%d violations, the first: %s", len(a.Violations), a.Violations[0])
		}
		return nil
	}
	return cmd
}

func newLoadtestTicketsCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "tickets --url URL --token TOKEN", Short: "the skewed-demand experiment on the tickets service: cold sports at a constant rate, the hot one at multiples of it (an open model)", Args: noArgs}
	fs := cmd.Flags()
	u := fs.String("url", "", "tickets server, e.g. http://127.0.0.1:8081 (required)")
	fromEnv(fs, "url")
	token := fs.String("token", "", "bearer token: a viewer's for search, a booker's for book and mixed (required)")
	fromEnv(fs, "token")
	var cfg loadtest.TicketsConfig
	fs.StringVar(&cfg.Pipeline, "pipeline", "auto", "pipeline requests over a few connections: on, off (one request per connection at a time), or auto (on when the server's nodes are unlimited, --node-rate 0)")
	fs.IntVar(&cfg.PipeConns, "conns", 4, "connections requests are pipelined over (unpipelined: one connection per request in flight, up to --max-inflight)")
	fs.DurationVar(&cfg.BatchDelay, "batch-delay", time.Millisecond, "pipelined: how long a request may wait to share a write with others (counted in its latency)")
	fs.IntVar(&cfg.MaxInFlight, "max-inflight", 8192, "requests outstanding at most; beyond, arrivals are dropped and counted")
	fs.Float64Var(&cfg.ColdRate, "cold-rate", 20, "requests/s of each cold sport")
	mults := fs.String("hot-multipliers", "1,2,3,4,5,6,7,8,9,10", "the hot sport's rate in multiples of --cold-rate, one step each")
	fs.DurationVar(&cfg.Step, "step", 30*time.Second, "how long each step lasts")
	fs.DurationVar(&cfg.Warmup, "warmup", 0, "the unmeasured start of each step (default a fifth of --step)")
	fs.StringVar(&cfg.Ops, "ops", "search", "search, book or mixed (half search, a quarter each book and return)")
	fs.Float64Var(&cfg.ControlRate, "control-rate", 20, "control requests/s, sent alongside (negative: the step's total offered rate, which the paper measured in a separate run)")
	fs.StringVar(&cfg.Hot, "hot", "athletics", "the sport in hot demand")
	fs.IntVar(&cfg.SearchLimit, "search-limit", 10, "tickets per search answer")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed of the arrival process (0: random)")
	plotFile := fs.String("plot", "", "also draw throughput per sport and per node, and p99 per sport, against the multiplier into this .svg or .png file")
	asJSON := jsonFlag(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *u == "" || *token == "" {
			return usageError{"--url and --token are required"}
		}
		if *plotFile != "" {
			if err := plot.CheckFile(*plotFile); err != nil {
				return usagef("--plot %v", err)
			}
		}
		cfg.Multipliers = nil
		for _, f := range strings.Split(*mults, ",") {
			m, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || m <= 0 {
				return usagef("--hot-multipliers: %q is not a positive number", f)
			}
			cfg.Multipliers = append(cfg.Multipliers, m)
		}
		if cfg.Warmup == 0 {
			cfg.Warmup = cfg.Step / 5
		}
		if cfg.ColdRate <= 0 || cfg.Step <= 0 || cfg.Warmup < 0 || cfg.Warmup >= cfg.Step || cfg.PipeConns < 1 || cfg.MaxInFlight < 1 || cfg.BatchDelay < 0 {
			return usageError{"--cold-rate and --step must be positive, --warmup shorter than --step, --conns and --max-inflight positive, --batch-delay not negative"}
		}
		switch cfg.Pipeline {
		case "auto", "on", "off":
		default:
			return usagef("--pipeline %q: want auto, on or off", cfg.Pipeline)
		}
		switch cfg.Ops {
		case "search", "book", "mixed":
		default:
			return usagef("--ops %q: want search, book or mixed", cfg.Ops)
		}
		c, err := loadtest.NewTicketsClient(*u, *token, cfg.MaxInFlight)
		if err != nil {
			return usageError{err.Error()}
		}
		if err := loadtest.Reachable(cmd.Context(), *u); err != nil {
			return err
		}
		res, err := loadtest.RunTickets(cmd.Context(), c, cfg)
		if err != nil {
			return err
		}
		if *plotFile != "" {
			if err := plot.Save(*plotFile, res.Figure()); err != nil {
				return fmt.Errorf("--plot: %w", err)
			}
		}
		if *asJSON {
			return report(e.stdout, true, res, nil)
		}
		_, err = fmt.Fprint(e.stdout, res.Table())
		return err
	}
	return cmd
}
