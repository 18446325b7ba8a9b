package bench

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpectedBusiest checks the exact expectation against the obvious
// cases and against dealing planners out at random.
func TestExpectedBusiest(t *testing.T) {
	if got := ExpectedBusiest(375, 1); got != 375 {
		t.Errorf("one node: %v, want 375", got)
	}
	// Two customers on two nodes: both on one half the time.
	if got := ExpectedBusiest(2, 2); math.Abs(got-1.5) > 1e-9 {
		t.Errorf("2 on 2: %v, want 1.5", got)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ users, nodes int }{{375, 2}, {375, 4}, {450, 8}, {10, 3}} {
		const trials = 20000
		var sum float64
		for range trials {
			count := make([]int, c.nodes)
			busiest := 0
			for range c.users {
				k := rng.IntN(c.nodes)
				count[k]++
				busiest = max(busiest, count[k])
			}
			sum += float64(busiest)
		}
		sim, got := sum/trials, ExpectedBusiest(c.users, c.nodes)
		if math.Abs(got-sim) > 0.01*sim {
			t.Errorf("%d on %d: %.2f, simulated %.2f", c.users, c.nodes, got, sim)
		}
		t.Logf("%d planners on %d nodes: the busiest has %.1f (simulated %.1f), the mean %.1f", c.users, c.nodes, got, sim, float64(c.users)/float64(c.nodes))
	}
}
