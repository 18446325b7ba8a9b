package bench

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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

// TestPostgresCPUKeepsEndedBackends: backends that burn CPU and then end
// leave their time in the total (the postmaster's reaped children's
// time). Counting only live processes made the database's CPU of a run
// whose connections closed come out negative.
func TestPostgresCPUKeepsEndedBackends(t *testing.T) {
	url := testenv.URL(t)
	ctx := context.Background()
	var conns []*pgx.Conn
	for range 3 {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		if _, err := c.Exec(ctx, "SELECT count(*) FROM generate_series(1, 1000000)"); err != nil {
			t.Fatal(err)
		}
	}
	mid, _ := postgresCPU()
	for _, c := range conns {
		c.Close(ctx)
	}
	time.Sleep(time.Second) // the postmaster reaps them
	after, ok := postgresCPU()
	if !ok || after < mid {
		t.Fatalf("PostgreSQL CPU fell from %v to %v when three busy backends ended", mid, after)
	}
}
