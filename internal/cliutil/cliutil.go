// Package cliutil holds what the logbook binary's commands share, the
// serving commands (cmd/logbook) and the lab's (lab/cli) alike: the
// process's outputs and logger (Env), bad usage (UsageError, exit code
// 2), command groups, flags that may come from the environment, the
// output flag (-o table|json|csv), a progress bar, and opening the event
// store named by --data or --store.
package cliutil

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/logbook/logbook/internal/progress"
)

// Env carries a command's outputs, environment and logger, so that
// commands are testable.
type Env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// Log is the process's logger; the root command sets it before any
	// command runs.
	Log *slog.Logger
}

// UsageError is bad usage: the binary prints it with a pointer to the help
// and exits with 2.
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

// Usage is bad usage described by msg.
func Usage(msg string) error { return UsageError{Msg: msg} }

// Usagef is bad usage described by a format.
func Usagef(format string, args ...any) error { return UsageError{Msg: fmt.Sprintf(format, args...)} }

// IsUsage says whether err is bad usage.
func IsUsage(err error) bool { return errors.As(err, new(UsageError)) }

// ExitCode prints err, the outcome of the command cmd below root, to w and
// returns the process's exit code: 0 for no error, 2 for bad usage (with
// a pointer to the help), 1 otherwise.
func ExitCode(w io.Writer, root, cmd *cobra.Command, err error) int {
	if err == nil {
		return 0
	}
	name := root.Name()
	if cmd != nil {
		name = cmd.CommandPath()
	}
	if IsUsage(err) {
		fmt.Fprintf(w, "%s: %v\nRun '%s --help' for usage.\n", name, err, name)
		return 2
	}
	fmt.Fprintf(w, "%s: %v\n", name, err)
	return 1
}

// Group returns a command that only holds subcommands.
func Group(use, short string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{Use: use, Short: short, Args: cobra.ArbitraryArgs, RunE: RunGroup}
	g.AddCommand(subs...)
	return g
}

// RunGroup runs a command that holds subcommands with arguments that name
// none of them: the root shows its help, a group says which it has.
func RunGroup(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		if !cmd.HasParent() {
			return cmd.Help()
		}
		var names []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				names = append(names, c.Name())
			}
		}
		return Usagef("which %s command? (%s)", cmd.Name(), strings.Join(names, ", "))
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	cmd.SuggestionsMinimumDistance = 2
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return Usage(msg)
}

// NoArgs refuses positional arguments, for commands that take flags only.
func NoArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return Usagef("unexpected arguments: %s", strings.Join(args, " "))
	}
	return nil
}

// EnvAnnotation marks a flag that may come from an environment variable;
// the root command reads it before every command runs.
const EnvAnnotation = "logbook_env"

// FromEnv lets the flag name of fs also be set by LOGBOOK_NAME (dashes
// become underscores), and says so in its help. For flags that carry an
// address or a secret: a secret in the environment stays out of ps.
func FromEnv(fs *pflag.FlagSet, name string) {
	f := fs.Lookup(name)
	if f == nil {
		panic("FromEnv: no flag " + name)
	}
	v := "LOGBOOK_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	f.Usage += " (env " + v + ")"
	_ = fs.SetAnnotation(name, EnvAnnotation, []string{v})
}

// FileAnnotation marks a flag --NAME-file whose file holds the value of
// the flag NAME (SecretFlag); the root command reads it before every
// command runs (ApplyFileFlags).
const FileAnnotation = "logbook_file"

// MaxSecretFileBytes bounds a file a --NAME-file flag names.
const MaxSecretFileBytes = 64 << 10

// SecretFlag marks the flag name of fs as carrying a secret (a password
// in a URL, a token): besides the command line, which every user of the
// machine sees through ps, it may be set by LOGBOOK_NAME (FromEnv) or read
// from a file, --NAME-file, which SecretFlag registers.
func SecretFlag(fs *pflag.FlagSet, name string) {
	FromEnv(fs, name)
	fs.String(name+"-file", "", "read --"+name+" from this file (its contents, less a final newline), which keeps it out of ps")
	_ = fs.SetAnnotation(name+"-file", FileAnnotation, []string{name})
}

// ApplyFileFlags sets each flag whose --NAME-file was given from that
// file. A flag given both ways is bad usage. Call it before the
// environment's values are applied: a file given beats the environment.
func ApplyFileFlags(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		names := f.Annotations[FileAnnotation]
		if err != nil || len(names) == 0 || !f.Changed {
			return
		}
		target := fs.Lookup(names[0])
		if target == nil {
			return
		}
		if target.Changed {
			err = Usagef("give --%s or --%s, not both", target.Name, f.Name)
			return
		}
		v, rerr := readSecretFile(f.Value.String())
		if rerr != nil {
			err = Usagef("--%s: %v", f.Name, rerr)
			return
		}
		if serr := target.Value.Set(v); serr != nil {
			// The value is a secret: the error names the file, not it.
			err = Usagef("--%s %s: not a valid value for --%s", f.Name, f.Value.String(), target.Name)
			return
		}
		target.Changed = true
	})
	return err
}

func readSecretFile(name string) (string, error) {
	fh, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, MaxSecretFileBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > MaxSecretFileBytes {
		return "", fmt.Errorf("%s is longer than %d bytes", name, MaxSecretFileBytes)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s is empty", name)
	}
	return v, nil
}

// ProfileFlags registers --cpuprofile, --memprofile and --trace on a
// group's commands; the root command starts and stops them.
func ProfileFlags(g *cobra.Command) {
	g.PersistentFlags().String("cpuprofile", "", "write a CPU profile of the run to this file")
	g.PersistentFlags().String("memprofile", "", "write a profile of the run's allocations to this file at its end")
	g.PersistentFlags().String("trace", "", "write an execution trace of the run to this file (go tool trace)")
}

// ShowProgress returns a counter for long work to count into, drawn as a
// bar on stderr when both outputs are a terminal and quiet is false (nil
// otherwise: nothing is drawn). Call stop before printing the result.
func (e *Env) ShowProgress(cmd *cobra.Command, quiet bool) (c *progress.Counter, stop func()) {
	if quiet || !IsTerminal(e.Stdout) || !IsTerminal(e.Stderr) {
		return nil, func() {}
	}
	c = &progress.Counter{}
	b := progress.Show(e.Stderr, strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), c)
	return c, b.Stop
}

// IsTerminal says whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// ValidateFlags checks cmd's required and grouped flags (cobra's
// MarkFlagRequired, MarkFlagsMutuallyExclusive, …) and reports a failure
// as bad usage. The root command calls it once flags from the
// environment are set, so a required flag may come from there.
func ValidateFlags(cmd *cobra.Command) error {
	if err := cmd.ValidateRequiredFlags(); err != nil {
		return Usage(err.Error())
	}
	if err := cmd.ValidateFlagGroups(); err != nil {
		return Usage(err.Error())
	}
	return nil
}
