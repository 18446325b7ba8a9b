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

	"github.com/logbook/logbook/services/flights"
)

func runFlights(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "flights", []subcommand{
		{"generate", runFlightsGenerate},
		{"import", runFlightsImport},
		{"check", runFlightsCheck},
		{"export", runFlightsExport},
	}, false, args)
}

func runFlightsGenerate(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "flights generate", "flights generate --out DIR [--weeks W] [--flights-per-week F] [--violations FRACTION] [--seed N] [--json]")
	out := fs.String("out", "", "directory to write schedule.ssim and rotations.csv into")
	var cfg flights.GenerateConfig
	fs.IntVar(&cfg.Weeks, "weeks", 31, "weeks in the season")
	fs.IntVar(&cfg.FlightsPerWeek, "flights-per-week", 12_850, "flights a week")
	fs.Float64Var(&cfg.Violations, "violations", 0.01, "fraction of legs given each kind of violation (0–0.2)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usageError{"--out DIR is required"}
	}
	if cfg.Weeks <= 0 || cfg.FlightsPerWeek <= 0 || cfg.Violations < 0 || cfg.Violations > 0.2 {
		return usageError{"--weeks and --flights-per-week must be positive, --violations within 0–0.2"}
	}
	start := time.Now()
	g, err := flights.GenerateSchedule(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := writeFiles(filepath.Join(*out, "schedule.ssim"), filepath.Join(*out, "rotations.csv"), func(s, r io.Writer) error {
		return flights.WriteSchedule(s, r, g.Airline, g.Rotations)
	}); err != nil {
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
		filepath.Join(*out, "schedule.ssim"), filepath.Join(*out, "rotations.csv"), time.Since(start).Seconds()}
	return report(e.stdout, *asJSON, res, [][2]string{
		{"legs", fmt.Sprint(res.Legs)},
		{"rotations", fmt.Sprint(res.Rotations)},
		{"injected continuity / ground time / duplicate designator", fmt.Sprintf("%d / %d / %d", res.InjectedContinuity, res.InjectedMinGroundTime, res.InjectedDuplicateDesignator)},
		{"files", res.Schedule + ", " + res.RotationFile},
	})
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

func runFlightsImport(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "flights import", "flights import --ssim FILE [--rotations FILE] [--strict] [--data DIR] [--json]")
	var sf storeFlags
	sf.register(fs, "./data")
	ssimFile := fs.String("ssim", "", "SSIM file to import")
	rotFile := fs.String("rotations", "", "rotation file (CSV, see docs/ssim.md); without it legs are chained by their onward flights")
	strict := fs.Bool("strict", false, "stop at the first rejected record")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *ssimFile == "" {
		return usageError{"--ssim FILE is required"}
	}
	sched, err := os.Open(*ssimFile)
	if err != nil {
		return err
	}
	defer sched.Close()
	var rots io.Reader
	if *rotFile != "" {
		f, err := os.Open(*rotFile)
		if err != nil {
			return err
		}
		defer f.Close()
		rots = bufio.NewReaderSize(f, 1<<20)
	}
	s, err := sf.open()
	if err != nil {
		return err
	}
	defer s.Close()
	svc, err := flights.NewService(ctx, s, flights.Options{})
	if err != nil {
		return err
	}
	defer svc.Close()
	opts := flights.ImportOptions{Strict: *strict}
	if isTerminal(e.stderr) && !*asJSON {
		opts.Progress = progressBar(e.stderr)
	}
	res, err := flights.Import(ctx, svc, bufio.NewReaderSize(sched, 1<<20), rots, opts)
	if opts.Progress != nil {
		fmt.Fprintln(e.stderr)
	}
	if !*asJSON {
		for _, r := range res.Rejections {
			fmt.Fprintf(e.stderr, "rejected: line %d: %s\n", r.Line, r.Reason)
		}
	}
	if err != nil {
		if *asJSON {
			_ = report(e.stdout, true, res, nil)
		}
		return err
	}
	return report(e.stdout, *asJSON, res, [][2]string{
		{"records", fmt.Sprint(res.Records)},
		{"flight leg records", fmt.Sprint(res.FlightLegRecords)},
		{"dated legs", fmt.Sprint(res.DatedLegs)},
		{"legs imported", fmt.Sprint(res.LegsImported)},
		{"rotations", fmt.Sprint(res.Rotations)},
		{"rejected", fmt.Sprint(res.Rejected)},
		{"seconds", fmt.Sprintf("%.2f", res.Seconds)},
	})
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressBar redraws one line at most ten times a second.
func progressBar(w io.Writer) func(done, total int) {
	var last time.Time
	return func(done, total int) {
		if time.Since(last) < 100*time.Millisecond && done < total {
			return
		}
		last = time.Now()
		const width = 40
		fill := width * done / max(total, 1)
		bar := make([]byte, width)
		for i := range bar {
			bar[i] = '.'
			if i < fill {
				bar[i] = '#'
			}
		}
		fmt.Fprintf(w, "\r[%s] %d/%d legs", bar, done, total)
	}
}

// openService opens the store and the flights service, waiting for the
// validation view to catch up with the log.
func openService(ctx context.Context, sf *storeFlags) (*openedStore, *flights.Service, error) {
	s, err := sf.open()
	if err != nil {
		return nil, nil, err
	}
	svc, err := flights.NewService(ctx, s, flights.Options{})
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

func runFlightsCheck(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "flights check", "flights check [--data DIR] [--json]")
	var sf storeFlags
	sf.register(fs, "./data")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	start := time.Now()
	s, svc, err := openService(ctx, &sf)
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
	return report(e.stdout, *asJSON, res, [][2]string{
		{"legs / rotations", fmt.Sprintf("%d / %d", st.Legs, st.Rotations)},
		{"continuity", fmt.Sprint(c.Continuity)},
		{"min ground time", fmt.Sprint(c.MinGroundTime)},
		{"duplicate designator", fmt.Sprint(c.DuplicateDesignator)},
		{"valid", fmt.Sprint(c.Total == 0)},
	})
}

func runFlightsExport(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "flights export", "flights export --out DIR [--data DIR]")
	var sf storeFlags
	sf.register(fs, "./data")
	out := fs.String("out", "", "directory to write schedule.ssim and rotations.csv into")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usageError{"--out DIR is required"}
	}
	s, svc, err := openService(ctx, &sf)
	if err != nil {
		return err
	}
	defer s.Close()
	defer svc.Close()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	var n int
	err = writeFiles(filepath.Join(*out, "schedule.ssim"), filepath.Join(*out, "rotations.csv"), func(a, b io.Writer) error {
		var err error
		n, err = flights.Export(svc.Validation.Current(), a, b)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "exported %d legs to %s\n", n, *out)
	return nil
}
