//go:build unix

package bench_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/lab/bench"
	"github.com/logbook/logbook/services/notify/stages"
)

// bench notify's stages mode end to end at a small size, as the command
// the reproductions index records runs it: logbook notify stage
// processes on the tests' Kafka, a build process SIGKILLed during the
// large request and restarted. Every message arrives once, the topics
// hold every unit once, and the kill happened.
func TestNotifyStages(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	brokers := testenv.Kafka(t)
	bin := os.Getenv("LOGBOOK_TEST_LOGBOOK")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "logbook")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/logbook/logbook/cmd/logbook").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	r, err := bench.RunNotify(context.Background(), bench.NotifyConfig{UsersDB: url, Schema: schema, Mode: bench.ModeStages, Exe: bin,
		Bus: "kafka://" + strings.Join(brokers, ",") + "/benchtest", Sizes: []int{1, 100, 5000}, Runs: 1, LatencyRuns: 1,
		StageProcs: 2, KillStage: stages.Build, KillAfter: 200 * time.Millisecond, KillMin: 5000, Timeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c, a := r.Checks, r.Stages
	if !r.Pass || len(r.Failures) != 0 || a == nil {
		t.Fatalf("not exact: %v (%+v)", r.Failures, r)
	}
	if c.ExpectedDeliveries == 0 || c.UniqueKeys != c.ExpectedDeliveries || c.DuplicateDeliveries != 0 {
		t.Errorf("checks %+v", c)
	}
	if !a.Exact() || a.Delivered != c.ExpectedDeliveries || a.Chunks == 0 || a.Checked != a.Chunks || a.Outcomes != a.Batches {
		t.Errorf("topics %+v: want every chunk checked once, every batch one outcome, %d delivered", a.Audit, c.ExpectedDeliveries)
	}
	if a.Killed != stages.Build || a.Kills != 1 || a.Procs != 2 {
		t.Errorf("kills: %d of %q with %d processes a stage; want 1 of build, 2", a.Kills, a.Killed, a.Procs)
	}
	for _, row := range r.Rows {
		if row.Failed || row.Runs == 0 || row.MeanMS <= 0 {
			t.Errorf("row %+v", row)
		}
	}
}
