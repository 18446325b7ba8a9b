package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/lab/torture"
)

// newTortureCmd is `logbook torture`: power cuts under the embedded store
// (lab/torture), at any scale.
func newTortureCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "torture",
		Short: "Cut the power under the embedded store and check every write",
		Long: `torture runs an append workload on the embedded store over a simulated
disk (Pebble's crash-consistent in-memory file system), cuts the power at
random moments, and after each cut checks that every acknowledged append is
there, whole, where it was acknowledged; that nothing unacknowledged is half
there; that positions have no gap and stream versions agree; and that the
head readers were shown survived. With --removals (the default for the
store alone) a remover deletes, truncates, sets a retention rule and sweeps
meanwhile: an acknowledged append may be gone only if a removal attempted
before the cut covers it, and what an acknowledged removal covers must stay
gone. --store-kind projection also runs a
checkpointed view through the cuts and checks that it holds exactly the
log's effect up to its checkpoint. It exits 1 if anything was lost or broken.`,
		Example: `  logbook torture --crash-points 2000 --seed 7
  logbook torture --store-kind projection -o json`,
		Args: cliutil.NoArgs,
	}
	fs := cmd.Flags()
	var cfg torture.Config
	fs.IntVar(&cfg.CrashPoints, "crash-points", 1000, "power cuts")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed (the same seed makes the same workload, though not the same interleaving)")
	fs.StringVar(&cfg.Kind, "store-kind", "events", "events (the store) or projection (the store and a checkpointed view)")
	fs.BoolVar(&cfg.NoSync, "no-sync", false, "acknowledge appends before their fsync, to see the checks catch the lost writes")
	fs.BoolVar(&cfg.Removals, "removals", true, "delete, truncate, expire and sweep during the workload (store kind events only)")
	_ = cmd.RegisterFlagCompletionFunc("store-kind", cobra.FixedCompletions([]string{"events", "projection"}, cobra.ShellCompDirectiveNoFileComp))
	out := cliutil.OutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if cfg.CrashPoints <= 0 {
			return cliutil.Usage("--crash-points must be positive")
		}
		if cfg.Kind != "events" && cfg.Kind != "projection" {
			return cliutil.Usage(fmt.Sprintf("--store-kind %q: want events or projection", cfg.Kind))
		}
		if cfg.Kind != "events" {
			if cmd.Flags().Changed("removals") && cfg.Removals {
				return cliutil.Usage("--removals needs --store-kind events")
			}
			cfg.Removals = false
		}
		res, err := torture.Run(cmd.Context(), cfg)
		if err != nil {
			return err
		}
		rows := [][2]string{
			{"store kind", res.Kind},
			{"seed", fmt.Sprint(res.Seed)},
			{"crash points", fmt.Sprint(res.CrashPoints)},
			{"acknowledged appends checked", fmt.Sprint(res.Acknowledged)},
			{"lost acknowledged appends", fmt.Sprint(res.LostAcknowledged)},
			{"removals acknowledged", fmt.Sprint(res.Removals)},
			{"acknowledged events legitimately removed", fmt.Sprint(res.RemovedEvents)},
			{"other violations", fmt.Sprint(res.Violations)},
			{"seconds", fmt.Sprintf("%.1f", res.Seconds)},
		}
		if len(res.FirstProblems) > 0 {
			rows = append(rows, [2]string{"first problems", strings.Join(res.FirstProblems, "; ")})
		}
		if err := out.Print(e.Stdout, res, cliutil.Pairs(rows)); err != nil {
			return err
		}
		if res.LostAcknowledged > 0 || res.Violations > 0 {
			return errors.New("torture: acknowledged appends lost or promises broken (see above)")
		}
		return nil
	}
	return cmd
}
