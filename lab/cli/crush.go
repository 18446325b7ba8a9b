package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/internal/progress"
	"github.com/logbook/logbook/lab/bench"
)

func newBenchCrushCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "crush",
		Short: "Run many live stream queries at once under a limit",
		Long: `The crush test of Aaron Stannard's "Scaling Akka.Persistence.Query to
100k+ Concurrent Queries for Large-Scale CQRS" (2023): writes --ids streams
of --events-per-id events, then runs a live query per stream (or one query
over all events, --mode all-events) with at most --max-concurrent-queries
backend queries at once, and checks every query received its stream whole
and in order.

--max-concurrent-queries 0 runs the post's control experiment, without
the throttle: every query may read at once, and only the database
connection pool (--pool-conns, on PostgreSQL) stands between them and
the database. Each read then has a client's command timeout
(--read-timeout) and the run a hard bound (--deadline): it ends cleanly
and reports the streams not delivered whole and the failed reads by
kind (timeout, too_many_connections, connection, other).`,
		Example: `  logbook bench crush --ids 100000 --events-per-id 100
  logbook bench crush --mode all-events --store postgres://localhost/logbook
  # the control run: unthrottled live queries polling every second
  logbook bench crush --store postgres://localhost/logbook --ids 10000 --events-per-id 1 \
    --max-concurrent-queries 0 --poll --refresh-interval 1s --read-timeout 30s --deadline 5m`,
		Args: cliutil.NoArgs,
	}
	fs := cmd.Flags()
	var bf benchFlags
	bf.register(cmd)
	var cfg bench.CrushConfig
	fs.IntVar(&cfg.IDs, "ids", 100_000, "streams to write, and live queries to run in by-id mode")
	fs.IntVar(&cfg.EventsPerID, "events-per-id", 100, "events per stream")
	fs.IntVar(&cfg.Buffer, "buffer", 100, "the queries' max-buffer-size: events per backend query")
	fs.IntVar(&cfg.MaxConcurrentQueries, "max-concurrent-queries", 100, "backend queries allowed to run at once; 0: no limit (the control run)")
	poolConns := fs.Int("pool-conns", 0, "PostgreSQL connections in the pool (default: room for every permitted query and the writers; with --max-concurrent-queries 0, 100, the default of common database drivers' pools)")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", 0, "bound on each backend read, as a database client's command timeout (0: none)")
	processes := fs.Int("processes", 1, "run the test in this many processes at once against one PostgreSQL database, each with its own streams, queries and throttle, as several nodes of one service (PostgreSQL only)")
	fs.DurationVar(&cfg.Deadline, "deadline", 10*time.Minute, "bound on the query phase: the run then ends and reports the streams not delivered whole")
	fs.StringVar(&cfg.Mode, "mode", bench.CrushByID, "by-id: one EventsByStream query per stream; all-events: one AllEvents query fanned out to a projection per stream")
	_ = cmd.RegisterFlagCompletionFunc("mode", cobra.FixedCompletions([]string{bench.CrushByID, bench.CrushAllEvents}, cobra.ShellCompDirectiveNoFileComp))
	fs.IntVar(&cfg.Writers, "writers", 8, "concurrent writers in the write phase")
	fs.IntVar(&cfg.Batch, "batch", 0, "events per append in the write phase (default: events-per-id, at most 1000)")
	fs.IntVar(&cfg.Payload, "payload", 32, "bytes of data per event")
	fs.BoolVar(&cfg.Poll, "poll", false, "hide the store's commit signal: live queries poll every --refresh-interval, as on a SQL backend")
	fs.DurationVar(&cfg.RefreshInterval, "refresh-interval", time.Second, "how often polling queries ask again (with --poll)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if cfg.IDs <= 0 || cfg.EventsPerID <= 0 || cfg.Buffer <= 0 || cfg.MaxConcurrentQueries < 0 || cfg.Writers <= 0 || cfg.Batch < 0 || cfg.Payload < 0 || cfg.RefreshInterval <= 0 || *poolConns < 0 || cfg.ReadTimeout < 0 || cfg.Deadline < 0 {
			return cliutil.Usage("--ids, --events-per-id, --buffer, --writers and --refresh-interval must be positive; --max-concurrent-queries, --pool-conns, --read-timeout, --deadline, --batch and --payload not negative")
		}
		cfg.Unthrottled = cfg.MaxConcurrentQueries == 0
		if *processes < 1 {
			return cliutil.Usage("--processes must be positive")
		}
		if *processes > 1 {
			if bf.store.URL == "" {
				return cliutil.Usage("--processes needs --store postgres://…: processes cannot share the embedded store's directory")
			}
			return runCrushProcesses(cmd, e, &bf, *processes)
		}
		if cfg.Mode != bench.CrushByID && cfg.Mode != bench.CrushAllEvents {
			return cliutil.Usage("--mode must be by-id or all-events")
		}
		// Room for every permitted query plus the writers of the write
		// phase: the permitter, not the pool, must be what bounds the
		// queries.
		bf.store.PGConns = int32(cfg.MaxConcurrentQueries + cfg.Writers + 4)
		if cfg.Unthrottled {
			bf.store.PGConns = 100
		}
		if *poolConns > 0 {
			bf.store.PGConns = int32(*poolConns)
		}
		return benchOn(cmd, e, &bf, func(s *cliutil.OpenedStore, p *progress.Counter) (table, error) {
			if s.PG != nil {
				cfg.DatabaseCPU = true
				pool := s.PG.Pool()
				// The server's own CPU, not every PostgreSQL's on the
				// machine: found from one of its backends.
				if err := pool.QueryRow(cmd.Context(), "SELECT pg_backend_pid()").Scan(&cfg.DatabaseBackendPID); err != nil {
					return nil, fmt.Errorf("bench crush: %w", err)
				}
				cfg.BusyConns = func() int { return int(pool.Stat().AcquiredConns()) }
			}
			cfg.Progress = p
			return bench.RunCrush(cmd.Context(), s, cfg)
		})
	}
	return cmd
}

// runCrushProcesses runs the crush test in n child processes of this
// binary at once, each with the flags this one was given, and reports
// each process's result and their sum.
func runCrushProcesses(cmd *cobra.Command, e *env, bf *benchFlags, n int) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	args := crushChildArgs(cmd)
	res := bench.CrushProcessesResult{Processes: n, PerProcess: make([]bench.CrushResult, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c := exec.CommandContext(cmd.Context(), exe, args...)
			var stderr bytes.Buffer
			c.Stderr = &stderr
			out, err := c.Output()
			if err != nil {
				errs[i] = fmt.Errorf("process %d: %w: %s", i+1, err, strings.TrimSpace(stderr.String()))
				return
			}
			if err := json.Unmarshal(out, &res.PerProcess[i]); err != nil {
				errs[i] = fmt.Errorf("process %d printed %q: %w", i+1, out, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench crush: %w", err)
	}
	res.Sum()
	return bf.out.Print(e.Stdout, res, cliutil.Pairs(res.Rows()))
}

// crushChildArgs are a child process's arguments: the command's own path
// after the binary's name, every flag given except --processes and the
// output format, then JSON out.
func crushChildArgs(cmd *cobra.Command) []string {
	args := strings.Fields(cmd.CommandPath())[1:]
	cmd.Flags().Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "processes", "output", "json":
			return
		}
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	return append(args, "-o", "json")
}
