package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/lab/pepa"
	"github.com/logbook/logbook/lab/plot"
)

// newPepaCmd is `logbook pepa solve|sweep|ode|sim MODEL.pepa …`: the
// PEPA tool of lab/pepa.
func newPepaCmd(e *env) *cobra.Command {
	g := cliutil.Group("pepa", "Solve PEPA performance models",
		newPepaSolveCmd(e),
		newPepaSweepCmd(e),
		newPepaODECmd(e),
		newPepaSimCmd(e),
		newPepaPredictCmd(e),
	)
	g.Long = `A tool for models in PEPA, the Performance Evaluation Process Algebra
(Jane Hillston, "A Compositional Approach to Performance Modelling", 1996),
in the syntax of the PEPA Eclipse plug-in: the steady state (solve), a sweep
of one rate (sweep), the fluid approximation (ode), simulation (sim), and
the tickets service's model calibrated with a load test (predict). The
models of docs/models/ are those of Stephen Shephard's "Performance
modelling and simulation of skewed demand in complex systems" (2017).`
	return g
}

// oneModel takes exactly one argument, the model file.
func oneModel(_ *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return cliutil.Usagef("which model? (a .pepa file)")
	case len(args) > 1:
		return cliutil.Usagef("unexpected arguments: %s", strings.Join(args[1:], " "))
	}
	return nil
}

// rateSet is the repeatable --set name=value flag.
type rateSet map[string]float64

func (r rateSet) String() string { return fmt.Sprint(map[string]float64(r)) }

func (r rateSet) Type() string { return "name=value" }

func (r rateSet) Set(s string) error {
	name, val, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("want name=value, not %q", s)
	}
	v, err := strconv.ParseFloat(val, 64)
	if err != nil {
		return fmt.Errorf("%s: %q is not a number", name, val)
	}
	r[name] = v
	return nil
}

// loadPepa reads and checks a model; errors name the file, line and column.
func loadPepa(e *env, path string, set rateSet) (*pepa.Model, *pepa.System, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	m, err := pepa.Parse(string(src))
	if err != nil {
		return nil, nil, fmt.Errorf("%s:%v", path, err)
	}
	s, err := pepa.Check(m, set)
	if err != nil {
		if _, ok := err.(*pepa.Error); ok {
			return nil, nil, fmt.Errorf("%s:%v", path, err)
		}
		return nil, nil, err
	}
	for _, w := range s.Warnings {
		fmt.Fprintf(e.Stderr, "%s:%s (warning)\n", path, w)
	}
	return m, s, nil
}

// writeJSON writes v as indented JSON: the models' results are read by
// people as often as by machines.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newPepaSolveCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "solve MODEL.pepa",
		Short: "Solve a model's steady state: throughput and utilisation",
		Long: `Derives the model's state space and solves its steady state by
Gauss–Seidel iteration: the throughput of every action and the utilisation
of every local state (and the mean population of arrays).`,
		Example: `  logbook pepa solve docs/models/shared_queue.pepa --set a=10`,
		Args:    oneModel,
	}
	fs := cmd.Flags()
	set := rateSet{}
	fs.Var(set, "set", "set a rate definition, name=value (repeatable)")
	var opt pepa.SolveOptions
	fs.Float64Var(&opt.Tolerance, "tolerance", 1e-10, "stop when the residual max|πQ| is at most this")
	fs.IntVar(&opt.MaxIterations, "max-iterations", 100000, "give up after this many Gauss–Seidel sweeps")
	fs.Float64Var(&opt.Omega, "omega", 1, "over-relaxation factor in (0, 2); 1 is Gauss–Seidel")
	out := cliutil.OutputFlag(cmd, cliutil.Table, cliutil.JSON)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, path := cmd.Context(), args[0]
		if !(opt.Tolerance > 0) || opt.MaxIterations <= 0 || !(opt.Omega > 0 && opt.Omega < 2) {
			return cliutil.Usage("--tolerance and --max-iterations must be positive, --omega in (0, 2)")
		}
		_, s, err := loadPepa(e, path, set)
		if err != nil {
			return err
		}
		r, err := s.Solve(ctx, opt)
		if err != nil {
			return err
		}
		if out.JSON() {
			return writeJSON(e.Stdout, r)
		}
		fmt.Fprintf(e.Stdout, "states %d, transitions %d, residual %.3g after %d iterations, %.3f s\n\n", r.States, r.Transitions, r.Residual, r.Iterations, r.Seconds)
		printMeasures(e.Stdout, s.Actions(), r.Measures)
		return nil
	}
	return cmd
}

func printMeasures(w io.Writer, actions []string, m pepa.Measures) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "action\tthroughput")
	for _, a := range actions {
		fmt.Fprintf(tw, "%s\t%.6g\n", a, m.Throughput[a])
	}
	fmt.Fprintln(tw, "\ncomponent\tlocal state\tutilisation\tmean population")
	for _, c := range sortedNames(m.Utilisation) {
		for _, ls := range sortedNames(m.Utilisation[c]) {
			pop := ""
			if p, ok := m.Populations[c]; ok {
				pop = fmt.Sprintf("%.6g", p[ls])
			}
			fmt.Fprintf(tw, "%s\t%s\t%.6g\t%s\n", c, ls, m.Utilisation[c][ls], pop)
		}
	}
	tw.Flush()
}

func sortedNames[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func newPepaSweepCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sweep MODEL.pepa",
		Short: "Solve a model for each value of one rate",
		Long: `Solves the model's steady state for each value of the rate definition
--param from --from to --to by --step, and prints the throughput of each
action, one row per value (as the published tables print them, to two
decimals; -o csv and -o json give every digit). --plot draws it.`,
		Example: `  logbook pepa sweep docs/models/shared_queue.pepa --param a --from 1 --to 10
  logbook pepa sweep docs/models/shared_queue.pepa --param a -o csv > sweep.csv`,
		Args: oneModel,
	}
	fs := cmd.Flags()
	set := rateSet{}
	fs.Var(set, "set", "set another rate definition, name=value (repeatable)")
	param := fs.String("param", "", "the rate definition to vary (required)")
	_ = cmd.MarkFlagRequired("param")
	from := fs.Float64("from", 1, "first value")
	to := fs.Float64("to", 10, "last value")
	step := fs.Float64("step", 1, "step between values")
	actions := fs.String("actions", "", "comma-separated actions to report (default: all)")
	out := cliutil.OutputFlag(cmd)
	out.Alias(cmd, "csv", cliutil.CSV)
	_ = fs.MarkHidden("csv") // -o csv; --csv kept for old scripts
	cmd.MarkFlagsMutuallyExclusive("output", "json", "csv")
	plotFile := fs.String("plot", "", "also draw each action's throughput against the parameter into this .svg or .png file")
	var opt pepa.SolveOptions
	fs.Float64Var(&opt.Tolerance, "tolerance", 1e-10, "the solver's residual bound")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, path := cmd.Context(), args[0]
		if *plotFile != "" {
			if err := plot.CheckFile(*plotFile); err != nil {
				return cliutil.Usagef("--plot %v", err)
			}
		}
		values, err := pepa.Steps(*from, *to, *step)
		if err != nil {
			return cliutil.Usage(err.Error())
		}
		m, s, err := loadPepa(e, path, set)
		if err != nil {
			return err
		}
		cols := s.Actions()
		if *actions != "" {
			known := map[string]bool{}
			for _, a := range cols {
				known[a] = true
			}
			cols = strings.Split(*actions, ",")
			for _, a := range cols {
				if !known[a] {
					return cliutil.Usage(fmt.Sprintf("--actions: the model has no action %q (actions: %s)", a, strings.Join(s.Actions(), ", ")))
				}
			}
		}
		rows, err := pepa.Sweep(ctx, m, set, *param, values, opt)
		if err != nil {
			return err
		}
		if *plotFile != "" {
			if err := plot.Save(*plotFile, sweepFigure(path, *param, cols, rows)); err != nil {
				return fmt.Errorf("--plot: %w", err)
			}
		}
		switch out.Format() {
		case cliutil.JSON:
			out := struct {
				Param string           `json:"param"`
				Rows  []map[string]any `json:"rows"`
			}{Param: *param}
			for _, r := range rows {
				row := map[string]any{*param: r.Value}
				for _, a := range cols {
					row[a] = r.Throughput[a]
				}
				out.Rows = append(out.Rows, row)
			}
			return writeJSON(e.Stdout, out)
		case cliutil.CSV:
			w := csv.NewWriter(e.Stdout)
			w.Write(append([]string{*param}, cols...))
			for _, r := range rows {
				rec := []string{strconv.FormatFloat(r.Value, 'g', -1, 64)}
				for _, a := range cols {
					rec = append(rec, strconv.FormatFloat(r.Throughput[a], 'g', -1, 64))
				}
				w.Write(rec)
			}
			w.Flush()
			return w.Error()
		}
		// Text: two decimals, as the published tables print them.
		tw := tabwriter.NewWriter(e.Stdout, 0, 8, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, *param+"\t"+strings.Join(cols, "\t")+"\t")
		for _, r := range rows {
			fmt.Fprintf(tw, "%g\t", r.Value)
			for _, a := range cols {
				fmt.Fprintf(tw, "%.2f\t", r.Throughput[a])
			}
			fmt.Fprintln(tw)
		}
		return tw.Flush()
	}
	return cmd
}

func newPepaODECmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ode MODEL.pepa",
		Short: "Integrate a model's fluid (ODE) approximation to steady state",
		Long: `Integrates the fluid approximation of the model — ordinary differential
equations for the mean population of each local state — until it is
steady: implicit (backward Euler, for stiff models and large populations),
rk4 (explicit Runge–Kutta) or closure (means and covariances, the normal
moment closure of Hayden and Bradley's "A fluid analysis framework for a
Markovian process algebra", 2010, for small populations). It exits 1 if
the solution was not steady when it stopped.`,
		Example: `  logbook pepa ode docs/models/shared_queue.pepa --set a=10
  logbook pepa ode docs/models/shared_queue.pepa --method closure`,
		Args: oneModel,
	}
	fs := cmd.Flags()
	set := rateSet{}
	fs.Var(set, "set", "set a rate definition, name=value (repeatable)")
	var opt pepa.FluidOptions
	fs.Float64Var(&opt.Step, "step", 0, "integration step (default 0.5 / the fastest rate; closure: 0.25 / the largest exit rate of a local state)")
	fs.Float64Var(&opt.Tolerance, "tolerance", 1e-5, "steady when window means change by at most this, relative")
	fs.Float64Var(&opt.MaxTime, "max-time", 0, "give up after this much model time (default 1e7 for rk4 and closure, 1e12 for implicit)")
	fs.Float64Var(&opt.Top, "top", 1e4, "implicit: a passive side with fewer than 1/top copies enabling an action slows its partner in proportion")
	method := fs.String("method", "implicit", "implicit (backward Euler with growing steps, for stiff models and large populations), rk4 (explicit Runge–Kutta, window means) or closure (means and covariances, normal moment closure: second order, for small populations)")
	_ = cmd.RegisterFlagCompletionFunc("method", cobra.FixedCompletions([]string{"implicit", "rk4", "closure"}, cobra.ShellCompDirectiveNoFileComp))
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this much wall-clock time")
	out := cliutil.OutputFlag(cmd, cliutil.Table, cliutil.JSON)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, path := cmd.Context(), args[0]
		if opt.Step < 0 || !(opt.Tolerance > 0) || opt.MaxTime < 0 || !(opt.Top > 0) || *timeout <= 0 {
			return cliutil.Usage("--step and --max-time must not be negative; --tolerance, --top and --timeout must be positive")
		}
		solve := map[string]func(*pepa.System, context.Context, pepa.FluidOptions) (*pepa.FluidResult, error){
			"implicit": (*pepa.System).FluidImplicit, "rk4": (*pepa.System).Fluid, "closure": (*pepa.System).Closure,
		}[*method]
		if solve == nil {
			return cliutil.Usage(fmt.Sprintf("--method %q: implicit, rk4 or closure", *method))
		}
		_, s, err := loadPepa(e, path, set)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		r, err := solve(s, ctx, opt)
		if err != nil {
			return err
		}
		if out.JSON() {
			if err := writeJSON(e.Stdout, r); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(e.Stdout, "fluid approximation (%s): t = %g after %d steps (last %g), converged %v (last change %.3g), %.3f s\n\n", r.Method, r.Time, r.Steps, r.Step, r.Converged, r.Change, r.Seconds)
			printMeasures(e.Stdout, s.Actions(), r.Measures)
		}
		if !r.Converged {
			return fmt.Errorf("not at steady state when stopped (change %.3g > %g): raise --timeout or --max-time", r.Change, opt.Tolerance)
		}
		return nil
	}
	return cmd
}

func newPepaSimCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim MODEL.pepa",
		Short: "Simulate a model (Gillespie) with 95 % confidence intervals",
		Long: `Simulates the model's Markov chain event by event (Gillespie's method) for
--time units of model time after a --warmup, and prints each action's
throughput with a 95 % confidence interval from --batches batch means.`,
		Example: `  logbook pepa sim docs/models/shared_queue.pepa --set a=10 --time 100000 --seed 3`,
		Args:    oneModel,
	}
	fs := cmd.Flags()
	set := rateSet{}
	fs.Var(set, "set", "set a rate definition, name=value (repeatable)")
	var opt pepa.SimOptions
	fs.Uint64Var(&opt.Seed, "seed", 1, "random seed: the same seed gives the same run")
	fs.Float64Var(&opt.Time, "time", 10000, "model time measured")
	fs.Float64Var(&opt.Warmup, "warmup", 0, "model time discarded first (default: --time / 10)")
	fs.IntVar(&opt.Batches, "batches", 20, "batches for the 95 % confidence interval")
	out := cliutil.OutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, path := cmd.Context(), args[0]
		if !(opt.Time > 0) || opt.Warmup < 0 || opt.Batches < 2 {
			return cliutil.Usage("--time must be positive, --warmup not negative, --batches at least 2")
		}
		_, s, err := loadPepa(e, path, set)
		if err != nil {
			return err
		}
		r, err := s.Simulate(ctx, opt)
		if err != nil {
			return err
		}
		switch out.Format() {
		case cliutil.JSON:
			return writeJSON(e.Stdout, r)
		case cliutil.CSV:
			rows := cliutil.Rows{Header: []string{"action", "throughput", "half_width_95"}}
			for _, a := range s.Actions() {
				est := r.Throughput[a]
				rows.Rows = append(rows.Rows, []string{a, strconv.FormatFloat(est.Mean, 'g', -1, 64), strconv.FormatFloat(est.HalfWidth, 'g', -1, 64)})
			}
			return out.Print(e.Stdout, r, rows)
		}
		fmt.Fprintf(e.Stdout, "%d events, %.3f s\n\n", r.Events, r.Seconds)
		tw := tabwriter.NewWriter(e.Stdout, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "action\tthroughput\t95 % confidence")
		for _, a := range s.Actions() {
			est := r.Throughput[a]
			fmt.Fprintf(tw, "%s\t%.6g\t± %.3g\n", a, est.Mean, est.HalfWidth)
		}
		return tw.Flush()
	}
	return cmd
}

// sweepFigure draws a sweep as the model tables' figures are drawn: each
// action's throughput against the swept rate.
func sweepFigure(model, param string, actions []string, rows []pepa.SweepRow) plot.Figure {
	panel := plot.Panel{YLabel: "throughput (per time unit)"}
	for _, a := range actions {
		s := plot.Series{Name: a}
		for _, r := range rows {
			s.X = append(s.X, r.Value)
			s.Y = append(s.Y, r.Throughput[a])
		}
		panel.Series = append(panel.Series, s)
	}
	return plot.Figure{Title: filepath.Base(model), XLabel: param, Panels: []plot.Panel{panel}}
}
