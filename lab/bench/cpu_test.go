package bench

import (
	"testing"
	"time"

	"github.com/logbook/logbook/internal/testenv"
)

// TestPostgresCPU: with the test database running on this machine, its
// server processes are found and have used some CPU; the percentage is of
// the whole machine.
func TestPostgresCPU(t *testing.T) {
	testenv.URL(t)
	cpu, ok := postgresCPU()
	if !ok || cpu <= 0 {
		t.Fatalf("postgres processes: ok %v, cpu %v", ok, cpu)
	}
	if p := cpuPercent(time.Second, 2*time.Second, 2); p != 25 {
		t.Fatalf("1 s of CPU in 2 s on 2 cores: %v %%, want 25", p)
	}
}
