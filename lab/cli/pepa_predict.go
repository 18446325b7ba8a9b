package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/lab/loadtest"
	"github.com/logbook/logbook/lab/pepa"
	"github.com/logbook/logbook/lab/ticketmodel"
)

// newPepaPredictCmd is `logbook pepa predict RUN.json`: the tickets
// service's model, calibrated with a `loadtest tickets --json` run,
// against what the run measured.
func newPepaPredictCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "predict RUN.json",
		Short: "Predict a tickets load test's throughput from its PEPA model",
		Long: `predict reads the JSON of 'logbook loadtest tickets -o json', writes the PEPA model
of the run's architecture (lab/ticketmodel), calibrates it at every step with
the rates the run measured (each sport's and control's offered rate, each store
node's measured service rate), solves it, and prints the predicted throughput of
every sport beside the measured one. --arch predicts another architecture under
the same load and nodes; --write-model saves the model.`,
		Example: `  logbook loadtest tickets --url http://127.0.0.1:8081 --token VIEWER -o json > run.json
  logbook pepa predict run.json
  logbook pepa predict run.json --arch fair --write-model fair.pepa`,
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return cliutil.Usagef("which run? (the JSON of logbook loadtest tickets -o json)")
			case len(args) > 1:
				return cliutil.Usagef("unexpected arguments: %s", strings.Join(args[1:], " "))
			}
			return nil
		},
	}
	fs := cmd.Flags()
	var opt ticketmodel.Options
	fs.StringVar(&opt.Arch, "arch", "", "model this architecture instead of the run's (micro, queue, queue-rep, fair)")
	fs.IntVar(&opt.Places, "places", 0, "places in the model's pool (default: the run's workers for queue and queue-rep; per sport, 20 for fair and 40 for micro)")
	writeModel := fs.String("write-model", "", "write the model (its rates calibrated with the last step) to this .pepa file")
	_ = cmd.RegisterFlagCompletionFunc("arch", cobra.FixedCompletions([]string{"micro", "queue", "queue-rep", "fair"}, cobra.ShellCompDirectiveNoFileComp))
	out := cliutil.OutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if opt.Places < 0 {
			return cliutil.Usage("--places must be positive (0: the default)")
		}
		raw, err := os.ReadFile(args[0])
		if err != nil {
			return err
		}
		var run loadtest.TicketsResult
		if err := json.Unmarshal(raw, &run); err != nil {
			return fmt.Errorf("%s: not the JSON of loadtest tickets: %w", args[0], err)
		}
		if len(run.Steps) == 0 {
			return fmt.Errorf("%s: the run has no steps", args[0])
		}
		p, err := ticketmodel.Predict(cmd.Context(), run, opt)
		if err != nil {
			return fmt.Errorf("%s: %w", args[0], err)
		}
		if *writeModel != "" {
			m, err := pepa.Parse(p.Model)
			if err != nil {
				return err
			}
			f, err := os.Create(*writeModel)
			if err != nil {
				return err
			}
			last := p.Steps[len(p.Steps)-1]
			werr := pepa.WriteCalibrated(f, m, last.Rates, fmt.Sprintf("%s, step ×%g", args[0], last.Multiplier))
			if err := f.Close(); werr == nil {
				werr = err
			}
			if werr != nil {
				return werr
			}
		}
		if out.JSON() {
			return writeJSON(e.Stdout, p)
		}
		keys := append(append([]string(nil), run.Sports...), "control")
		if out.Format() == cliutil.CSV {
			rows := cliutil.Rows{Header: []string{"multiplier"}}
			for _, k := range keys {
				if _, ok := p.Steps[0].Sports[k]; ok {
					rows.Header = append(rows.Header, k+" measured", k+" predicted", k+" error %")
				}
			}
			rows.Header = append(rows.Header, "states")
			g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
			for _, st := range p.Steps {
				row := []string{g(st.Multiplier)}
				for _, k := range keys {
					if pt, ok := st.Sports[k]; ok {
						row = append(row, g(pt.Measured), g(pt.Predicted), g(pt.Error))
					}
				}
				rows.Rows = append(rows.Rows, append(row, strconv.Itoa(st.States)))
			}
			return out.Print(e.Stdout, p, rows)
		}
		tw := tabwriter.NewWriter(e.Stdout, 0, 8, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "multiplier\t")
		for _, k := range keys {
			if _, ok := p.Steps[0].Sports[k]; ok {
				fmt.Fprintf(tw, "%s measured\tpredicted\terror %%\t", k)
			}
		}
		fmt.Fprintln(tw, "states\t")
		for _, st := range p.Steps {
			fmt.Fprintf(tw, "%g\t", st.Multiplier)
			for _, k := range keys {
				if pt, ok := st.Sports[k]; ok {
					fmt.Fprintf(tw, "%.2f\t%.2f\t%+.1f\t", pt.Measured, pt.Predicted, pt.Error)
				}
			}
			fmt.Fprintf(tw, "%d\t\n", st.States)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(e.Stdout, "\narch %s (model of %s, %d places); largest error of any sport %.1f %%\n", run.Arch, p.Arch, p.Places, p.MaxAbsError)
		return nil
	}
	return cmd
}
