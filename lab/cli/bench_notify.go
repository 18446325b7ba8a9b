package cli

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/lab/bench"
	"github.com/logbook/logbook/services/notify/stages"
)

func newBenchNotifyCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "notify",
		Short: "Time one notify request to 1 … 1,000,000 users, pipeline or monolith",
		Long: `Reruns the published latency and scalability tests of a mass-notification
service (a serverless pipeline against a monolith, vg-monolith): one send
request to users 1 … n for each --sizes, timed until the loopback sink
acknowledges the last delivery. --mode pipeline runs logbook notify serve as
a child process; --mode monolith the baseline in this process, one
synchronous request resolving every recipient with one IN query; --mode
stages the published system's own shape: --stage-procs processes of each of
logbook notify stage preference, build and deliver, connected by Kafka
topics on --bus (fresh ones per run) with exactly-once transactions, the
stage events' Avro schemas in a logbook registry served from this process,
and the topics audited at the end (every chunk and batch once). With
--kill-stage, the first process of that stage is SIGKILLed --kill-after
each request of at least --kill-min recipients is sent, and restarted. The
column is the published figure for that size. It exits 1 unless every
delivery arrived exactly once.`,
		Example: `  logbook bench notify --users-db postgres://localhost/users --sizes 1,100,10000
  logbook bench notify --users-db postgres://localhost/users --mode monolith -o json
  logbook bench notify --users-db postgres://localhost/users --mode stages --bus kafka://127.0.0.1:9092/bench --kill-stage build`,
		Args: cliutil.NoArgs,
	}
	fs := cmd.Flags()
	var cfg bench.NotifyConfig
	fs.StringVar(&cfg.UsersDB, "users-db", "", "the users' database, postgres://… (scripts/postgres.sh start prints one; wal_level=logical for the pipeline's CDC)")
	cliutil.SecretFlag(fs, "users-db")
	fs.StringVar(&cfg.Schema, "schema", "logbook_notify_bench", "schema made for the users' tables (dropped first if it is there)")
	fs.IntSliceVar(&cfg.Sizes, "sizes", []int{1, 100, 1000, 10_000, 100_000, 1_000_000}, "recipients per request; as many users are generated as the largest")
	fs.IntVar(&cfg.Runs, "runs", 3, "requests per size")
	fs.IntVar(&cfg.LatencyRuns, "latency-runs", 20, "warm requests of size 1, after the cold one (the published latency test ran 20); 0: --runs")
	fs.StringVar(&cfg.Mode, "mode", bench.ModePipeline, "pipeline (logbook notify serve, a child process), monolith (one synchronous request, one IN query) or stages (logbook notify stage processes on Kafka; needs --bus)")
	_ = cmd.RegisterFlagCompletionFunc("mode", cobra.FixedCompletions(bench.Modes, cobra.ShellCompDirectiveNoFileComp))
	fs.IntVar(&cfg.StageProcs, "stage-procs", 2, "stages: processes per stage")
	fs.StringVar(&cfg.KillStage, "kill-stage", "", "stages: SIGKILL (and restart) a process of this stage, preference, build or deliver, during each large request")
	fs.DurationVar(&cfg.KillAfter, "kill-after", 500*time.Millisecond, "stages: how long after a request is sent its kill comes")
	fs.IntVar(&cfg.KillMin, "kill-min", 10_000, "stages: the smallest request that gets a kill")
	fs.BoolVar(&cfg.AtLeastOnce, "unsafe-at-least-once", false, "stages: no transactions (offsets committed after the output, outside one): what exactly-once costs, and the audit catching the duplicates a kill then makes")
	fs.Float64Var(&cfg.SinkErrorRate, "sink-error-rate", 0, "share of delivery calls (0…1) the sink answers 503")
	fs.DurationVar(&cfg.Timeout, "timeout", 0, "the longest one request may take to be delivered (default 5m)")
	fs.StringVar(&cfg.Data, "data", "", "pipeline: the service's data directory, empty or absent (default: a fresh temporary one)")
	fs.StringVar(&cfg.Store, "store", "", "pipeline: the service's PostgreSQL store, postgres://…?search_path=SCHEMA, a schema not used before (the cold start needs an empty store)")
	fs.StringVar(&cfg.Bus, "bus", "", "pipeline: the service's Kafka bus, kafka://…")
	exe := fs.String("exe", "", "pipeline: the logbook binary the service runs from (default: this one)")
	fs.StringVar(&cfg.DebugAddr, "debug-addr", "", "pipeline: the service serves Go's pprof profiles here (keep it on loopback)")
	cliutil.SecretFlag(fs, "store")
	cliutil.SecretFlag(fs, "bus")
	out := cliutil.OutputFlag(cmd, cliutil.Table, cliutil.JSON)
	cmd.MarkFlagsMutuallyExclusive("data", "store")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if cfg.UsersDB == "" {
			return cliutil.Usage("--users-db is needed (or LOGBOOK_USERS_DB)")
		}
		if !slices.Contains(bench.Modes, cfg.Mode) {
			return cliutil.Usagef("--mode %q: want pipeline, monolith or stages", cfg.Mode)
		}
		if cfg.Mode == bench.ModeStages {
			switch {
			case cfg.Bus == "":
				return cliutil.Usage("--mode stages needs --bus kafka://host:port/PREFIX")
			case cfg.Data != "" || cfg.Store != "" || cfg.DebugAddr != "":
				return cliutil.Usage("--data, --store and --debug-addr are the pipeline's: the stages keep no log")
			case cfg.StageProcs < 1 || cfg.KillAfter <= 0 || cfg.KillMin < 1:
				return cliutil.Usage("--stage-procs, --kill-after and --kill-min must be positive")
			case cfg.KillStage != "" && !slices.Contains(stages.Names, cfg.KillStage):
				return cliutil.Usagef("--kill-stage %q: want preference, build or deliver", cfg.KillStage)
			}
		} else if cfg.KillStage != "" || cfg.AtLeastOnce {
			return cliutil.Usage("--kill-stage and --unsafe-at-least-once are the stages mode's")
		}
		if len(cfg.Sizes) == 0 || cfg.Runs <= 0 || cfg.LatencyRuns < 0 || cfg.Timeout < 0 {
			return cliutil.Usage("--sizes and --runs must be given and positive, --latency-runs and --timeout not negative")
		}
		for _, n := range cfg.Sizes {
			if n <= 0 {
				return cliutil.Usagef("--sizes: %d recipients: want a positive number", n)
			}
		}
		if cfg.SinkErrorRate < 0 || cfg.SinkErrorRate >= 1 {
			return cliutil.Usagef("--sink-error-rate %g: want a share from 0 up to (not including) 1", cfg.SinkErrorRate)
		}
		if cfg.Mode == bench.ModeMonolith && (cfg.Data != "" || cfg.Store != "" || cfg.Bus != "" || cfg.DebugAddr != "") {
			return cliutil.Usage("--data, --store, --bus and --debug-addr are the pipeline's: the monolith runs in this process and keeps no log")
		}
		if cfg.Data != "" && cfg.Store != "" {
			return cliutil.Usage("--data and --store: give one")
		}
		if cfg.Mode != bench.ModeMonolith {
			cfg.Exe = *exe
			if cfg.Exe == "" {
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("bench notify: the logbook executable: %w", err)
				}
				cfg.Exe = self
			}
		} else if *exe != "" {
			return cliutil.Usage("--exe is the pipeline's: the monolith runs in this process")
		}
		cfg.Log = e.Log
		res, err := bench.RunNotify(cmd.Context(), cfg)
		if err != nil {
			return err
		}
		if out.JSON() {
			err = cliutil.WriteJSON(e.Stdout, res)
		} else {
			err = res.Print(e.Stdout)
		}
		if err != nil {
			return err
		}
		if !res.Pass {
			return fmt.Errorf("bench notify: not exact: %s", strings.Join(res.Failures, "; "))
		}
		return nil
	}
	return cmd
}
