package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/lab/loadtest"
	"github.com/logbook/logbook/lab/plot"
)

func newLoadtestTicketsCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tickets --url URL --token TOKEN",
		Short: "Load the tickets service with one sport in hot demand",
		Long: `The skewed-demand experiment of Stephen Shephard's "Performance modelling
and simulation of skewed demand in complex systems" (2017) on the tickets
service: the cold sports at a constant rate, the hot one at multiples of it,
one step each (an open model). Prints each sport's throughput and latency
per step; -o json is what logbook pepa predict reads.

--model closed runs the paper's own load instead: JMeter-style thread
groups, one per sport, each user looping exponential think time → request
(waiting for the answer) --loops times; the hot group's users ramp through
--hot-users, every other group has --users; each figure is the largest
moving average over --minute of the server's meters, sampled every sixth
of it. (logbook bench tickets reruns the paper's tables this way in
process, its values beside ours.)`,
		Example: `  logbook loadtest tickets --url http://127.0.0.1:8081 --token VIEWER --step 30s
  logbook loadtest tickets --url http://127.0.0.1:8081 --token BOOKER --ops book -o json > run.json
  logbook loadtest tickets --url http://127.0.0.1:8081 --token VIEWER --model closed --users 15 --hot-users 15,75,150 --think 100ms --loops 1500`,
		Args: cliutil.NoArgs,
	}
	fs := cmd.Flags()
	u := fs.String("url", "", "tickets server, e.g. http://127.0.0.1:8081 (required)")
	cliutil.FromEnv(fs, "url")
	token := fs.String("token", "", "bearer token: a viewer's for search, a booker's for book and mixed (required)")
	cliutil.SecretFlag(fs, "token")
	var cfg loadtest.TicketsConfig
	_ = cmd.MarkFlagRequired("url")
	_ = cmd.MarkFlagRequired("token")
	fs.StringVar(&cfg.Pipeline, "pipeline", "auto", "pipeline requests over a few connections: on, off (one request per connection at a time), or auto (on when the server's nodes are unlimited, --node-rate 0)")
	fs.IntVar(&cfg.PipeConns, "conns", 4, "connections requests are pipelined over (unpipelined: one connection per request in flight, up to --max-inflight)")
	fs.DurationVar(&cfg.BatchDelay, "batch-delay", time.Millisecond, "pipelined: how long a request may wait to share a write with others (counted in its latency)")
	fs.IntVar(&cfg.MaxInFlight, "max-inflight", 8192, "requests outstanding at most; beyond, arrivals are dropped and counted")
	fs.Float64Var(&cfg.ColdRate, "cold-rate", 20, "requests/s of each cold sport")
	mults := fs.String("hot-multipliers", "1,2,3,4,5,6,7,8,9,10", "the hot sport's rate in multiples of --cold-rate, one step each")
	fs.DurationVar(&cfg.Step, "step", 30*time.Second, "how long each step lasts")
	fs.DurationVar(&cfg.Warmup, "warmup", 0, "the unmeasured start of each step (default a fifth of --step)")
	fs.StringVar(&cfg.Ops, "ops", "search", "search, book or mixed (half search, a quarter each book and return)")
	fs.Float64Var(&cfg.ControlRate, "control-rate", 20, "control requests/s, sent alongside (negative: the step's total offered rate, which the paper measured in a separate run)")
	fs.StringVar(&cfg.Hot, "hot", "athletics", "the sport in hot demand")
	fs.IntVar(&cfg.SearchLimit, "search-limit", 10, "tickets per search answer")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed of the arrival process (0: random)")
	plotFile := fs.String("plot", "", "also draw throughput per sport and per node, and p99 per sport, against the multiplier into this .svg or .png file")
	_ = cmd.RegisterFlagCompletionFunc("pipeline", cobra.FixedCompletions([]string{"auto", "on", "off"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("ops", cobra.FixedCompletions([]string{"search", "book", "mixed"}, cobra.ShellCompDirectiveNoFileComp))
	closed := closedTicketsFlags(cmd)
	out := cliutil.OutputFlag(cmd, cliutil.Table, cliutil.JSON)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if closed.model != loadtest.ModelOpen {
			return closed.run(cmd, e, out, *u, *token, cfg.Hot, cfg.Seed)
		}
		if err := closed.refuseUnderOpen(cmd); err != nil {
			return err
		}
		if *plotFile != "" {
			if err := plot.CheckFile(*plotFile); err != nil {
				return cliutil.Usagef("--plot %v", err)
			}
		}
		cfg.Multipliers = nil
		for _, f := range strings.Split(*mults, ",") {
			m, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || m <= 0 {
				return cliutil.Usagef("--hot-multipliers: %q is not a positive number", f)
			}
			cfg.Multipliers = append(cfg.Multipliers, m)
		}
		if cfg.Warmup == 0 {
			cfg.Warmup = cfg.Step / 5
		}
		if cfg.ColdRate <= 0 || cfg.Step <= 0 || cfg.Warmup < 0 || cfg.Warmup >= cfg.Step || cfg.PipeConns < 1 || cfg.MaxInFlight < 1 || cfg.BatchDelay < 0 {
			return cliutil.Usage("--cold-rate and --step must be positive, --warmup shorter than --step, --conns and --max-inflight positive, --batch-delay not negative")
		}
		switch cfg.Pipeline {
		case "auto", "on", "off":
		default:
			return cliutil.Usagef("--pipeline %q: want auto, on or off", cfg.Pipeline)
		}
		switch cfg.Ops {
		case "search", "book", "mixed":
		default:
			return cliutil.Usagef("--ops %q: want search, book or mixed", cfg.Ops)
		}
		c, err := loadtest.NewTicketsClient(*u, *token, cfg.MaxInFlight)
		if err != nil {
			return cliutil.Usage(err.Error())
		}
		if err := loadtest.Reachable(cmd.Context(), *u); err != nil {
			return err
		}
		res, err := loadtest.RunTickets(cmd.Context(), c, cfg)
		if err != nil {
			return err
		}
		if *plotFile != "" {
			if err := plot.Save(*plotFile, res.Figure()); err != nil {
				return fmt.Errorf("--plot: %w", err)
			}
		}
		if out.JSON() {
			return cliutil.WriteJSON(e.Stdout, res)
		}
		_, err = fmt.Fprint(e.Stdout, res.Table())
		return err
	}
	return cmd
}
