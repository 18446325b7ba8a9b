// Command logbook is the event store, the services built on it, and the
// tools that measure them. `logbook help` lists the commands.
//
// The command line is built with cobra (github.com/spf13/cobra), as
// etcdctl, kubectl and gh are: help generated from the flags, shell
// completion, and the GNU flag syntax people already know.
package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"runtime/trace"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/internal/progress"
	labcli "github.com/logbook/logbook/lab/cli"
)

// env carries the process's outputs, environment and logger, so that
// commands are testable.
type env struct {
	stdout, stderr io.Writer
	stdin          io.Reader // nil: os.Stdin
	getenv         func(string) string
	// log is the process's one logger, made from --log-format and
	// --log-level before any command runs; every component gets it.
	log *slog.Logger
	// setDefaultLogger also makes log slog's default, for the code that
	// logs through it; only a real process (main) sets it.
	setDefaultLogger bool
	// cleanup runs after the command, whatever its outcome.
	cleanup []func()

	logFormat, logLevel string
}

// usageError is bad usage: main prints it with a pointer to the help and
// exits with 2. It is the lab's commands' type too (cliutil.UsageError).
type usageError = cliutil.UsageError

var usagef = cliutil.Usagef

func main() {
	// The first SIGINT or SIGTERM asks the command to stop (servers shut
	// down gracefully); a second one ends the process at once.
	ctx, stop := server.SignalContext(context.Background())
	code := run(ctx, &env{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, setDefaultLogger: true}, os.Args[1:])
	stop()
	os.Exit(code)
}

// run runs the command line args and returns the exit code: 0, 1 for a
// failure, 2 for bad usage.
func run(ctx context.Context, e *env, args []string) int {
	if e.getenv == nil {
		e.getenv = func(string) string { return "" }
	}
	root := newRoot(e)
	if args == nil {
		args = []string{} // nil would make cobra read os.Args
	}
	root.SetArgs(args)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	if e.stdin != nil {
		root.SetIn(e.stdin)
	}
	cmd, err := root.ExecuteContextC(ctx)
	for i := len(e.cleanup) - 1; i >= 0; i-- {
		e.cleanup[i]()
	}
	return cliutil.ExitCode(e.stderr, root, cmd, err)
}

// newRoot builds the command tree.
//
// The serving commands are this package's; the lab's (bench, loadtest,
// pepa, torture, cluster) come from lab/cli. Adding a command takes one
// new file and one line: the file defines newXxxCmd(e *env)
// *cobra.Command (flags bound to local variables, a RunE that reads
// them), and the line adds it below — or, for a subcommand, to its
// group's constructor (newFlightsCmd, …). Shared pieces, in
// internal/cliutil for both: store flags for --data/--store, the output
// flag, FromEnv to let an address or secret flag come from LOGBOOK_…, a
// progress bar, Usagef for bad usage, ProfileFlags for a group whose
// commands take --cpuprofile. No command sets its own PersistentPreRun:
// cobra would run it instead of the root's, which reads the environment,
// makes the logger and starts the profile.
func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "logbook",
		Short: "An event-sourcing and CQRS engine, and services built on it",
		Long: `logbook — an event-sourcing and CQRS engine, and services built on it.

Flags marked (env LOGBOOK_…) can also be set by that environment variable:
a flag given on the command line wins over the variable, and the variable
over the default. Commands that print a result take -o table|json|csv (or
--json). Exit codes: 0 success, 1 failure, 2 bad usage.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE:          runGroup,
	}
	// The lab's commands get the same outputs and, once prepare has made
	// it, the same logger.
	lab := &cliutil.Env{Stdout: e.stdout, Stderr: e.stderr, Getenv: e.getenv}
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		err := e.prepare(cmd)
		lab.Log = e.log
		return err
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{Msg: err.Error()} })
	pf := root.PersistentFlags()
	pf.StringVar(&e.logFormat, "log-format", "text", "log format: text or json")
	pf.StringVar(&e.logLevel, "log-level", "info", "lowest level logged: debug, info, warn or error")
	// `logbook serve` was the flights service's command before every
	// service had its own noun; it still works, and says so.
	legacyServe := newServeCmd(e)
	legacyServe.Deprecated = `use "logbook flights serve" instead`
	root.AddCommand(
		legacyServe,
		newFlightsCmd(e),
		newTicketsCmd(e),
		newKVCmd(e),
		newNotifyCmd(e),
		newStreamsCmd(e),
		newVersionCmd(e),
		newTokenCmd(e),
		newBackupCmd(e),
		newRestoreCmd(e),
		newVerifyCmd(e),
	)
	root.AddCommand(labcli.Commands(lab)...)
	return root
}

// group returns a command that only holds subcommands.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	return cliutil.Group(use, short, subs...)
}

// runGroup runs a command that holds subcommands with arguments that name
// none of them (cliutil.RunGroup).
func runGroup(cmd *cobra.Command, args []string) error { return cliutil.RunGroup(cmd, args) }

// noArgs refuses positional arguments: every command takes flags only.
func noArgs(cmd *cobra.Command, args []string) error { return cliutil.NoArgs(cmd, args) }

// fromEnv lets the flag name of fs also be set by LOGBOOK_NAME
// (cliutil.FromEnv).
func fromEnv(fs *pflag.FlagSet, name string) { cliutil.FromEnv(fs, name) }

// secretFlag lets the flag name of fs, which carries a secret, also be
// set by LOGBOOK_NAME or read from --NAME-file (cliutil.SecretFlag).
func secretFlag(fs *pflag.FlagSet, name string) { cliutil.SecretFlag(fs, name) }

// prepare runs before every command: environment variables for the flags
// not given, the logger, and a CPU profile where the command takes one.
func (e *env) prepare(cmd *cobra.Command) error {
	if err := cliutil.ApplyFileFlags(cmd.Flags()); err != nil {
		return err
	}
	var envErr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		names := f.Annotations[cliutil.EnvAnnotation]
		if len(names) == 0 || f.Changed || envErr != nil {
			return
		}
		if v := e.getenv(names[0]); v != "" {
			if err := f.Value.Set(v); err != nil {
				envErr = usagef("%s=%q for --%s: %v", names[0], v, f.Name, err)
			}
			// Given, for cobra's required and exclusive flags.
			f.Changed = true
		}
	})
	if envErr != nil {
		return envErr
	}
	if err := cliutil.ValidateFlags(cmd); err != nil {
		return err
	}
	lw := server.NewLogWriter(e.stderr)
	log, err := newLogger(lw, e.logFormat, e.logLevel)
	if err != nil {
		return err
	}
	e.cleanup = append(e.cleanup, lw.Flush)
	e.log = log
	if e.setDefaultLogger {
		slog.SetDefault(log)
	}
	if f := cmd.Flags().Lookup("cpuprofile"); f != nil && f.Value.String() != "" {
		stop, err := startProfile(f.Value.String())
		if err != nil {
			return err
		}
		e.cleanup = append(e.cleanup, stop)
	}
	if f := cmd.Flags().Lookup("memprofile"); f != nil && f.Value.String() != "" {
		file := f.Value.String()
		e.cleanup = append(e.cleanup, func() {
			if pf, err := os.Create(file); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(pf, 0)
				pf.Close()
			}
		})
	}
	if f := cmd.Flags().Lookup("trace"); f != nil && f.Value.String() != "" {
		tf, err := os.Create(f.Value.String())
		if err != nil {
			return err
		}
		if err := trace.Start(tf); err != nil {
			tf.Close()
			return err
		}
		e.cleanup = append(e.cleanup, func() {
			trace.Stop()
			tf.Close()
		})
	}
	return nil
}

// newLogger is the process's logger on w, which keeps information lines
// for a moment (server.LogWriter).
func newLogger(w *server.LogWriter, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	log, err := server.NewLogger(w, format, lv)
	if err != nil {
		return nil, usagef("--log-format %q: want text or json", format)
	}
	return log, nil
}

// startProfile writes a CPU profile to file until stop is called.
func startProfile(file string) (stop func(), err error) {
	pf, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		pf.Close()
	}, nil
}

// showProgress returns a counter for long work to count into, drawn as a
// bar on stderr when both outputs are a terminal and quiet is false (the
// output is for people: cliutil.Env.ShowProgress).
func (e *env) showProgress(cmd *cobra.Command, quiet bool) (c *progress.Counter, stop func()) {
	return (&cliutil.Env{Stdout: e.stdout, Stderr: e.stderr}).ShowProgress(cmd, quiet)
}
