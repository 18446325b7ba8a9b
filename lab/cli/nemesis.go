package cli

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/lab/nemesis"
	"github.com/logbook/logbook/lab/plot"
)

// newNemesisCmd is `logbook nemesis`: faults in a real cluster, checked
// the way Jepsen checks databases (lab/nemesis).
func newNemesisCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nemesis",
		Short: "Inject faults into a real cluster under load and check nothing was lost",
		Long: `nemesis starts a cluster of its own — PostgreSQL, a Kafka broker, two write
nodes publishing to it, a replica fed by Kafka and one fed over HTTP, nginx
in front — drives planners' commands through nginx (each with an
Idempotency-Key, retried on timeouts) and read-your-writes reads of the
replicas, and compare-and-set operations on two kv nodes sharing its
PostgreSQL, recording every operation, and injects faults on a seeded random
schedule, each healed: ` + strings.Join(nemesis.Kinds(), ", ") + `.
Faults that act on different things (the write nodes, the replicas,
PostgreSQL, the links to it, nginx's links, the broker: six lanes) overlap;
those of one lane come one at a time, paced to spread --rounds rounds over
the duration.
After the last heal it checks that every acknowledged write is in the store
and answered by the API, that no command took effect twice, that the kv
history is linearizable (porcupine; a visualization on failure), that the
replicas converge to the store's view, that the Kafka topic holds the log
without gap or duplicate and the publisher resumed, and measures the time
from each heal to the next acknowledged write. It exits 1 if anything does
not hold. It needs PostgreSQL, nginx, java and the broker's jars
(scripts/kafka.sh start fetches them); see docs/reliability.md.`,
		Example: `  logbook nemesis --duration 60s --seed 7
  logbook nemesis --duration 3m --faults all --json
  logbook nemesis --faults kill-postgres,pause-node --plot nemesis.svg`,
		Args: cliutil.NoArgs,
	}
	fs := cmd.Flags()
	var cfg nemesis.Config
	var faults, plotFile string
	fs.DurationVar(&cfg.Duration, "duration", time.Minute, "how long faults are injected (the checks come after)")
	fs.StringVar(&faults, "faults", "all", "comma-separated fault kinds, or all: "+strings.Join(nemesis.Kinds(), ", "))
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed of the fault schedule and its targets")
	fs.StringVar(&plotFile, "plot", "", "write operations per second, fault intervals shaded, to this .svg or .png file")
	fs.StringVar(&cfg.KafkaLibs, "kafka-libs", "", "the Kafka broker's jars (default $LOGBOOK_KAFKA_LIBS, else scripts/kafka/target/libs here or above)")
	fs.StringVar(&cfg.Nginx, "nginx", "/usr/sbin/nginx", "the nginx binary")
	fs.StringVar(&cfg.Dir, "dir", "", "keep logs and data in this directory (default: a temporary one, removed)")
	fs.IntVar(&cfg.Clients, "clients", 8, "concurrent planners")
	fs.IntVar(&cfg.Rounds, "rounds", 0, "rounds of faults each lane spreads over the duration (default one per 25 s)")
	out := cliutil.OutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if cfg.Duration <= 0 {
			return cliutil.Usage("--duration must be positive")
		}
		if cfg.Rounds < 0 {
			return cliutil.Usage("--rounds must not be negative")
		}
		if cfg.Clients <= 0 || cfg.Clients > 64 {
			return cliutil.Usage("--clients must be between 1 and 64")
		}
		if plotFile != "" {
			if err := plot.CheckFile(plotFile); err != nil {
				return cliutil.Usage("--plot " + err.Error())
			}
		}
		if faults != "all" {
			known := map[string]bool{}
			for _, k := range nemesis.Kinds() {
				known[k] = true
			}
			for k := range strings.SplitSeq(faults, ",") {
				if !known[k] {
					return cliutil.Usage(fmt.Sprintf("--faults: no fault %q; want all or some of %s", k, strings.Join(nemesis.Kinds(), ", ")))
				}
				cfg.Kinds = append(cfg.Kinds, k)
			}
		}
		if cfg.Dir != "" {
			cfg.Keep = true
			if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
				return err
			}
		}
		var err error
		if cfg.Binary, err = os.Executable(); err != nil {
			return err
		}
		cfg.Log = e.Log
		if !out.Quiet() {
			cfg.Progress = func(s string) { fmt.Fprintln(e.Stderr, s) }
		}
		sum, err := nemesis.Run(cmd.Context(), cfg)
		if err != nil {
			return err
		}
		if plotFile != "" {
			if err := plot.Save(plotFile, sum.Figure()); err != nil {
				return err
			}
		}
		if err := out.Print(e.Stdout, sum.JSON(), nemesisRows(sum)); err != nil {
			return err
		}
		if !out.Quiet() {
			for _, v := range sum.Violations {
				fmt.Fprintln(e.Stdout, "  "+v.String())
			}
		}
		if len(sum.Violations) > 0 {
			return errors.New("nemesis: checks failed (see violations)")
		}
		return nil
	}
	return cmd
}

// maxRecovery is the longest recovery and the fault it followed.
func maxRecovery(s *nemesis.Summary) string {
	out := fmt.Sprintf("%.2f", s.MaxRecoveryS)
	if f, ok := s.SlowestRecovery(); ok {
		out += fmt.Sprintf(" (after %s %s, healed at %.1f s", f.Kind, f.Target, f.Healed.Sub(s.Start).Seconds())
		if f.Whole.After(f.Healed) {
			out += fmt.Sprintf(", its write path whole at %.1f s", f.Whole.Sub(s.Start).Seconds())
		}
		out += ")"
	}
	return out
}

func nemesisRows(s *nemesis.Summary) cliutil.Rows {
	var kinds []string
	for k, n := range s.Faults {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	linear := "not checked"
	if s.Linearizable != nil {
		linear = fmt.Sprint(*s.Linearizable)
	}
	rows := [][2]string{
		{"seed", fmt.Sprint(s.Seed)},
		{"seconds", fmt.Sprintf("%.1f", s.Seconds)},
		{"operations", fmt.Sprint(s.Operations)},
		{"acknowledged writes", fmt.Sprint(s.Acknowledged)},
		{"lost acknowledged", fmt.Sprint(s.LostAcknowledged)},
		{"duplicate effects", fmt.Sprint(s.DuplicateEffects)},
		{"linearizable", linear},
		{"replicas converged", fmt.Sprint(s.ReplicasConverged)},
		{"kafka gaps", fmt.Sprint(s.KafkaGaps)},
		{"kafka duplicates", fmt.Sprint(s.KafkaDuplicates)},
		{"faults", strings.Join(kinds, ", ")},
		{"max recovery (s)", maxRecovery(s)},
		{"violations", fmt.Sprint(len(s.Violations))},
	}
	return cliutil.Pairs(rows)
}
