package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/lab/bench"
	"github.com/logbook/logbook/lab/plot"
)

// kvLongFlags are the flags of bench kv --table long.
type kvLongFlags struct {
	size        *string
	payload     *int
	batch       *int
	interval    *time.Duration
	replicas    *int
	consistency *string
	cfg         bench.KVLongConfig
}

func registerKVLong(fs *pflag.FlagSet) *kvLongFlags {
	return &kvLongFlags{
		size:        fs.String("size", "20GB", "--table long: bytes of values put into each backend (as 20GB, 1.5GB)"),
		payload:     fs.Int("payload", 1000, "--table long: bytes per value"),
		batch:       fs.Int("batch", 256, "--table long: puts per batch"),
		interval:    fs.Duration("interval", time.Minute, "--table long: how often puts/s is taken"),
		replicas:    fs.Int("replicas", 1, "--table long, cassandra-blobs: the keyspace's replication factor (2 needs scripts/cassandra.sh start --nodes 2)"),
		consistency: fs.String("consistency", "one", "--table long, cassandra-blobs: the writes' consistency: any, one or two"),
	}
}

func (l *kvLongFlags) check(plotFile string) error {
	n, err := humanize.ParseBytes(*l.size)
	if err != nil || n == 0 || n > 1<<50 {
		return cliutil.Usagef("--size %q: a size, as 20GB or 1.5GB", *l.size)
	}
	if *l.payload <= 0 || *l.batch <= 0 || *l.interval <= 0 {
		return cliutil.Usage("--payload, --batch and --interval must be positive")
	}
	if plotFile != "" {
		if err := plot.CheckFile(plotFile); err != nil {
			return cliutil.Usagef("--plot %v", err)
		}
	}
	if *l.replicas < 1 || *l.replicas > 3 {
		return cliutil.Usagef("--replicas %d: 1, 2 or 3", *l.replicas)
	}
	switch *l.consistency {
	case "any", "one", "two":
	default:
		return cliutil.Usagef("--consistency %q: any, one or two", *l.consistency)
	}
	l.cfg = bench.KVLongConfig{Size: int64(n), Payload: *l.payload, Batch: *l.batch, Interval: *l.interval,
		Replicas: *l.replicas, Consistency: *l.consistency}
	return nil
}

// run fills each backend and prints the first and last interval of each.
func (l *kvLongFlags) run(cmd *cobra.Command, e *env, cfg bench.KVConfig, out *cliutil.Output, plotFile string, stop func()) error {
	l.cfg.KVConfig = cfg
	res, err := bench.RunKVLong(cmd.Context(), l.cfg)
	stop()
	if err != nil {
		return err
	}
	if plotFile != "" {
		if err := plot.Save(plotFile, res.Figure()); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	rows := res.Table()
	if out.Format() != cliutil.Table {
		return out.Print(e.Stdout, res, cliutil.Rows{Header: rows[0], Rows: rows[1:]})
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	return tw.Flush()
}
