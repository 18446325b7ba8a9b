package cli

import (
	"github.com/logbook/logbook/internal/cliutil"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/logbook/logbook/internal/progress"
	"github.com/logbook/logbook/lab/bench"
)

const benchDataDir = "./data-bench"

func newBenchCmd(e *env) *cobra.Command {
	g := cliutil.Group("bench", "measure the store and the runtimes: append, read, commands, crush, registry, windows, kv, cdc, notify",
		newBenchAppendCmd(e),
		newBenchReadCmd(e),
		newBenchCommandsCmd(e),
		newBenchCrushCmd(e),
		newBenchRegistryCmd(e),
		newBenchWindowsCmd(e),
		newBenchKVCmd(e),
		newBenchCDCCmd(e),
		newBenchNotifyCmd(e),
	)
	cliutil.ProfileFlags(g)
	return g
}

// benchFlags are the flags every benchmark takes.
type benchFlags struct {
	store  cliutil.StoreFlags
	asJSON *bool
}

func (b *benchFlags) register(fs *pflag.FlagSet) {
	b.store.Register(fs, benchDataDir)
	b.asJSON = cliutil.JSONFlag(fs)
}

func newBenchAppendCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "append", Short: "append events from concurrent writers: events/s and append latency", Args: cliutil.NoArgs}
	fs := cmd.Flags()
	var bf benchFlags
	bf.register(fs)
	var cfg bench.AppendConfig
	fs.IntVar(&cfg.Events, "events", 1_000_000, "events to append")
	fs.IntVar(&cfg.Batch, "batch", 100, "events per append call")
	fs.IntVar(&cfg.Writers, "writers", 1, "concurrent writers")
	fs.IntVar(&cfg.Payload, "payload", 100, "bytes of data per event")
	fs.IntVar(&cfg.Streams, "streams", 1000, "streams to spread the events over")
	fs.BoolVar(&cfg.StoreIDs, "store-ids", false, "let the store generate event ids instead of the writers")
	fs.BoolVar(&cfg.RandomIDs, "random-ids", false, "writers send random event ids (a client's own version 4 UUIDs) instead of time-ordered ones from eventstore.NewID")
	fs.BoolVar(&cfg.ExpectAny, "expect-any", false, "append with expected version any instead of the exact version")
	baseline := fs.Bool("baseline", false, "then write the same rows into a plain table by binary COPY (PostgreSQL only) and print both figures and their ratio")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if cfg.Events <= 0 || cfg.Batch <= 0 || cfg.Writers <= 0 || cfg.Streams <= 0 || cfg.Payload < 0 {
			return cliutil.Usage("--events, --batch, --writers and --streams must be positive and --payload not negative")
		}
		if *baseline && bf.store.URL == "" {
			return cliutil.Usage("--baseline needs --store postgres://…: it measures the database the store runs on")
		}
		return benchOn(cmd, e, &bf, func(s *cliutil.OpenedStore, p *progress.Counter) (table, error) {
			cfg.Progress = p
			r, err := bench.RunAppend(cmd.Context(), s, cfg, s.Fsyncs)
			if err != nil || !*baseline {
				return r, err
			}
			cfg.Progress = nil
			b, err := bench.RunBaseline(cmd.Context(), s.PG.Pool(), cfg)
			if err != nil {
				return nil, err
			}
			return r.WithBaseline(b), nil
		})
	}
	return cmd
}

func newBenchCommandsCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "commands", Short: "send commands to counter aggregates from closed-loop writers: commands/s and latency", Args: cliutil.NoArgs}
	fs := cmd.Flags()
	var bf benchFlags
	bf.register(fs)
	var cfg bench.CommandsConfig
	fs.IntVar(&cfg.Aggregates, "aggregates", 10_000, "counter aggregates to spread the commands over")
	fs.IntVar(&cfg.Commands, "commands", 500_000, "commands to send")
	fs.IntVar(&cfg.Writers, "writers", 256, "concurrent closed-loop writers")
	fs.IntVar(&cfg.Shards, "shards", 0, "shards of the aggregate runtime (0: its default)")
	fs.StringVar(&cfg.Codec, "codec", "json", "event codec: json, or avro (the schema registry's wire format)")
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
	cmd := &cobra.Command{Use: "read", Short: "read the whole log in order, then through a catch-up subscription: events/s", Args: cliutil.NoArgs}
	fs := cmd.Flags()
	var bf benchFlags
	bf.register(fs)
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
	p, stop := e.ShowProgress(cmd, *bf.asJSON)
	res, err := run(s, p)
	stop()
	if err != nil {
		return err
	}
	return cliutil.Report(e.Stdout, *bf.asJSON, res, res.Rows())
}
