package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/lab/loadtest"
	"github.com/logbook/logbook/lab/ticketrig"
)

// newBenchTicketsCmd is `logbook bench tickets --table 9|11|13`: a
// measured table of the ticketing paper rerun in process, as its author
// ran it (lab/loadtest/tickets_tables.go).
func newBenchTicketsCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tickets --table 9|11|13",
		Short: "Rerun a ticketing paper table (9, 11, 13), its values beside ours",
		Long: `Reruns Table 9 (microservices), 11 (shared queue, partitioned store) or 13
(shared queue, two replicas) of "Performance modelling and simulation of
skewed demand in complex systems" (Shephard, 2017) on the tickets service
in this process, as the paper ran them: JMeter-style thread groups, one
per sport (athletics ramping up, the others constant), each user looping
think (exponential) → request; first the control run (every request a
control request, touching no store node), then the search run; each
figure the largest moving average of a meter sampled every sixth of a
--minute, each experiment run --runs times and the mean taken. Every cell
is ours with the paper's value in brackets.

The store nodes' rate is calibrated as the paper calibrated its database
rate: a multiple of one cold group's control throughput (130/19 for
Table 9, 5.0 for Tables 11 and 13). Rates are not scaled; --minute
shrinks the moving average's window, the sampling interval and the loop
count together (the paper's scale: 1m).`,
		Example: `  logbook bench tickets --table 11 --minute 5s --runs 1
  logbook bench tickets --table 13 --replica-choice random -o json
  logbook bench tickets --table 9 --hot-users 10,100 --minute 10s`,
		Args: cliutil.NoArgs,
	}
	fs := cmd.Flags()
	var cfg loadtest.TableConfig
	fs.IntVar(&cfg.Table, "table", 0, "the paper's table: 9, 11 or 13 (required)")
	fs.StringVar(&cfg.Model, "model", loadtest.ModelClosed, "closed (the paper's thread groups: a user waits for its answer, then thinks) or open (Poisson arrivals at users/think per group)")
	fs.IntVar(&cfg.Runs, "runs", 5, "runs of each experiment, the mean taken (the paper: 5)")
	fs.DurationVar(&cfg.Minute, "minute", time.Minute, "the moving average's window; meters are sampled every sixth of it and the loop count scales with it (the paper: 1m, sampled every 10s)")
	fs.Float64Var(&cfg.NodeRate, "node-rate", 0, "each store node's requests/s (0: calibrated from the first run's control run)")
	fs.IntSliceVar(&cfg.HotUsers, "hot-users", nil, "the hot group's users, one experiment each (default: the table's, e.g. 15,30,…,150)")
	fs.StringVar(&cfg.ReplicaChoice, "replica-choice", ticketrig.ChooseFirst, "table 13: how a worker picks one of a sport's two nodes: first (the paper's uneven replicas), random or least-loaded")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed of the think times (0: random)")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	_ = cmd.MarkFlagRequired("table")
	_ = cmd.RegisterFlagCompletionFunc("model", cobra.FixedCompletions([]string{loadtest.ModelClosed, loadtest.ModelOpen}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("table", cobra.FixedCompletions([]string{"9", "11", "13"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("replica-choice", cobra.FixedCompletions([]string{ticketrig.ChooseFirst, ticketrig.ChooseRandom, ticketrig.ChooseLeastLoaded}, cobra.ShellCompDirectiveNoFileComp))
	out := cliutil.OutputFlag(cmd, cliutil.Table, cliutil.JSON)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if _, ok := loadtest.PaperTables[cfg.Table]; !ok {
			return cliutil.Usagef("--table %d: want 9, 11 or 13", cfg.Table)
		}
		if cfg.Model != loadtest.ModelClosed && cfg.Model != loadtest.ModelOpen {
			return cliutil.Usagef("--model %q: want closed or open", cfg.Model)
		}
		if cfg.Runs < 1 || cfg.Runs > 100 {
			return cliutil.Usagef("--runs %d: want 1–100", cfg.Runs)
		}
		if cfg.Minute < 100*time.Millisecond {
			return cliutil.Usagef("--minute %v: want at least 100ms", cfg.Minute)
		}
		if cfg.NodeRate < 0 {
			return cliutil.Usage("--node-rate must not be negative")
		}
		if cmd.Flags().Changed("hot-users") {
			for _, u := range cfg.HotUsers {
				if u < 1 || u > 10_000 {
					return cliutil.Usagef("--hot-users: %d users: want 1–10000", u)
				}
			}
		} else {
			cfg.HotUsers = nil
		}
		switch cfg.ReplicaChoice {
		case ticketrig.ChooseFirst, ticketrig.ChooseRandom, ticketrig.ChooseLeastLoaded:
		default:
			return cliutil.Usagef("--replica-choice %q: want first, random or least-loaded", cfg.ReplicaChoice)
		}
		if cmd.Flags().Changed("replica-choice") && cfg.Table != 13 {
			return cliutil.Usage("--replica-choice is Table 13's: only its sports have two replicas")
		}
		var progress io.Writer
		if !*quiet {
			progress = e.Stderr
		}
		cfg.Progress = progress
		res, err := loadtest.RunPaperTable(cmd.Context(), cfg)
		if err != nil {
			return err
		}
		if out.JSON() {
			return cliutil.WriteJSON(e.Stdout, res)
		}
		_, err = fmt.Fprint(e.Stdout, res.Table())
		return err
	}
	return cmd
}
