// Command repro records the runs behind docs/reproductions.md and
// renders it:
//
//	go run ./lab/repro/cmd/repro record [--logbook FILE] ID...
//	go run ./lab/repro/cmd/repro list
//	go run ./lab/repro/cmd/repro render
//
// Run it from the repository's root. record runs each entry's commands
// (lab/repro/index.json) and writes lab/repro/results/ID.json, running a
// command that several of the given entries list only once; render
// rewrites docs/reproductions.md (as LOGBOOK_REPRO_UPDATE=1 go test
// ./lab/repro does).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/logbook/logbook/lab/repro"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "repro:", err)
		os.Exit(1)
	}
}

const usage = `usage: repro record [--logbook FILE] ID... | repro list | repro render
(run from the repository's root)`

func run() error {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	indexPath := filepath.Join(root, repro.IndexPath)
	resultsDir := filepath.Join(root, repro.ResultsDir)
	idx, err := repro.LoadIndex(indexPath)
	if err != nil {
		return fmt.Errorf("%w (run from the repository's root)", err)
	}
	switch os.Args[1] {
	case "list":
		results, err := repro.LoadResults(resultsDir, idx)
		if err != nil {
			return err
		}
		for _, e := range idx.Entries {
			state := "not recorded"
			switch {
			case e.SameAs != "" && results[e.SameAs] != nil && e.Chart != nil:
				state = "drawn from " + e.SameAs + ", recorded " + results[e.SameAs].RecordedAt
			case e.SameAs != "":
				state = "as " + e.SameAs
			case len(e.Commands) == 0:
				state = "no command"
			case results[e.ID] != nil:
				state = "recorded " + results[e.ID].RecordedAt
			}
			fmt.Printf("%-28s %-12s %s\n", e.ID, e.Status, state)
		}
		return nil
	case "render":
		return repro.Update(root)
	case "record":
		fs := flag.NewFlagSet("record", flag.ExitOnError)
		bin := fs.String("logbook", "", "the logbook binary the commands run (default: one built from this tree, go build ./cmd/logbook)")
		_ = fs.Parse(os.Args[2:])
		if fs.NArg() == 0 {
			fmt.Fprintln(os.Stderr, usage)
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		var entries []*repro.Entry
		for _, id := range fs.Args() {
			e, ok := idx.Entry(id)
			if !ok {
				return fmt.Errorf("no entry %q in %s (repro list shows them)", id, repro.IndexPath)
			}
			entries = append(entries, e)
		}
		if *bin == "" {
			// Built once for every entry, from the tree whose commit
			// the records name.
			dir, err := os.MkdirTemp("", "repro-build-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			*bin = filepath.Join(dir, "logbook")
			if err := repro.BuildLogbook(ctx, root, *bin, os.Stderr); err != nil {
				return err
			}
		}
		// Entries that list the same command (one run measuring several
		// of a work's tables) share its run.
		shared := repro.NewSharedRuns()
		for _, e := range entries {
			id := e.ID
			r, err := repro.Record(ctx, e, repro.RecordOptions{Logbook: *bin, Dir: root, Stderr: os.Stderr, Shared: shared})
			if err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
			if err := repro.WriteResult(resultsDir, r); err != nil {
				return err
			}
			fmt.Printf("%s: recorded in %.1f s, load average %.2f at most\n", id, r.Seconds, r.Load.Max)
		}
		return repro.Update(root)
	}
	fmt.Fprintln(os.Stderr, usage)
	os.Exit(2)
	return nil
}
