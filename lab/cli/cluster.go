package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/lab/cluster"
)

// newClusterCmd starts write nodes, read replicas and nginx on this
// machine, on one shared PostgreSQL store, and keeps them until
// interrupted: the layout of docs/deployment.md on one machine, for
// trying it out and for the scaling benchmark.
func newClusterCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster --store postgres://…",
		Short: "Run write nodes, read replicas and nginx on one PostgreSQL store",
		Long: `Starts write nodes and read replicas of the flights service (logbook flights
serve) and nginx in front of them, all on this machine and one shared
PostgreSQL store, and keeps them until interrupted: the layout of
docs/deployment.md on one machine, for trying it out and for the scaling
benchmark (scripts/scaling.sh).

With --tls every HTTP hop speaks TLS, with certificates of a throwaway CA
made in --dir/tls: clients speak HTTPS to nginx (trusting --dir/tls/ca.crt),
nginx speaks HTTPS to the nodes, verifying them with the CA and presenting
its own client certificate, which the nodes require (mutual TLS).`,
		Example: `  logbook cluster --store postgres://localhost/logbook --writers 3 --replicas 2
  logbook cluster --store postgres://localhost/logbook --bus kafka://127.0.0.1:9092/logbook
  logbook cluster --store postgres://localhost/logbook --tls --dir ./data-cluster`,
		Args: cliutil.NoArgs,
	}
	fs := cmd.Flags()
	store := fs.String("store", "", "postgres:// URL of the shared store (required)")
	cliutil.SecretFlag(fs, "store")
	_ = cmd.MarkFlagRequired("store")
	bus := fs.String("bus", "", "kafka://host:port/topic: publish the log to Kafka, and feed the replicas from it")
	cliutil.SecretFlag(fs, "bus")
	writers := fs.Int("writers", 3, "write nodes")
	replicas := fs.Int("replicas", 2, "read replicas")
	addr := fs.String("addr", "127.0.0.1:8090", "where nginx listens")
	cliutil.FromEnv(fs, "addr")
	tokensFile := fs.String("tokens", "./dev-tokens", "bearer tokens, one \"token role\" per line, for every node")
	dir := fs.String("dir", "./data-cluster", "directory for the nodes' logs and nginx's files")
	useTLS := fs.Bool("tls", false, "TLS on every HTTP hop (client to nginx, nginx to the nodes), with a throwaway CA made in --dir/tls")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if !cliutil.IsPostgresURL(*store) {
			return cliutil.Usage("--store must be a postgres:// URL: the nodes share it")
		}
		if *writers < 1 || *replicas < 0 {
			return cliutil.Usage("--writers must be at least 1 and --replicas not negative")
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
		ctx := cmd.Context()
		c, err := cluster.Start(ctx, cluster.Config{Binary: self, Store: *store, Bus: *bus, Writers: *writers, Replicas: *replicas,
			Dir: absDir, Addr: *addr, Tokens: string(tokens), TLS: *useTLS})
		if err != nil {
			return err
		}
		defer c.Stop()
		fmt.Fprintf(e.Stdout, "nginx at %s\n", c.URL)
		if c.CAFile != "" {
			fmt.Fprintf(e.Stdout, "CA        %s  (logbook loadtest read --url %s --ca %s …)\n", c.CAFile, c.URL, c.CAFile)
		}
		for _, n := range c.Nodes() {
			fmt.Fprintf(e.Stdout, "%-10s %s  log %s\n", n.Name, n.URL, filepath.Join(absDir, n.Name+".log"))
		}
		<-ctx.Done()
		return nil
	}
	return cmd
}
