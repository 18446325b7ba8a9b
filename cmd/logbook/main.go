// Command logbook is the event store, the services built on it, and the
// tools that measure them. `logbook help` lists the subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// command is one subcommand. run gets the arguments after its name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

// env carries the process's outputs so that commands are testable.
type env struct {
	stdout, stderr io.Writer
}

func commands() []command {
	return []command{
		{"serve", "run the flights service: HTTP API, queries and metrics on a store", runServe},
		{"cluster", "run write nodes, read replicas and nginx on this machine, on a shared PostgreSQL store", runCluster},
		{"flights", "flight schedules: generate, import (SSIM), check, export", runFlights},
		{"bench", "measure the store: append, read, crush", runBench},
		{"loadtest", "load the HTTP API like seed 000 §6: read, write", runLoadtest},
		{"help", "show this help, or a command's with `logbook help CMD`", nil},
	}
}

// usageError makes main print the command's usage and exit with 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, &env{stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			return run(ctx, e, []string{args[1], "--help"})
		}
		printHelp(e.stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] || c.run == nil {
			continue
		}
		err := c.run(ctx, e, args[1:])
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, new(usageError)):
			fmt.Fprintf(e.stderr, "logbook %s: %v\n", c.name, err)
			return 2
		default:
			fmt.Fprintf(e.stderr, "logbook %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(e.stderr, "logbook: unknown command %q\n\n", args[0])
	printHelp(e.stderr)
	return 2
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "logbook — an event-sourcing and CQRS engine, and services built on it")
	fmt.Fprintln(w, "\nUsage: logbook COMMAND [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun `logbook COMMAND --help` for a command's flags.")
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(e *env, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: logbook %s\n\nFlags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags and refuses stray arguments.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{"unexpected arguments: " + strings.Join(fs.Args(), " ")}
	}
	return nil
}

// subcommand is one command of a group (bench append, flights import, …).
type subcommand struct {
	name string
	run  func(context.Context, *env, []string) error
}

// dispatch runs the subcommand args[0] of group. With profile set, every
// subcommand takes --cpuprofile FILE.
func dispatch(ctx context.Context, e *env, group string, subs []subcommand, profile bool, args []string) error {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" {
		fmt.Fprintf(e.stderr, "Usage: logbook %s %s [flags]  (logbook %s %s --help)\n", group, strings.Join(names, "|"), group, names[0])
		if len(args) == 0 {
			return usageError{fmt.Sprintf("which %s command? (%s)", group, strings.Join(names, ", "))}
		}
		return nil
	}
	for _, s := range subs {
		if s.name != args[0] {
			continue
		}
		rest := args[1:]
		if profile {
			var file string
			var err error
			if rest, file, err = cutProfileFlag(rest); err != nil {
				return err
			}
			stop, err := startProfile(file)
			if err != nil {
				return err
			}
			defer stop()
		}
		return s.run(ctx, e, rest)
	}
	return usageError{fmt.Sprintf("unknown %s command %q (%s)", group, args[0], strings.Join(names, ", "))}
}
