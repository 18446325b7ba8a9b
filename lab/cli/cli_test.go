package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
)

// runCLI runs the lab's commands under a root as the logbook binary
// builds it, and returns the exit code, stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &cliutil.Env{Stdout: &out, Stderr: &errb, Getenv: os.Getenv, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	root := &cobra.Command{Use: "logbook", SilenceErrors: true, SilenceUsage: true, Args: cobra.ArbitraryArgs, RunE: cliutil.RunGroup,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return cliutil.ValidateFlags(cmd) }}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cliutil.Usage(err.Error()) })
	root.AddCommand(Commands(e)...)
	root.SetArgs(append([]string{}, args...))
	root.SetOut(&out)
	root.SetErr(&errb)
	cmd, err := root.ExecuteContextC(context.Background())
	code := cliutil.ExitCode(&errb, root, cmd, err)
	return code, out.String(), errb.String()
}
