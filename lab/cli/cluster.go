package cli

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/internal/devca"
	"github.com/logbook/logbook/lab/cgroup"
	"github.com/logbook/logbook/lab/cluster"
)

// budgetFlags are the CPU quotas of a cluster's parts.
type budgetFlags struct {
	node, store, proxy, loadgen float64
	oversubscribe               bool
	runDir                      string
}

func (b *budgetFlags) register(cmd *cobra.Command, loadgenUse string) {
	fs := cmd.Flags()
	fs.Float64Var(&b.node, "node-cpus", 0, "CPU quota of each write node and replica, e.g. 0.15 (0: none); needs root and control groups")
	fs.Float64Var(&b.store, "store-cpus", 0, "CPU quota of PostgreSQL when this command starts it; with --store, what it is taken to have in the plan (not enforced)")
	fs.Float64Var(&b.proxy, "proxy-cpus", 0, "CPU quota of nginx")
	fs.Float64Var(&b.loadgen, "loadgen-cpus", 0, loadgenUse)
	fs.BoolVar(&b.oversubscribe, "oversubscribe", false, "run even when the quotas add up to more CPUs than the machine has")
	fs.StringVar(&b.runDir, "run-dir", "", "where each running cluster command records its processes and control groups, for clean-up after a SIGKILL (default "+cluster.DefaultRunDir+" as root, else under the temporary directory)")
}

func (b *budgetFlags) check() error {
	for _, x := range []struct {
		name string
		v    float64
	}{{"--node-cpus", b.node}, {"--store-cpus", b.store}, {"--proxy-cpus", b.proxy}, {"--loadgen-cpus", b.loadgen}} {
		if x.v < 0 {
			return cliutil.Usagef("%s must not be negative", x.name)
		}
	}
	return nil
}

// plan is the budget of writers + replicas nodes, the store (given: not
// started here), nginx and the load generator.
func (b *budgetFlags) plan(writers, replicas int, storeGiven bool) cgroup.Plan {
	p := cgroup.Plan{Machine: cgroup.MachineCPUs()}
	for i := range writers {
		p.Parts = append(p.Parts, cgroup.Part{Name: fmt.Sprintf("writer-%d", i+1), Kind: "node", CPUs: b.node})
	}
	for i := range replicas {
		p.Parts = append(p.Parts, cgroup.Part{Name: fmt.Sprintf("replica-%d", i+1), Kind: "replica", CPUs: b.node})
	}
	p.Parts = append(p.Parts,
		cgroup.Part{Name: "postgres", Kind: "store", CPUs: b.store, Given: storeGiven},
		cgroup.Part{Name: "nginx", Kind: "proxy", CPUs: b.proxy},
		cgroup.Part{Name: "loadgen", Kind: "loadgen", CPUs: b.loadgen})
	return p
}

// newClusterCmd starts write nodes, read replicas and nginx on this
// machine, on one shared PostgreSQL store, and keeps them until
// interrupted: the layout of docs/deployment.md on one machine, for
// trying it out and for the scaling benchmark.
func newClusterCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster [--store postgres://…]",
		Short: "Run write nodes, read replicas and nginx on one PostgreSQL store",
		Long: `Starts write nodes and read replicas of the flights service (logbook flights
serve) and nginx in front of them, all on this machine and one shared
PostgreSQL store, and keeps them until interrupted: the layout of
docs/deployment.md on one machine, for trying it out and for the scaling
benchmark (logbook bench scaling). Without --store it starts a PostgreSQL
of its own, in a fresh data directory under --dir, removed at the end.

With --node-cpus, --store-cpus, --proxy-cpus and --loadgen-cpus each process
runs in a control group of its own with that CPU quota, as if it had a
machine of that many cores (needs root). The quotas must add up to no more
than the machine's CPUs, unless --oversubscribe. On exit it prints each
process's CPU use. A run killed with SIGKILL leaves its processes and groups
behind; the next run, or logbook cluster clean, removes them.

With --tls every HTTP hop speaks TLS, with certificates of a throwaway CA
made in --dir/tls: clients speak HTTPS to nginx (trusting --dir/tls/ca.crt),
nginx speaks HTTPS to the nodes, verifying them with the CA and presenting
its own client certificate, which the nodes require (mutual TLS). The
PostgreSQL it starts (without --store) takes TLS only, with a certificate of
the same CA, and every node connects to it with sslmode=verify-full; a
--store or --bus URL is used as given (ask for TLS in it: sslmode=verify-full,
or ?tls=1&tls_ca=…; a warning on stderr says when one does not). With --tls
the cluster also runs its own identity provider, unless --jwt=false: a fresh
ES256 key whose key set it serves over HTTPS; every node verifies bearer JSON
Web Tokens against it (--jwks-url, trusting the CA for it with --jwks-ca,
--issuer, --audience), besides the --tokens file. It writes a planner's and a
viewer's token, valid 12 hours, to --dir/tls/planner.jwt and viewer.jwt, and
the signing key to --dir/tls/idp.key.`,
		Example: `  logbook cluster --writers 3 --replicas 2
  logbook cluster --writers 2 --replicas 0 --node-cpus 0.3 --store-cpus 0.5 --proxy-cpus 0.2 --loadgen-cpus 0.5
  logbook cluster --store postgres://localhost/logbook --bus kafka://127.0.0.1:9092/logbook
  logbook cluster --tls --dir ./data-cluster`,
		Args: cliutil.NoArgs,
	}
	fs := cmd.Flags()
	store := fs.String("store", "", "postgres:// URL of the shared store (default: start a PostgreSQL of its own)")
	cliutil.SecretFlag(fs, "store")
	bus := fs.String("bus", "", "kafka://host:port/topic: publish the log to Kafka, and feed the replicas from it")
	cliutil.SecretFlag(fs, "bus")
	writers := fs.Int("writers", 3, "write nodes")
	replicas := fs.Int("replicas", 2, "read replicas")
	addr := fs.String("addr", "127.0.0.1:8090", "where nginx listens")
	cliutil.FromEnv(fs, "addr")
	tokensFile := fs.String("tokens", "./dev-tokens", "bearer tokens, one \"token role\" per line, for every node")
	dir := fs.String("dir", "./data-cluster", "directory for the nodes' logs and nginx's files")
	useTLS := fs.Bool("tls", false, "TLS on every hop (client to nginx, nginx to the nodes, the nodes to the PostgreSQL it starts), with a throwaway CA made in --dir/tls")
	useJWT := fs.Bool("jwt", true, "with --tls: run an identity provider of its own and have the nodes take its JSON Web Tokens (--jwt=false: the --tokens file only)")
	var b budgetFlags
	b.register(cmd, "CPU quota of a group made for a load generator; the command prints how to run one in it")
	cmd.AddCommand(newClusterCleanCmd(e))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *store != "" && !cliutil.IsPostgresURL(*store) {
			return cliutil.Usage("--store must be a postgres:// URL: the nodes share it")
		}
		if *writers < 1 || *replicas < 0 {
			return cliutil.Usage("--writers must be at least 1 and --replicas not negative")
		}
		if err := b.check(); err != nil {
			return err
		}
		if cmd.Flags().Changed("jwt") && *useJWT && !*useTLS {
			return cliutil.Usage("--jwt needs --tls: the identity provider serves its keys over HTTPS")
		}
		if *useTLS {
			for _, w := range plaintextHops(*store, *bus, os.Getenv) {
				fmt.Fprintln(e.Stderr, "warning: --tls: "+w)
			}
		}
		plan := b.plan(*writers, *replicas, *store != "")
		if err := plan.Check(b.oversubscribe); err != nil {
			return cliutil.Usage(err.Error())
		}
		tokens, err := os.ReadFile(*tokensFile)
		if err != nil {
			return fmt.Errorf("tokens: %w", err)
		}
		self, err := os.Executable()
		if err != nil {
			return err
		}
		absDir, err := filepath.Abs(*dir)
		if err != nil {
			return err
		}
		run, cleaned, err := cluster.BeginRun(b.runDir)
		for _, c := range cleaned {
			fmt.Fprintf(e.Stderr, "cleaned up after a dead run: %s\n", c)
		}
		if err != nil {
			return err
		}
		defer func() {
			if err := run.End(); err != nil {
				fmt.Fprintf(e.Stderr, "clean-up: %v\n", err)
			}
		}()
		ctx := cmd.Context()
		if err := os.MkdirAll(absDir, 0o755); err != nil {
			return err
		}
		var ca *devca.CA
		if *useTLS {
			if ca, err = devca.New("logbook cluster CA"); err != nil {
				return err
			}
		}
		storeURL := *store
		if storeURL == "" {
			var s *cluster.Store
			if ca != nil {
				s, err = cluster.StartPostgresTLS(ctx, run, absDir, b.store, ca)
			} else {
				s, err = cluster.StartPostgres(ctx, run, absDir, b.store)
			}
			if err != nil {
				return err
			}
			defer s.Stop()
			storeURL = s.URL
		}
		var loadgen *cgroup.Group
		if b.loadgen > 0 {
			if loadgen, err = run.Group("loadgen", "loadgen", b.loadgen); err != nil {
				return err
			}
		}
		c, err := cluster.Start(ctx, cluster.Config{Binary: self, Store: storeURL, Bus: *bus, Writers: *writers, Replicas: *replicas,
			Dir: absDir, Addr: *addr, Tokens: string(tokens), Run: run, NodeCPUs: b.node, ProxyCPUs: b.proxy,
			TLS: *useTLS, Authority: ca, JWT: *useTLS && *useJWT})
		if err != nil {
			return err
		}
		defer c.Stop()
		var jwtFiles [][2]string
		if c.IdP != nil {
			for _, role := range []string{"planner", "viewer"} {
				tok, err := c.IdP.Mint(cluster.Claims{Subject: "cluster-" + role, Roles: []string{role}, Expiry: time.Now().Add(12 * time.Hour)})
				if err != nil {
					return err
				}
				f := filepath.Join(absDir, "tls", role+".jwt")
				if err := os.WriteFile(f, []byte(tok+"\n"), 0o600); err != nil {
					return err
				}
				jwtFiles = append(jwtFiles, [2]string{role, f})
			}
		}
		start := run.Usage()
		fmt.Fprintln(e.Stdout, "CPU plan:")
		for _, l := range plan.Lines() {
			fmt.Fprintln(e.Stdout, "  "+l)
		}
		fmt.Fprintf(e.Stdout, "nginx at %s\n", c.URL)
		if c.CAFile != "" {
			fmt.Fprintf(e.Stdout, "CA        %s  (logbook loadtest read --url %s --ca %s …)\n", c.CAFile, c.URL, c.CAFile)
		}
		if c.IdP != nil {
			fmt.Fprintf(e.Stdout, "issuer    %s  audience %s  keys %s  signing key %s\n", c.IdP.Issuer, c.IdP.Audience, c.IdP.URL, c.IdP.KeyFile)
			for _, f := range jwtFiles {
				fmt.Fprintf(e.Stdout, "%-9s JWT %s  (logbook loadtest … --token-file %s)\n", f[0], f[1], f[1])
			}
		}
		if *store == "" {
			fmt.Fprintf(e.Stdout, "postgres   %s\n", storeURL)
		}
		for _, n := range c.Nodes() {
			fmt.Fprintf(e.Stdout, "%-10s %s  log %s\n", n.Name, n.URL, filepath.Join(absDir, n.Name+".log"))
		}
		if loadgen != nil {
			target := c.URL
			if c.CAFile != "" {
				target += " --ca " + c.CAFile
			}
			for _, f := range jwtFiles {
				if f[0] == "viewer" {
					target += " --token-file " + f[1]
				}
			}
			fmt.Fprintf(e.Stdout, "load generator group %s: run one in it with\n  GOMAXPROCS=%d sh -c '%sexec \"$@\"' sh logbook loadtest read --url %s …\n",
				loadgen.Path, cgroup.GoProcs(b.loadgen), loadgen.JoinScript(), target)
		}
		<-ctx.Done()
		c.Stop()
		end := run.Usage()
		fmt.Fprintf(e.Stdout, "CPU use over %s:\n", end.At.Sub(start.At).Round(time.Second))
		for _, r := range run.ByProcess(start, end) {
			fmt.Fprintf(e.Stdout, "  %-12s %-8s %s  quota %s\n", r[0], r[1], r[2], r[3])
		}
		return nil
	}
	return cmd
}

func newClusterCleanCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove what killed cluster commands left: processes, control groups, data",
		Long: `Finds the cluster commands recorded in --run-dir whose process is gone (killed
with SIGKILL, say) and ends the processes they started, removes their control
groups and the data directories they made. Groups named logbook-cluster-PID
whose PID is gone are removed too. Every cluster command does this when it
starts.`,
		Example: `  logbook cluster clean
  logbook cluster clean --run-dir /tmp/logbook-runs`,
		Args: cliutil.NoArgs,
	}
	runDir := cmd.Flags().String("run-dir", "", "where cluster commands record their state (default "+cluster.DefaultRunDir+" as root, else under the temporary directory)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cleaned, err := cluster.Sweep(*runDir)
		for _, c := range cleaned {
			fmt.Fprintf(e.Stdout, "removed %s\n", c)
		}
		if len(cleaned) == 0 && err == nil {
			fmt.Fprintln(e.Stdout, "nothing to clean")
		}
		if err != nil {
			return fmt.Errorf("clean: %w", err)
		}
		return nil
	}
	return cmd
}

// plaintextHops says which of the --store and --bus URLs given to
// cluster --tls ask for no verified TLS: the nodes use them as given. A
// store URL without sslmode takes PGSSLMODE, else "prefer" (TLS if the
// server offers it, unverified, else plaintext). Neither URL is shown:
// it may carry a password.
func plaintextHops(store, bus string, getenv func(string) string) []string {
	var out []string
	if store != "" {
		mode := getenv("PGSSLMODE")
		if u, err := url.Parse(store); err == nil && u.Query().Has("sslmode") {
			mode = u.Query().Get("sslmode")
		}
		if mode == "" {
			mode = "prefer"
		}
		if mode != "verify-full" && mode != "verify-ca" {
			out = append(out, fmt.Sprintf("the --store URL asks for sslmode=%s, not verify-full: the nodes' hop to the store may be plaintext or unverified", mode))
		}
	}
	if bus != "" {
		if cfg, _, err := kafkabus.ParseURL(bus); err == nil && !cfg.Security.TLS {
			out = append(out, "the --bus URL asks for no TLS (add tls=true or tls_ca=FILE): the publisher and the replicas reach Kafka in plaintext")
		}
	}
	return out
}
