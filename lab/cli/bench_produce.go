package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/internal/progress"
	"github.com/logbook/logbook/lab/bench"
)

func newBenchProduceCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "Time sending 100 Avro events to Kafka and to logbook's log, run after run",
		Long: `The mass-notification thesis's Figure 6.1 ("Average process time to send
100 Kafka events"): the same 100 Avro-encoded notifications, their schema
in logbook's registry and each value in the registry's wire format, sent
to a Kafka broker (acks from every in-sync replica) and appended to
logbook's own log (synced) — each both as one batch and one event at a
time, the four taking turns in every run. Prints the time to send all of
a run's events: p50, p99, max and mean over the runs.`,
		Example: `  logbook bench produce --kafka 127.0.0.1:19092 --runs 50 -o json`,
		Args:    cliutil.NoArgs,
	}
	fs := cmd.Flags()
	var bf benchFlags
	bf.register(cmd)
	var cfg bench.ProduceConfig
	brokers := fs.String("kafka", "", "Kafka brokers, comma-separated (scripts/kafka.sh start prints one)")
	fs.StringVar(&cfg.Topic, "topic", "logbook-bench-produce", "topic to send to (made with one partition if missing)")
	fs.IntVar(&cfg.Events, "events", 100, "events per run")
	fs.IntVar(&cfg.Runs, "runs", 50, "runs")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *brokers == "" {
			return cliutil.Usage("--kafka HOST:PORT is required")
		}
		if cfg.Events <= 0 || cfg.Runs <= 0 || cfg.Topic == "" {
			return cliutil.Usage("--events and --runs must be positive, --topic not empty")
		}
		cfg.Brokers = strings.Split(*brokers, ",")
		return benchOn(cmd, e, &bf, func(s *cliutil.OpenedStore, _ *progress.Counter) (table, error) {
			return bench.RunProduce(cmd.Context(), s, cfg)
		})
	}
	return cmd
}
