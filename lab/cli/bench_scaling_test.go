package cli

import (
	"strings"
	"testing"
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
