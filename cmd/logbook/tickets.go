package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/logbook/logbook/engine/admin"
	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/metrics"
	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/internal/webui"
	labcli "github.com/logbook/logbook/lab/cli"
	"github.com/logbook/logbook/services/tickets"
	"github.com/logbook/logbook/services/tickets/httpapi"
)

func newTicketsCmd(e *env) *cobra.Command {
	g := group("tickets", "Serve the ticketing service and check its store",
		newTicketsServeCmd(e),
		newTicketsCheckCmd(e),
	)
	g.Long = `The tickets service sells seats of an event's sports (search, book, return)
under skewed demand: one sport in hot demand, the others cold, with the
store's nodes emulated at a fixed service rate behind a scheduler.`
	return g
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
		return tickets.Catalogue{}, usageError{Msg: fmt.Sprintf("--sports %d: want 1–10000", c.sports)}
	}
	cat := tickets.Catalogue{Sports: tickets.Sports(c.sports), PerSport: c.perSport, Days: c.days}
	if err := cat.Validate(); err != nil {
		return cat, usageError{Msg: err.Error()}
	}
	return cat, nil
}

func newTicketsServeCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve [--arch micro|queue|queue-rep|fair] [--node-rate R]",
		Short: "Serve the tickets API and its web page",
		Long: `Serves the tickets API (search, book, return, control, live throughput)
and its web page. Requests go straight to the store unless --arch puts the
lab's experiment rig in front of it: emulated store nodes, each serving at
most --node-rate requests per second, behind one of four schedulers: micro
(one worker and one node per sport), queue (one shared queue, a pool of
workers), queue-rep (the queue, every sport on two nodes) or fair (fair
queuing per sport in front of queue-rep's nodes).`,
		Example: `  LOGBOOK_TOKENS=viewer-tok:viewer,booker-tok:booker logbook tickets serve
  logbook tickets serve --arch fair --node-rate 100 --tokens ./dev-tokens`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	var sf storeFlags
	sf.register(fs, "./data-tickets")
	var cf catalogueFlags
	cf.register(fs)
	addr := fs.String("addr", "127.0.0.1:8081", "address to listen on")
	fromEnv(fs, "addr")
	debugAddr := fs.String("debug-addr", "", "serve Go's pprof profiles on this address, to any token (off by default; keep it on loopback)")
	fromEnv(fs, "debug-addr")
	maxConns := fs.Int("max-conns", server.DefaultMaxConns, "connections held at once; beyond, a new one is answered 503 and closed")
	var tf tokenFlags
	tf.register(fs, ", roles viewer and booker")
	fs.StringVar(&sf.backupDir, "backup-dir", "", "directory under which POST /admin/backup (a token of role admin) writes backups of the embedded store, each in a new directory (off by default)")
	fromEnv(fs, "backup-dir")
	var tlsf cliutil.TLSFlags
	tlsf.Register(fs)
	rig := labcli.TicketsRigFlags(fs) // the lab's emulated store nodes, on --arch
	_ = cmd.RegisterFlagCompletionFunc("arch", cobra.FixedCompletions([]string{"micro", "queue", "queue-rep", "fair"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *maxConns <= 0 {
			return usageError{Msg: "--max-conns must be positive"}
		}
		if sf.backupDir != "" && sf.store != "" {
			return usageError{Msg: "--backup-dir backs up the embedded store (--data); back up a PostgreSQL store with pg_dump or pg_basebackup (docs/operations.md)"}
		}
		cat, err := cf.catalogue()
		if err != nil {
			return err
		}
		tlsCfg, err := tlsf.Config()
		if err != nil {
			return err
		}
		gate, err := rig.Gate(cat.Sports)
		if err != nil {
			return usageError{Msg: err.Error()}
		}
		defer gate.Close() // the service closes it too; closing twice is harmless
		tokens, err := tf.load(cmd.Context(), e.log, true, auth.Viewer, httpapi.Booker)
		if err != nil {
			return err
		}
		return serveTickets(cmd.Context(), e, &sf, cat, gate, server.Config{Addr: *addr, MaxConns: *maxConns, Tokens: tokens, DebugAddr: *debugAddr, TLS: tlsCfg})
	}
	return cmd
}

// serveTickets serves the tickets service on its store behind gate; srv
// gives the address, tokens and debug address.
func serveTickets(ctx context.Context, e *env, sf *storeFlags, cat tickets.Catalogue, gate tickets.Gate, srv server.Config) error {
	// Requests allocate briefly and the live heap is small, so the
	// default collector ran dozens of times a second under load. Not
	// measured at flights serve's lean floor: the floor every server had.
	server.TuneGC(ctx, server.AllocFloor)
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
	svc, err := tickets.New(ctx, store, tickets.Config{Catalogue: cat, Gate: gate, Registerer: reg})
	if err != nil {
		return err
	}
	defer svc.Close()
	mux := http.NewServeMux()
	mux.Handle("/api/tickets/", httpapi.New(ctx, svc, srv.Tokens))
	mountAdmin(mux, store, srv.Tokens, reg, admin.Options{})
	mux.Handle("/", webui.TicketsHandler()) // the tickets page: search, book, live throughput
	serveBackupOn(mux, srv.Tokens, s, sf.backupDir, nil)
	srv.Name, srv.Logger, srv.Metrics, srv.Check = "logbook tickets", e.log, reg, server.StoreCheck(store)
	st := svc.Stats()
	srv.LogAttrs = []any{"store", sf.describe(), "arch", st.Arch, "node_rate", st.NodeRate, "sports", len(cat.Sports)}
	// Answers to pipelined requests leave together. The one streaming
	// route, /api/tickets/live, sends a sample a second: waiting up to a
	// millisecond to leave costs it nothing.
	srv.Coalesce = true
	// Queued requests end at shutdown, so that Shutdown need not wait
	// for them.
	srv.OnShutdown = []func(){svc.Gate.Close}
	return server.Run(ctx, srv, mux)
}

func newTicketsCheckCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Report any seat sold twice in a stopped server's store",
		Long: `Reads every ticket's history from the tickets service's store and reports
any seat sold twice. Run it on a stopped server's store; it exits 1 if a
seat was sold twice.`,
		Example: `  logbook tickets check --data ./data-tickets`,
		Args:    noArgs,
	}
	fs := cmd.Flags()
	var sf storeFlags
	sf.register(fs, "./data-tickets")
	o := cliutil.OutputFlag(cmd)
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
		if err := o.Print(e.stdout, a, cliutil.Pairs([][2]string{
			{"ticket events", strconv.Itoa(a.Events)},
			{"tickets with a history", strconv.Itoa(a.Tickets)},
			{"tickets held now", strconv.Itoa(a.Booked)},
			{"seats sold twice", strconv.Itoa(len(a.Violations))},
		})); err != nil {
			return err
		}
		if len(a.Violations) > 0 {
			return fmt.Errorf("%d violations, the first: %s", len(a.Violations), a.Violations[0])
		}
		return nil
	}
	return cmd
}
