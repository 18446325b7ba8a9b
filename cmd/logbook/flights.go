package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/internal/progress"
	"github.com/logbook/logbook/services/flights"
)

func newFlightsCmd(e *env) *cobra.Command {
	g := group("flights", "Serve the flights service and manage its schedules",
		newServeCmd(e),
		newFlightsGenerateCmd(e),
		newFlightsImportCmd(e),
		newFlightsCheckCmd(e),
		newFlightsExportCmd(e),
	)
	g.Long = `The flights service keeps an airline's flight schedule — legs chained into
aircraft rotations — as event-sourced aggregates, and validates it
continuously (continuity, minimum ground time, duplicate designators).
serve runs it; generate, import, check and export fill and read its store.`
	return g
}

func newFlightsGenerateCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "generate --out DIR",
		Short: "Generate a season's schedule with injected violations",
		Long: `Generates a season's flight schedule as an SSIM file (schedule.ssim) and a
rotation file (rotations.csv), with a share of legs given each kind of
violation the service checks, for a try-out or a load test.`,
		Example: `  logbook flights generate --out ./season
  logbook flights generate --out ./small --weeks 4 --flights-per-week 1000`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	out := fs.String("out", "", "directory to write schedule.ssim and rotations.csv into (required)")
	_ = cmd.MarkFlagRequired("out")
	var cfg flights.GenerateOptions
	fs.IntVar(&cfg.Weeks, "weeks", 31, "weeks in the season")
	fs.IntVar(&cfg.FlightsPerWeek, "flights-per-week", 12_850, "flights a week")
	fs.Float64Var(&cfg.Violations, "violations", 0.01, "fraction of legs given each kind of violation (0–0.2)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed")
	o := cliutil.OutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return runFlightsGenerate(cmd, e, *out, cfg, o)
	}
	return cmd
}

func runFlightsGenerate(cmd *cobra.Command, e *env, out string, cfg flights.GenerateOptions, o *cliutil.Output) error {
	if cfg.Weeks <= 0 || cfg.FlightsPerWeek <= 0 || cfg.Violations < 0 || cfg.Violations > 0.2 {
		return usageError{Msg: "--weeks and --flights-per-week must be positive, --violations within 0–0.2"}
	}
	start := time.Now()
	prog, stopProgress := e.showProgress(cmd, o.Quiet())
	prog.Start("generating legs", 0)
	g, err := flights.GenerateSchedule(cfg)
	if err != nil {
		stopProgress()
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		stopProgress()
		return err
	}
	prog.Start("bytes written", 0)
	err = writeFiles(filepath.Join(out, "schedule.ssim"), filepath.Join(out, "rotations.csv"), func(s, r io.Writer) error {
		return flights.WriteSchedule(countingWriter{s, prog}, countingWriter{r, prog}, g.Airline, g.Rotations)
	})
	stopProgress()
	if err != nil {
		return err
	}
	res := struct {
		Legs                        int     `json:"legs"`
		Rotations                   int     `json:"rotations"`
		InjectedContinuity          int     `json:"injected_continuity"`
		InjectedMinGroundTime       int     `json:"injected_min_ground_time"`
		InjectedDuplicateDesignator int     `json:"injected_duplicate_designator"`
		Schedule                    string  `json:"schedule"`
		RotationFile                string  `json:"rotation_file"`
		Seconds                     float64 `json:"seconds"`
	}{g.Injected.Legs, g.Injected.Rotations, g.Injected.Continuity, g.Injected.MinGroundTime, g.Injected.DuplicateDesignator,
		filepath.Join(out, "schedule.ssim"), filepath.Join(out, "rotations.csv"), time.Since(start).Seconds()}
	return o.Print(e.stdout, res, cliutil.Pairs([][2]string{
		{"legs", fmt.Sprint(res.Legs)},
		{"rotations", fmt.Sprint(res.Rotations)},
		{"injected continuity / ground time / duplicate designator", fmt.Sprintf("%d / %d / %d", res.InjectedContinuity, res.InjectedMinGroundTime, res.InjectedDuplicateDesignator)},
		{"files", res.Schedule + ", " + res.RotationFile},
	}))
}

// countingWriter counts the bytes written through it as progress.
type countingWriter struct {
	w io.Writer
	c *progress.Counter
}

func (cw countingWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.c.Add(n)
	return n, err
}

// writeFiles writes two files through temporary names, so that a failure
// leaves no half-written file behind.
func writeFiles(a, b string, write func(a, b io.Writer) error) error {
	fa, err := os.CreateTemp(filepath.Dir(a), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(fa.Name())
	fb, err := os.CreateTemp(filepath.Dir(b), ".tmp-*")
	if err != nil {
		fa.Close()
		return err
	}
	defer os.Remove(fb.Name())
	// CreateTemp makes files only the owner may read; these are for sharing.
	if err := errors.Join(fa.Chmod(0o644), fb.Chmod(0o644)); err != nil {
		fa.Close()
		fb.Close()
		return err
	}
	wa, wb := bufio.NewWriterSize(fa, 1<<20), bufio.NewWriterSize(fb, 1<<20)
	err = write(wa, wb)
	err = errors.Join(err, wa.Flush(), wb.Flush(), fa.Close(), fb.Close())
	if err != nil {
		return err
	}
	return errors.Join(os.Rename(fa.Name(), a), os.Rename(fb.Name(), b))
}

func newFlightsImportCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import --ssim FILE",
		Short: "Import an SSIM schedule and its rotations into the store",
		Long: `Imports a schedule in IATA's SSIM format (chapter 7 records, see
docs/ssim.md) and, optionally, a rotation file into the flights service's
store. Rejected records are listed on stderr; --strict stops at the first.`,
		Example: `  logbook flights import --ssim season/schedule.ssim --rotations season/rotations.csv
  logbook flights import --store postgres://localhost/logbook --ssim schedule.ssim -o json`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	var sf storeFlags
	sf.register(fs, "./data")
	ssimFile := fs.String("ssim", "", "SSIM file to import (required)")
	_ = cmd.MarkFlagRequired("ssim")
	rotFile := fs.String("rotations", "", "rotation file (CSV, see docs/ssim.md); without it legs are chained by their onward flights")
	strict := fs.Bool("strict", false, "stop at the first rejected record")
	o := cliutil.OutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return runFlightsImport(cmd, e, &sf, *ssimFile, *rotFile, *strict, o)
	}
	return cmd
}

func runFlightsImport(cmd *cobra.Command, e *env, sf *storeFlags, ssimFile, rotFile string, strict bool, o *cliutil.Output) error {
	ctx := cmd.Context()
	sched, err := os.Open(ssimFile)
	if err != nil {
		return err
	}
	defer sched.Close()
	var rots io.Reader
	if rotFile != "" {
		f, err := os.Open(rotFile)
		if err != nil {
			return err
		}
		defer f.Close()
		rots = bufio.NewReaderSize(f, 1<<20)
	}
	s, err := sf.open(e.log)
	if err != nil {
		return err
	}
	defer s.Close()
	svc, err := flights.New(ctx, s, serviceOptions(e))
	if err != nil {
		return err
	}
	defer svc.Close()
	opts := flights.ImportOptions{Strict: strict}
	prog, stopProgress := e.showProgress(cmd, o.Quiet())
	if prog != nil {
		prog.Start("legs", 0)
		opts.Progress = prog.Set
	}
	res, err := flights.Import(ctx, svc, bufio.NewReaderSize(sched, 1<<20), rots, opts)
	stopProgress()
	if !o.JSON() {
		for _, r := range res.Rejections {
			fmt.Fprintf(e.stderr, "rejected: line %d: %s\n", r.Line, r.Reason)
		}
	}
	if err != nil {
		if o.JSON() {
			_ = cliutil.WriteJSON(e.stdout, res)
		}
		return err
	}
	return o.Print(e.stdout, res, cliutil.Pairs([][2]string{
		{"records", fmt.Sprint(res.Records)},
		{"flight leg records", fmt.Sprint(res.FlightLegRecords)},
		{"dated legs", fmt.Sprint(res.DatedLegs)},
		{"legs imported", fmt.Sprint(res.LegsImported)},
		{"rotations", fmt.Sprint(res.Rotations)},
		{"rejected", fmt.Sprint(res.Rejected)},
		{"seconds", fmt.Sprintf("%.2f", res.Seconds)},
	}))
}

// openService opens the store and the flights service, waiting for the
// validation view to catch up with the log.
func openService(ctx context.Context, e *env, sf *storeFlags) (*openedStore, *flights.Service, error) {
	s, err := sf.open(e.log)
	if err != nil {
		return nil, nil, err
	}
	svc, err := flights.New(ctx, s, serviceOptions(e))
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	if err := svc.Validation.WaitCaughtUp(ctx); err != nil {
		svc.Close()
		s.Close()
		return nil, nil, fmt.Errorf("validation view: %w", err)
	}
	return s, svc, nil
}

func newFlightsCheckCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Count the stored schedule's violations of each check",
		Long: `Opens the flights service's store, lets its validation view catch up with
the log, and prints how many legs break each check: continuity (a leg leaves
from where the last one arrived), minimum ground time, and duplicate flight
designators.`,
		Example: `  logbook flights check --data ./data
  logbook flights check --store postgres://localhost/logbook -o json`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	var sf storeFlags
	sf.register(fs, "./data")
	o := cliutil.OutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return runFlightsCheck(cmd.Context(), e, &sf, o)
	}
	return cmd
}

func runFlightsCheck(ctx context.Context, e *env, sf *storeFlags, o *cliutil.Output) error {
	start := time.Now()
	s, svc, err := openService(ctx, e, sf)
	if err != nil {
		return err
	}
	defer s.Close()
	defer svc.Close()
	v := svc.Validation.Current()
	c, pos := v.Counts()
	st := v.Stats()
	res := struct {
		flights.CheckCounts
		Valid    bool    `json:"valid"`
		Position uint64  `json:"position"`
		Seconds  float64 `json:"seconds"`
	}{flights.CheckCounts{Legs: st.Legs, Rotations: st.Rotations, Continuity: c.Continuity, MinGroundTime: c.MinGroundTime, DuplicateDesignator: c.DuplicateDesignator},
		c.Total == 0, pos, time.Since(start).Seconds()}
	return o.Print(e.stdout, res, cliutil.Pairs([][2]string{
		{"legs / rotations", fmt.Sprintf("%d / %d", st.Legs, st.Rotations)},
		{"continuity", fmt.Sprint(c.Continuity)},
		{"min ground time", fmt.Sprint(c.MinGroundTime)},
		{"duplicate designator", fmt.Sprint(c.DuplicateDesignator)},
		{"valid", fmt.Sprint(c.Total == 0)},
	}))
}

func newFlightsExportCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "export --out DIR",
		Short:   "Write the stored schedule as SSIM and a rotation file",
		Example: `  logbook flights export --data ./data --out ./exported`,
		Args:    noArgs,
	}
	fs := cmd.Flags()
	var sf storeFlags
	sf.register(fs, "./data")
	out := fs.String("out", "", "directory to write schedule.ssim and rotations.csv into (required)")
	_ = cmd.MarkFlagRequired("out")
	o := cliutil.OutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return runFlightsExport(cmd.Context(), e, &sf, *out, o)
	}
	return cmd
}

func runFlightsExport(ctx context.Context, e *env, sf *storeFlags, out string, o *cliutil.Output) error {
	s, svc, err := openService(ctx, e, sf)
	if err != nil {
		return err
	}
	defer s.Close()
	defer svc.Close()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var n int
	err = writeFiles(filepath.Join(out, "schedule.ssim"), filepath.Join(out, "rotations.csv"), func(a, b io.Writer) error {
		var err error
		n, err = flights.Export(svc.Validation.Current(), a, b)
		return err
	})
	if err != nil {
		return err
	}
	res := struct {
		Legs int    `json:"legs"`
		Dir  string `json:"dir"`
	}{n, out}
	return o.Print(e.stdout, res, cliutil.Pairs([][2]string{{"legs exported", fmt.Sprint(n)}, {"directory", out}}))
}
