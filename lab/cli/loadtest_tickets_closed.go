package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/lab/loadtest"
)

// closedFlags are `loadtest tickets --model closed`'s: the paper's thread
// groups against a running server.
type closedFlags struct {
	model     string
	users     int
	hotUsers  []int
	think     time.Duration
	loops     int
	minute    time.Duration
	control   bool
	openOnly  []string
	closedOne []string
}

func closedTicketsFlags(cmd *cobra.Command) *closedFlags {
	f := &closedFlags{
		openOnly:  []string{"cold-rate", "hot-multipliers", "step", "warmup", "control-rate", "pipeline", "conns", "batch-delay", "max-inflight", "ops", "plot"},
		closedOne: []string{"users", "hot-users", "think", "loops", "minute", "control-run"},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.model, "model", loadtest.ModelOpen, "open (Poisson arrivals at the step's rates) or closed (the paper's JMeter thread groups: a user waits for its answer, then thinks)")
	fs.IntVar(&f.users, "users", 15, "closed: users of each group but the hot sport's")
	fs.IntSliceVar(&f.hotUsers, "hot-users", []int{15, 30, 45, 60, 75, 90, 105, 120, 135, 150}, "closed: the hot sport's users, one experiment each")
	fs.DurationVar(&f.think, "think", 100*time.Millisecond, "closed: mean of the exponential think time before each request")
	fs.IntVar(&f.loops, "loops", 1500, "closed: requests per user")
	fs.DurationVar(&f.minute, "minute", time.Minute, "closed: the moving average's window, the meters sampled every sixth of it")
	fs.BoolVar(&f.control, "control-run", false, "closed: every request a control request (the paper's calibration run)")
	_ = cmd.RegisterFlagCompletionFunc("model", cobra.FixedCompletions([]string{loadtest.ModelOpen, loadtest.ModelClosed}, cobra.ShellCompDirectiveNoFileComp))
	return f
}

// refuseUnderOpen is a usage error if a closed-only flag was given.
func (f *closedFlags) refuseUnderOpen(cmd *cobra.Command) error {
	if f.model != loadtest.ModelOpen {
		return cliutil.Usagef("--model %q: want open or closed", f.model)
	}
	for _, name := range f.closedOne {
		if cmd.Flags().Changed(name) {
			return cliutil.Usagef("--%s is the closed model's: give --model closed", name)
		}
	}
	return nil
}

func (f *closedFlags) run(cmd *cobra.Command, e *env, out *cliutil.Output, url, token, hot string, seed uint64) error {
	if f.model != loadtest.ModelClosed {
		return cliutil.Usagef("--model %q: want open or closed", f.model)
	}
	for _, name := range f.openOnly {
		if cmd.Flags().Changed(name) {
			return cliutil.Usagef("--%s is the open model's; --model closed takes --users, --hot-users, --think, --loops, --minute, --control-run", name)
		}
	}
	if f.users < 1 || f.think <= 0 || f.loops < 1 || f.minute < 100*time.Millisecond || len(f.hotUsers) == 0 {
		return cliutil.Usage("--users, --think and --loops must be positive, --minute at least 100ms, --hot-users given")
	}
	total := f.users
	for _, n := range f.hotUsers {
		if n < 1 || n > 10_000 {
			return cliutil.Usagef("--hot-users: %d users: want 1–10000", n)
		}
		total = max(total, n)
	}
	// A connection per user at most (a catalogue has at most 10,000
	// sports), and one for the sampler.
	c, err := loadtest.NewTicketsClient(url, token, 8+total+f.users*10_000)
	if err != nil {
		return cliutil.Usage(err.Error())
	}
	if err := loadtest.Reachable(cmd.Context(), url); err != nil {
		return err
	}
	steps, err := loadtest.RunTicketRamp(cmd.Context(), c, loadtest.RampConfig{Hot: hot, HotUsers: f.hotUsers, ColdUsers: f.users,
		Model: loadtest.ModelClosed, Control: f.control, Think: f.think, Loops: f.loops, Window: f.minute, Seed: seed})
	if err != nil {
		return err
	}
	if out.JSON() {
		return cliutil.WriteJSON(e.Stdout, steps)
	}
	_, err = fmt.Fprintf(e.Stdout, "%sthe largest %v moving average of each meter, req/s; closed thread groups, think %v, %d loops\n",
		loadtest.RampTable(hot, steps), f.minute, f.think, f.loops)
	return err
}
