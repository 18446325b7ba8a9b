package repro

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RecordOptions say how to run an entry's commands.
type RecordOptions struct {
	// Logbook is the binary the commands' "logbook" runs; empty: one
	// built from Dir (go build ./cmd/logbook), so that the commit the
	// record names is the code that ran.
	Logbook string
	// Dir is the directory the commands run in (the repository's root,
	// so relative paths like lab/pepa/models/… resolve).
	Dir string
	// Stderr receives the commands' standard error (progress, logs).
	Stderr io.Writer
	// Shared, when given, holds the runs of the entries recorded before
	// this one in the same invocation: a command one of them ran is not
	// run again, its run (output, time and load) is taken as it was and
	// marked reused. Several entries list one command when it measures
	// several of a work's tables at once.
	Shared *SharedRuns
}

// SharedRuns are the commands run so far in one invocation of the
// recorder, by their text.
type SharedRuns struct {
	runs map[string]sharedRun
}

type sharedRun struct {
	run     Run
	load    Load
	at, end time.Time
}

// NewSharedRuns returns an empty set of shared runs.
func NewSharedRuns() *SharedRuns { return &SharedRuns{runs: map[string]sharedRun{}} }

// Record runs the entry's commands, one after the other, each through
// "bash -c" with the logbook binary first on $PATH, and returns the
// record of the run: each command's JSON output verbatim, the time, the
// commit, the cores and the load average sampled every second. A command
// that fails or prints something other than one JSON value fails the
// record.
func Record(ctx context.Context, e *Entry, opt RecordOptions) (*Result, error) {
	if len(e.Commands) == 0 {
		return nil, fmt.Errorf("entry %s has no command to record", e.ID)
	}
	stderr := opt.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	// The commands say "logbook": the binary goes by that name into a
	// directory of its own, first on $PATH.
	dir, err := os.MkdirTemp("", "repro-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if opt.Logbook != "" {
		bin, err := filepath.Abs(opt.Logbook)
		if err != nil {
			return nil, err
		}
		if err := os.Symlink(bin, filepath.Join(dir, "logbook")); err != nil {
			return nil, err
		}
	} else if err := BuildLogbook(ctx, opt.Dir, filepath.Join(dir, "logbook"), stderr); err != nil {
		return nil, err
	}
	path := dir + string(os.PathListSeparator) + os.Getenv("PATH")
	r := &Result{
		ID:        e.ID,
		Commit:    commit(ctx, opt.Dir),
		GoVersion: runtime.Version(),
		CPUs:      runtime.NumCPU(),
	}
	// Runs are taken only from earlier entries: a command an entry lists
	// twice (repetitions) runs twice.
	var runs []sharedRun
	for _, c := range e.Commands {
		sr, ok := sharedRun{}, false
		if opt.Shared != nil {
			sr, ok = opt.Shared.runs[c]
		}
		if ok {
			sr.run.Reused = true
		} else {
			var err error
			if sr, err = runOne(ctx, c, opt.Dir, path, stderr); err != nil {
				return nil, err
			}
		}
		runs = append(runs, sr)
	}
	// The record's date and the load before it are its earliest run's,
	// the load after it its latest run's.
	first, last := runs[0], runs[0]
	for _, sr := range runs {
		r.Runs = append(r.Runs, sr.run)
		r.Seconds += sr.run.Seconds
		r.Load.Max = max(r.Load.Max, sr.load.Max)
		if sr.at.Before(first.at) {
			first = sr
		}
		if sr.end.After(last.end) {
			last = sr
		}
		if opt.Shared != nil && !sr.run.Reused {
			opt.Shared.runs[sr.run.Command] = sr
		}
	}
	r.RecordedAt = first.at.UTC().Format(time.RFC3339)
	r.Load.Before, r.Load.After = first.load.Before, last.load.After
	r.Seconds = round2(r.Seconds)
	return r, nil
}

// BuildLogbook builds ./cmd/logbook of the tree at dir into out: the binary
// whose commit a record names.
func BuildLogbook(ctx context.Context, dir, out string, stderr io.Writer) error {
	build := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/logbook")
	build.Dir = dir
	build.Stderr = stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/logbook: %w", err)
	}
	return nil
}

// runOne runs one command through bash with the logbook binary first
// on path, sampling the load average every second while it runs.
func runOne(ctx context.Context, c, dir, path string, stderr io.Writer) (sharedRun, error) {
	sr := sharedRun{at: time.Now()}
	sr.load.Before = loadAvg()
	sampler := startLoadSampler(sr.load.Before)
	cmd := exec.CommandContext(ctx, "bash", "-c", c)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+path)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = stderr
	err := cmd.Run()
	sr.load.Max = sampler.stop()
	if err != nil {
		return sr, fmt.Errorf("%s: %w", c, err)
	}
	raw := bytes.TrimSpace(out.Bytes())
	if !json.Valid(raw) {
		return sr, fmt.Errorf("%s: its output is not one JSON value (does it have -o json?): %.200q", c, raw)
	}
	sr.load.After = loadAvg()
	sr.load.Max = max(sr.load.Max, sr.load.After)
	sr.end = time.Now()
	sr.run = Run{Command: c, Seconds: round2(sr.end.Sub(sr.at).Seconds()), Output: json.RawMessage(raw)}
	return sr, nil
}

// WriteResult writes the record as dir/ID.json.
func WriteResult(dir string, r *Result) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, r.ID+".json"), append(b, '\n'), 0o644)
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

func commit(ctx context.Context, dir string) string {
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	// Changes to tracked files other than the index, the results and the
	// page make the binary's commit uncertain.
	st, err := exec.CommandContext(ctx, "git", "-C", dir, "status", "--porcelain", "--untracked-files=no", "--", ".", ":!lab/repro", ":!docs/reproductions.md").Output()
	if err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += "+dirty"
	}
	return c
}

// loadAvg is the 1-minute load average (Linux /proc/loadavg), 0 if
// unknown.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

type loadSampler struct {
	mu   sync.Mutex
	max  float64
	done chan struct{}
	wg   sync.WaitGroup
}

func startLoadSampler(initial float64) *loadSampler {
	s := &loadSampler{max: initial, done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				v := loadAvg()
				s.mu.Lock()
				s.max = max(s.max, v)
				s.mu.Unlock()
			}
		}
	}()
	return s
}

func (s *loadSampler) stop() float64 {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}
