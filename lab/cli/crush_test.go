package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
)

// TestCrushChildArgs: a child process of --processes gets the flags its
// parent was given, without --processes (it would spawn again) and with
// JSON out, which the parent parses.
func TestCrushChildArgs(t *testing.T) {
	e := &cliutil.Env{}
	root := &cobra.Command{Use: "logbook"}
	bench := &cobra.Command{Use: "bench"}
	crush := newBenchCrushCmd(e)
	root.AddCommand(bench)
	bench.AddCommand(crush)
	if err := crush.ParseFlags([]string{"--store", "postgres://x/y", "--ids", "3000", "--processes", "4", "--max-concurrent-queries", "0", "-o", "table"}); err != nil {
		t.Fatal(err)
	}
	got := crushChildArgs(crush)
	want := []string{"bench", "crush"}
	if !slices.Equal(got[:2], want) || got[len(got)-2] != "-o" || got[len(got)-1] != "json" {
		t.Fatalf("args %q", got)
	}
	joined := strings.Join(got, " ")
	for _, must := range []string{"--store=postgres://x/y", "--ids=3000", "--max-concurrent-queries=0"} {
		if !strings.Contains(joined, must) {
			t.Errorf("args %q lack %s", got, must)
		}
	}
	if strings.Contains(joined, "processes") || strings.Contains(joined, "table") {
		t.Errorf("args %q pass on --processes or the parent's output format", got)
	}
}

// TestCrushProcessesNeedPostgres: processes cannot share the embedded
// store, and the count must be positive.
func TestCrushProcessesNeedPostgres(t *testing.T) {
	if code, _, stderr := runCLI(t, "bench", "crush", "--processes", "2", "--data", t.TempDir()); code != 2 || !strings.Contains(stderr, "postgres") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runCLI(t, "bench", "crush", "--processes", "0"); code != 2 || !strings.Contains(stderr, "--processes") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}
