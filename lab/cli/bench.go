package cli

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/internal/progress"
	"github.com/logbook/logbook/lab/bench"
)

const benchDataDir = "./data-bench"

func newBenchCmd(e *env) *cobra.Command {
	g := cliutil.Group("bench", "Measure the store, the runtimes and the services",
		newBenchAppendCmd(e),
		newBenchPeersCmd(e),
		newBenchProduceCmd(e),
		newBenchReadCmd(e),
		newBenchCommandsCmd(e),
		newBenchCrushCmd(e),
		newBenchRegistryCmd(e),
		newBenchWindowsCmd(e),
		newBenchKVCmd(e),
		newBenchCDCCmd(e),
		newBenchNotifyCmd(e),
		newBenchScalingCmd(e),
		newBenchTicketsCmd(e),
	)
	g.Long = `Benchmarks of the event store and the runtimes (append, read, commands,
crush, registry, windows), of the services' backends (kv, cdc, notify) and of
the ticketing paper's measured tables (tickets).
Each prints its figures as a table, or with -o json or -o csv for a machine.`
	cliutil.ProfileFlags(g)
	return g
}

// benchFlags are the flags every benchmark takes.
type benchFlags struct {
	store cliutil.StoreFlags
	out   *cliutil.Output
}

func (b *benchFlags) register(cmd *cobra.Command) {
	b.store.Register(cmd.Flags(), benchDataDir)
	b.out = cliutil.OutputFlag(cmd)
}

func newBenchAppendCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "append",
		Short: "Append events from concurrent writers: events/s and latency",
		Long: `Appends events from concurrent writers and prints events per second and the
append latency. --baseline also writes the same rows by binary COPY, the
fastest the database takes them: into a plain table with only a primary
key, and into a copy of the store's events table with its indexes.
--ceiling (embedded store) first runs the same writers against a bare log in
the data directory — each group of appends written to a prepared file and
fdatasync'ed, nothing else — about the most any store that syncs what it
acknowledges could reach here, and prints the store's ratio to it.`,
		Example: `  # one writer, a million events, on the embedded store in ./data-bench
  logbook bench append
  # 8 writers on PostgreSQL, beside a plain COPY of the same rows
  logbook bench append --writers 8 --store postgres://localhost/logbook --baseline
  # 256 single-event writers, beside a bare log's figure for the same writers
  logbook bench append --batch 1 --writers 256 --ceiling`,
		Args: cliutil.NoArgs,
	}
	fs := cmd.Flags()
	var bf benchFlags
	bf.register(cmd)
	var cfg bench.AppendConfig
	fs.IntVar(&cfg.Events, "events", 1_000_000, "events to append")
	fs.IntVar(&cfg.Batch, "batch", 100, "events per append call")
	fs.IntVar(&cfg.Writers, "writers", 1, "concurrent writers")
	fs.IntVar(&cfg.Payload, "payload", 100, "bytes of data per event")
	fs.IntVar(&cfg.Streams, "streams", 1000, "streams to spread the events over")
	fs.BoolVar(&cfg.StoreIDs, "store-ids", false, "let the store generate event ids instead of the writers")
	fs.BoolVar(&cfg.RandomIDs, "random-ids", false, "writers send random event ids (a client's own version 4 UUIDs) instead of time-ordered ones from eventstore.NewID")
	fs.BoolVar(&cfg.ExpectAny, "expect-any", false, "append with expected version any instead of the exact version")
	fsyncSamples := fs.Int("fsync-samples", 300, "synced writes timed in the data directory before the run (embedded store), for the fsync bounds: this many of 4 KiB and as many of one append's bytes in the store's log, each overwriting a file written first; and this many of 4 KiB growing a file, for comparison")
	baseline := fs.Bool("baseline", false, "then write the same rows by binary COPY into a plain table and into a copy of the store's events table (PostgreSQL only) and print each figure and the store's ratio to it")
	ceiling := fs.Bool("ceiling", false, "first run the same writers against a bare log in the data directory (a write and an fdatasync per group of appends, nothing else; embedded store only) and print the store's ratio to it")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if cfg.Events <= 0 || cfg.Batch <= 0 || cfg.Writers <= 0 || cfg.Streams <= 0 || cfg.Payload < 0 {
			return cliutil.Usage("--events, --batch, --writers and --streams must be positive and --payload not negative")
		}
		if *fsyncSamples <= 0 {
			return cliutil.Usage("--fsync-samples must be positive")
		}
		if *baseline && bf.store.URL == "" {
			return cliutil.Usage("--baseline needs --store postgres://…: it measures the database the store runs on")
		}
		if *ceiling && bf.store.URL != "" {
			return cliutil.Usage("--ceiling is for the embedded store; on PostgreSQL, --baseline gives COPY's figures")
		}
		return benchOn(cmd, e, &bf, func(s *cliutil.OpenedStore, p *progress.Counter) (table, error) {
			cfg.Progress = p
			var probe, batchProbe, growProbe *bench.FsyncProbe
			if bf.store.URL == "" {
				// The machine's own limit, in the same run: a synced
				// 4 KiB write in the data directory, and a synced write
				// of one append's bytes in the store's log, each into a
				// prepared file; and for comparison 4 KiB growing one.
				pr, err := bench.MeasureFsync(bf.store.Data, *fsyncSamples)
				if err != nil {
					return nil, err
				}
				probe = &pr
				bpr, err := bench.MeasureSyncedWrites(bf.store.Data, *fsyncSamples, pebblestore.BatchBytes(bench.SampleAppend(cfg)), false)
				if err != nil {
					return nil, err
				}
				batchProbe = &bpr
				gpr, err := bench.MeasureSyncedWrites(bf.store.Data, *fsyncSamples, 4096, true)
				if err != nil {
					return nil, err
				}
				growProbe = &gpr
			}
			var ceil *bench.AppendResult
			if *ceiling {
				c, err := runCeiling(cmd.Context(), bf.store.Data, cfg)
				if err != nil {
					return nil, err
				}
				ceil = &c
			}
			r, err := bench.RunAppend(cmd.Context(), s, cfg, s.Fsyncs)
			if err == nil && ceil != nil {
				r = r.WithCeiling(*ceil)
			}
			if err == nil && probe != nil {
				r = r.WithFsyncBound(*probe, batchProbe)
				r.FsyncGrowingMS = &growProbe.MedianMS
			}
			if err != nil || !*baseline {
				return r, err
			}
			cfg.Progress = nil
			var figures [2]float64
			for i, kind := range []bench.BaselineTable{bench.PlainTable, bench.StoreEventsTable} {
				// Each COPY starts from a checkpoint, as the store's run
				// should (docs/benchmarks.md): not on the dirty pages and
				// WAL of the runs before it.
				if err := bench.Checkpoint(cmd.Context(), s.PG.Pool()); err != nil {
					e.Log.Warn("bench append --baseline: the COPY runs without a checkpoint before them, so each may pay for the run before it", "err", err)
				}
				if figures[i], err = bench.RunBaseline(cmd.Context(), s.PG.Pool(), cfg, kind); err != nil {
					return nil, err
				}
			}
			return r.WithBaseline(figures[0]).WithEventsTableBaseline(figures[1]), nil
		})
	}
	return cmd
}

// runCeiling runs cfg's writers against a LogCeiling in dir.
func runCeiling(ctx context.Context, dir string, cfg bench.AppendConfig) (bench.AppendResult, error) {
	l, err := bench.OpenLogCeiling(dir, cfg)
	if err != nil {
		return bench.AppendResult{}, err
	}
	cfg.Progress = nil
	r, err := bench.RunAppend(ctx, l, cfg, l.Fsyncs)
	return r, errors.Join(err, l.Close())
}

func newBenchCommandsCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "commands",
		Short: "Send commands to counter aggregates: commands/s and latency",
		Long: `Sends commands to counter aggregates from closed-loop writers (each waits
for its answer before the next) and prints commands per second and latency.`,
		Example: `  logbook bench commands --writers 256 --commands 500000
  logbook bench commands --codec avro -o json`,
		Args: cliutil.NoArgs,
	}
	fs := cmd.Flags()
	var bf benchFlags
	bf.register(cmd)
	var cfg bench.CommandsConfig
	fs.IntVar(&cfg.Aggregates, "aggregates", 10_000, "counter aggregates to spread the commands over")
	fs.IntVar(&cfg.Commands, "commands", 500_000, "commands to send")
	fs.IntVar(&cfg.Writers, "writers", 256, "concurrent closed-loop writers")
	fs.IntVar(&cfg.Shards, "shards", 0, "shards of the aggregate runtime (0: its default)")
	fs.StringVar(&cfg.Codec, "codec", "json", "event codec: json, or avro (the schema registry's wire format)")
	_ = cmd.RegisterFlagCompletionFunc("codec", cobra.FixedCompletions([]string{"json", "avro"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if cfg.Aggregates <= 0 || cfg.Commands <= 0 || cfg.Writers <= 0 || cfg.Shards < 0 {
			return cliutil.Usage("--aggregates, --commands and --writers must be positive, --shards not negative")
		}
		if cfg.Codec != "json" && cfg.Codec != "avro" {
			return cliutil.Usage("--codec is json or avro")
		}
		return benchOn(cmd, e, &bf, func(s *cliutil.OpenedStore, p *progress.Counter) (table, error) {
			cfg.Progress, cfg.Logger = p, e.Log
			return bench.RunCommands(cmd.Context(), s, cfg, s.Fsyncs)
		})
	}
	return cmd
}

func newBenchReadCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "read",
		Short: "Read the whole log, then through a subscription: events/s",
		Long: `Reads the whole log in order, then again through a catch-up subscription,
and prints events per second of each. Run bench append first to fill the
store.`,
		Example: `  logbook bench append --events 1000000 && logbook bench read`,
		Args:    cliutil.NoArgs,
	}
	fs := cmd.Flags()
	var bf benchFlags
	bf.register(cmd)
	var cfg bench.ReadConfig
	fs.IntVar(&cfg.Batch, "batch", 1000, "events per read call")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if cfg.Batch <= 0 {
			return cliutil.Usage("--batch must be positive")
		}
		return benchOn(cmd, e, &bf, func(s *cliutil.OpenedStore, p *progress.Counter) (table, error) {
			cfg.Progress = p
			return bench.RunRead(cmd.Context(), s, cfg)
		})
	}
	return cmd
}

// table is a benchmark result: JSON for machines, rows for people.
type table interface{ Rows() [][2]string }

// benchOn opens the store, runs a benchmark on it with a progress bar, and
// reports the result.
func benchOn(cmd *cobra.Command, e *env, bf *benchFlags, run func(s *cliutil.OpenedStore, p *progress.Counter) (table, error)) error {
	s, err := bf.store.Open(e.Log)
	if err != nil {
		return err
	}
	defer s.Close()
	p, stop := e.ShowProgress(cmd, bf.out.Quiet())
	res, err := run(s, p)
	stop()
	if err != nil {
		return err
	}
	return bf.out.Print(e.Stdout, res, cliutil.Pairs(res.Rows()))
}
