package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logbook/logbook/lab/bench"
	"github.com/logbook/logbook/lab/plot"
)

// TestScalingRefusesBadPlans: the plan is checked before anything
// starts, with a message that names the sum and the way out.
func TestScalingRefusesBadPlans(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "scaling", "--mode", "read", "--nodes", "1,8", "--node-cpus", "0.3"}, "--oversubscribe"},
		{[]string{"bench", "scaling", "--mode", "bogus"}, `--mode "bogus"`},
		{[]string{"bench", "scaling", "--mode", "write", "--nodes", "1,x"}, "--nodes"},
		{[]string{"bench", "scaling", "--mode", "write", "--scale", "2"}, "--scale"},
		{[]string{"cluster", "--writers", "8", "--node-cpus", "0.5", "--replicas", "0"}, "the CPU quotas add up to"},
		{[]string{"cluster", "--node-cpus", "-1"}, "--node-cpus must not be negative"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

func TestScalingFigure(t *testing.T) {
	res := bench.ScalingResult{Mode: "write", Rows: []bench.ScalingRow{
		{Nodes: 1, Scenario: "lower", AchievedPerSec: 500, P99: 170},
		{Nodes: 2, Scenario: "lower", AchievedPerSec: 510, P99: 130},
		{Nodes: 1, Scenario: "higher", AchievedPerSec: 600, P99: 171},
	}}
	f := scalingFigure(res)
	if len(f.Panels) != 2 || len(f.Panels[0].Series) != 2 || len(f.Panels[0].Series[0].X) != 2 || f.Panels[1].Series[1].Y[0] != 171 {
		t.Fatalf("figure: %+v", f)
	}
	file := filepath.Join(t.TempDir(), "scaling.svg")
	if err := plot.Save(file, f); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("no SVG written: %v", err)
	}
}
