package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/lab/bench"
	"github.com/logbook/logbook/lab/plot"
)

func newBenchScalingCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scaling --mode capacity|read|write",
		Short: "The flights thesis's capacity and scaling tables, each process on a CPU quota",
		Long: `Runs the scaling experiments of the flights thesis (Tables 6.1–6.3) on this
machine with logbook cluster's CPU quotas, so that each node, nginx and
PostgreSQL has a budget of its own, as if on a machine of its own, and the
nodes, not the shared cores, are what runs out (needs root). It starts
PostgreSQL (or uses --store), nginx and the nodes itself, and prints the
thesis's value beside each row.

  capacity  one replica; each offered read rate of --rates for --reps
            repetitions; the knee is the highest rate whose p99 stays within
            2× the lowest rate's p99 with at most 0.1 % failures
  read      1 write node and n replicas (--nodes), offered the knee × n
            (measured first unless --knee is given) for --reps
            repetitions, their percentiles averaged
  write     n write nodes (commands only) and 1 replica keeping the view; the thesis's two scenarios (1,250 planners × 750
            legs, 1,500 × 1,000), planners and legs each scaled by --scale
            (or the planners by --planner-scale and the legs alone by
            --scale), each run once to warm up, then after --pause once
            measured

Reads go one at a time on a connection each, as separate users' would
(rate ÷ 20 connections dialled up front, at least 16, and another opened
whenever none is idle): pipelined, nginx would answer a connection's
requests in turn and one slow replica would hold up the others'.

Each row reports each kind of process's CPU use (node, replica, store,
proxy, loadgen) as CPU-seconds ÷ (wall time × quota): the thesis's CPU %
column, per quota; and, in --json, how long the kernel held each kind
stopped on a spent quota, per second (throttled). --predict calibrates a queueing
model from the one-node rows (CPU-seconds per request at each kind: the
service demand law) and prints its prediction beside each row (open
network for reads; for the closed write workload exact mean-value
analysis, where nodes are the bottleneck scaled by the planners on the
busiest node, since a planner's commands all go to one node), and with
--predict-nodes a table of larger clusters that were not run: a
prediction, not a measurement.`,
		Example: `  logbook bench scaling --mode capacity --node-cpus 0.25 --rates 100,200,400,600,800 --reps 2
  logbook bench scaling --mode read --nodes 1,2,4 --node-cpus 0.15 --knee 400 --predict
  logbook bench scaling --mode write --nodes 1,2,4 --node-cpus 0.2 --store-cpus 0.5 --scale 0.05 --json`,
		Args: cliutil.NoArgs,
	}
	fs := cmd.Flags()
	var cfg bench.ScalingConfig
	fs.StringVar(&cfg.Mode, "mode", "", "capacity, read or write (required)")
	nodes := fs.String("nodes", "1,2,4,8", "node counts (read, write)")
	fs.Float64Var(&cfg.Budget.Node, "node-cpus", 0.15, "CPU quota of each write node and replica")
	fs.Float64Var(&cfg.Budget.Store, "store-cpus", 0.5, "CPU quota of PostgreSQL (with --store: what it is taken to have, not enforced)")
	fs.Float64Var(&cfg.Budget.Proxy, "proxy-cpus", 0.25, "CPU quota of nginx")
	fs.Float64Var(&cfg.Budget.Loadgen, "loadgen-cpus", 0, "CPU quota of this command, the load generator (0: none)")
	fs.BoolVar(&cfg.ShortPeriods, "short-periods", false, "give each quota the kernel's shortest period (10 ms from 0.1 CPUs up, 20 ms at 0.05) instead of its default 100 ms: a part that spent its quota then waits at most 9 ms rather than 90, which latency percentiles see")
	fs.BoolVar(&cfg.Budget.Oversubscribe, "oversubscribe", false, "run even when the quotas at the largest --nodes add up to more than the machine's CPUs")
	fs.StringVar(&cfg.Store, "store", "", "postgres:// URL to use (a fresh schema) instead of starting PostgreSQL")
	cliutil.SecretFlag(fs, "store")
	rates := fs.String("rates", "100,200,300,400,600,800", "capacity: offered read rates, requests/s")
	fs.IntVar(&cfg.Reps, "reps", 5, "capacity: repetitions per rate; read: per node count")
	fs.Float64Var(&cfg.Knee, "knee", 0, "read: one node's knee, requests/s (0: measure it first)")
	fs.DurationVar(&cfg.Ramp, "ramp", 5*time.Second, "read: ramp to the rate; not measured")
	fs.DurationVar(&cfg.Hold, "hold", 30*time.Second, "read: hold the rate; measured (long enough to take in a replica's garbage collections, which a quota turns into stops)")
	fs.Float64Var(&cfg.Scale, "scale", 0.05, "write: the factor scaling the thesis's planners and legs")
	fs.Float64Var(&cfg.PlannerScale, "planner-scale", 0, "write: scale the planners by this instead, and the legs alone by --scale (1: the thesis's 1,250 and 1,500 planners)")
	fs.DurationVar(&cfg.Pause, "pause", 10*time.Second, "write: pause between the warm-up run and the measured one (the thesis: 5 minutes)")
	fs.IntVar(&cfg.Weeks, "weeks", 2, "the season: weeks")
	fs.IntVar(&cfg.Flights, "flights-per-week", 500, "the season: flights a week (small, so that 8 replicas replay it within a minute on their quotas)")
	doPredict := fs.Bool("predict", false, "print the model's prediction beside each row")
	predictNodes := fs.String("predict-nodes", "", "with --predict, also predict these node counts, e.g. 16,32,64")
	plotFile := fs.String("plot", "", "draw throughput and p99 against nodes (or offered rate) into this .svg or .png file")
	fs.StringVar(&cfg.Dir, "dir", filepath.Join(os.TempDir(), "logbook-scaling"), "directory for the nodes' logs and the season")
	fs.StringVar(&cfg.RunDir, "run-dir", "", "where the run records its processes for clean-up (default /run/logbook-cluster)")
	nginx := fs.String("nginx", "/usr/sbin/nginx", "the nginx binary")
	out := cliutil.OutputFlag(cmd, cliutil.Table, cliutil.JSON)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		switch cfg.Mode {
		case "capacity", "read", "write":
		default:
			return cliutil.Usagef("--mode %q: capacity, read or write", cfg.Mode)
		}
		var err error
		if cfg.Nodes, err = intList(*nodes); err != nil {
			return cliutil.Usagef("--nodes: %v", err)
		}
		if cfg.Rates, err = floatList(*rates); err != nil {
			return cliutil.Usagef("--rates: %v", err)
		}
		if *predictNodes != "" {
			if cfg.Predict, err = intList(*predictNodes); err != nil {
				return cliutil.Usagef("--predict-nodes: %v", err)
			}
			*doPredict = true
		}
		if cfg.Budget.Node <= 0 || cfg.Budget.Store < 0 || cfg.Budget.Proxy < 0 || cfg.Budget.Loadgen < 0 {
			return cliutil.Usage("--node-cpus must be positive; --store-cpus, --proxy-cpus and --loadgen-cpus not negative")
		}
		if cfg.Reps < 1 || cfg.Hold <= 0 || cfg.Ramp <= 0 || cfg.Scale <= 0 || cfg.Scale > 1 || cfg.PlannerScale < 0 || cfg.PlannerScale > 1 || cfg.Weeks < 1 || cfg.Flights < 1 || cfg.Pause < 0 {
			return cliutil.Usage("--reps, --hold, --ramp, --weeks and --flights-per-week must be positive, --scale in (0, 1], --planner-scale in [0, 1]")
		}
		if cfg.Store != "" && !cliutil.IsPostgresURL(cfg.Store) {
			return cliutil.Usage("--store must be a postgres:// URL")
		}
		if *plotFile != "" {
			if err := plot.CheckFile(*plotFile); err != nil {
				return cliutil.Usagef("--plot %v", err)
			}
		}
		if err := cfg.Plan().Check(cfg.Budget.Oversubscribe); err != nil {
			return cliutil.Usage(err.Error())
		}
		if cfg.Binary, err = os.Executable(); err != nil {
			return err
		}
		cfg.Nginx = *nginx
		if !out.Quiet() {
			fmt.Fprintln(e.Stdout, "CPU plan at the largest configuration:")
			for _, l := range cfg.Plan().Lines() {
				fmt.Fprintln(e.Stdout, "  "+l)
			}
		}
		cfg.Log = e.Stderr
		res, err := bench.Scaling(cmd.Context(), cfg)
		if err != nil {
			return err
		}
		if !*doPredict {
			res.Demands, res.Prediction = nil, nil
			for i := range res.Rows {
				res.Rows[i].Predicted, res.Rows[i].PredictedP99 = nil, nil
			}
		}
		if *plotFile != "" {
			if err := plot.Save(*plotFile, scalingFigure(res)); err != nil {
				return fmt.Errorf("--plot: %w", err)
			}
		}
		if out.JSON() {
			return cliutil.WriteJSON(e.Stdout, res)
		}
		printScaling(e, res)
		return nil
	}
	return cmd
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive whole numbers, comma-separated", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func floatList(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || x < 1 {
			return nil, fmt.Errorf("%q: want numbers ≥ 1, comma-separated", s)
		}
		out = append(out, x)
	}
	return out, nil
}

func printScaling(e *env, res bench.ScalingResult) {
	w := e.Stdout
	fmt.Fprintf(w, "mode %s, %.2f CPUs per node on a %.2f-CPU machine; season %s\n", res.Mode, res.PerNodeCPUs, res.Machine, res.Season)
	if res.Scale > 0 {
		for _, sc := range res.Scenarios {
			fmt.Fprintf(w, "write scenario %s: %d planners × %d legs\n", sc.Name, sc.Planners, sc.Legs)
		}
	}
	if res.KneePerSec > 0 {
		fmt.Fprintf(w, "knee: %.0f requests/s\n", res.KneePerSec)
	}
	fmt.Fprintln(w, "nodes  scenario  offered/s  served/s  predicted/s  p50 ms  p95 ms  p99 ms  pred p99  failures  efficiency  CPU % of quota (node|replica store proxy loadgen)  store saturated  thesis /s  thesis p99")
	for _, r := range res.Rows {
		pred, pp99 := "-", "-"
		if r.Predicted != nil {
			pred = fmt.Sprintf("%.0f", *r.Predicted)
		}
		if r.PredictedP99 != nil {
			pp99 = fmt.Sprintf("%.1f", *r.PredictedP99)
		}
		node := r.CPU["replica"]
		if res.Mode == "write" {
			node = r.CPU["node"]
		}
		cpu := fmt.Sprintf("%.0f %.0f %.0f %.0f", 100*node.OfQuota, 100*r.CPU["store"].OfQuota, 100*r.CPU["proxy"].OfQuota, 100*r.CPU["loadgen"].OfQuota)
		th := "-"
		if r.ThesisPerSec > 0 {
			th = fmt.Sprintf("%.0f  %.0f", r.ThesisPerSec, r.ThesisP99)
		}
		fmt.Fprintf(w, "%5d  %-8s  %9.0f  %8.0f  %11s  %6.1f  %6.1f  %6.1f  %8s  %8d  %10.2f  %-47s  %-15v  %s\n",
			r.Nodes, r.Scenario, r.OfferedPerSec, r.AchievedPerSec, pred, r.P50, r.P95, r.P99, pp99, r.Failures, r.Efficiency, cpu, r.StoreSaturated, th)
		if r.WarmupPerSec > 0 {
			fmt.Fprintf(w, "       warm-up run: %.0f/s, p99 %.1f ms\n", r.WarmupPerSec, r.WarmupP99)
		}
		if r.StoreTxPerCommand > 0 {
			fmt.Fprintf(w, "       PostgreSQL: %.3f appending transactions per command (%.1f commands a batch)\n", r.StoreTxPerCommand, 1/r.StoreTxPerCommand)
		}
	}
	if len(res.Demands) > 0 {
		fmt.Fprint(w, "service demands (CPU-ms per request):")
		for _, d := range res.Demands {
			fmt.Fprintf(w, " %s %.3f", d.Kind, 1000*d.Seconds)
		}
		fmt.Fprintln(w)
	}
	if len(res.Prediction) > 0 {
		fmt.Fprintln(w, "PREDICTION (not measured): nodes, nginx and PostgreSQL each on a machine of this one's size, or PostgreSQL 4× as big")
		fmt.Fprintln(w, "nodes  node CPUs  store CPUs  predicted/s  bottleneck  store utilisation")
		for _, p := range res.Prediction {
			fmt.Fprintf(w, "%5d  %9.2f  %10.2f  %11.0f  %-10s  %.2f\n", p.Nodes, p.NodeCPUs, p.StoreCPUs, p.PerSec, p.Bottleneck, p.StoreUtil)
		}
	}
}

func scalingFigure(res bench.ScalingResult) plot.Figure {
	x := "nodes"
	if res.Mode == "capacity" {
		x = "offered requests/s"
	}
	series := map[string]*[2]plot.Series{}
	var order []string
	for _, r := range res.Rows {
		s := series[r.Scenario]
		if s == nil {
			name := "measured"
			if r.Scenario != "" {
				name = r.Scenario
			}
			s = &[2]plot.Series{{Name: name}, {Name: name}}
			series[r.Scenario] = s
			order = append(order, r.Scenario)
		}
		xv := float64(r.Nodes)
		if res.Mode == "capacity" {
			xv = r.OfferedPerSec
		}
		s[0].X, s[0].Y = append(s[0].X, xv), append(s[0].Y, r.AchievedPerSec)
		s[1].X, s[1].Y = append(s[1].X, xv), append(s[1].Y, r.P99)
	}
	f := plot.Figure{Title: "logbook bench scaling --mode " + res.Mode, XLabel: x,
		Panels: []plot.Panel{{YLabel: "served per second"}, {YLabel: "p99 ms"}}}
	for _, k := range order {
		f.Panels[0].Series = append(f.Panels[0].Series, series[k][0])
		f.Panels[1].Series = append(f.Panels[1].Series, series[k][1])
	}
	return f
}
