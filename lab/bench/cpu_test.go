package bench

import (
	"context"
	"os"
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
	cpu, ok := postgresCPU(0)
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
	mid, _ := postgresCPU(0)
	for _, c := range conns {
		c.Close(ctx)
	}
	time.Sleep(time.Second) // the postmaster reaps them
	after, ok := postgresCPU(0)
	if !ok || after < mid {
		t.Fatalf("PostgreSQL CPU fell from %v to %v when three busy backends ended", mid, after)
	}
}

// TestPostgresCPUOfOneServer: given a postmaster, only that server's
// processes count. The test database's postmaster, found from one of its
// backends, has used CPU; a process that is no postmaster (this test)
// has no server processes, though PostgreSQL runs on the machine.
func TestPostgresCPUOfOneServer(t *testing.T) {
	url := testenv.URL(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var backend int
	if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	pm := parentPID(backend)
	if pm <= 1 {
		t.Skipf("the test database's backend %d has no visible postmaster (parent %d): not on this machine", backend, pm)
	}
	before, ok := postgresCPU(pm)
	if !ok {
		t.Fatalf("no process of the server whose postmaster is %d", pm)
	}
	if _, err := c.Exec(ctx, "SELECT count(*) FROM generate_series(1, 3000000)"); err != nil {
		t.Fatal(err)
	}
	after, _ := postgresCPU(pm)
	if after <= before {
		t.Errorf("the server's CPU stayed at %v while its backend counted to 3 million", after)
	}
	if all, _ := postgresCPU(0); all < after {
		t.Errorf("every server's CPU %v is below one server's %v", all, after)
	}
	if cpu, ok := postgresCPU(os.Getpid()); ok {
		t.Errorf("counted %v of PostgreSQL processes as children of this test", cpu)
	}
}
