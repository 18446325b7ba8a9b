package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
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

// TestClusterJWTNeedsTLS: the cluster's identity provider serves its
// keys over HTTPS, so --jwt without --tls is bad usage, said before
// anything starts.
func TestClusterJWTNeedsTLS(t *testing.T) {
	code, _, stderr := runCLI(t, "cluster", "--jwt", "--dir", t.TempDir(), "--run-dir", t.TempDir())
	if code != 2 || !strings.Contains(stderr, "--jwt needs --tls") {
		t.Fatalf("cluster --jwt without --tls: exit %d, %q; want 2 and why", code, stderr)
	}
}
