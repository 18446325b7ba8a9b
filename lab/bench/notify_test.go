package bench_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/lab/bench"
)

// leftBehind counts the run's slot, publication and schema still there.
func leftBehind(t *testing.T, url, schema string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left int
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1)
		+ (SELECT count(*) FROM pg_publication WHERE pubname = $1)
		+ (SELECT count(*) FROM pg_namespace WHERE nspname = $2)`, schema+"_slot", schema).Scan(&left)
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// bench notify's pipeline mode end to end at small sizes: logbook notify
// serve as a child process on a fresh store, the sink failing a fifth of
// its calls; every check holds, and nothing is left behind.
func TestNotifyPipeline(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	// LOGBOOK_TEST_LOGBOOK names a logbook binary to run instead of
	// building this module's.
	bin := os.Getenv("LOGBOOK_TEST_LOGBOOK")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "logbook")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/logbook/logbook/cmd/logbook").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	r, err := bench.RunNotify(context.Background(), bench.NotifyConfig{UsersDB: url, Schema: schema, Mode: bench.ModePipeline, Exe: bin,
		Sizes: []int{1, 100, 1000}, Runs: 1, LatencyRuns: 3, SinkErrorRate: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	c := r.Checks
	if !r.Pass || len(r.Failures) != 0 || r.ColdMS == nil || r.ColdRestartMS == nil || r.ColdCopiedMS == nil || c.MetricsMismatches == nil {
		t.Fatalf("%+v", r)
	}
	if c.ExpectedDeliveries == 0 || c.UniqueKeys != c.ExpectedDeliveries || c.DuplicateDeliveries != 0 || *c.MetricsMismatches != 0 ||
		c.CountMismatches != 0 || c.SinkFailedCalls == 0 || c.Retries < c.SinkFailedCalls || c.FailedDeliveries != 0 {
		t.Fatalf("checks %+v", c)
	}
	for _, row := range r.Rows {
		if row.Failed || row.Runs == 0 || row.MeanMS <= 0 {
			t.Fatalf("row %+v", row)
		}
	}
	if n := leftBehind(t, url, schema); n != 0 {
		t.Fatalf("%d of the run's slot, publication and schema left behind", n)
	}
}

// The monolith mode leaves nothing behind either.
func TestNotifyMonolithCleansUp(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	r, err := bench.RunNotify(context.Background(), bench.NotifyConfig{UsersDB: url, Schema: schema, Mode: bench.ModeMonolith,
		Sizes: []int{1, 10}, Runs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Pass || r.ColdRestartMS != nil || r.Checks.MetricsMismatches != nil || r.Checks.UniqueKeys == 0 {
		t.Fatalf("%+v", r)
	}
	if n := leftBehind(t, url, schema); n != 0 {
		t.Fatalf("%d of the run's slot, publication and schema left behind", n)
	}
}
