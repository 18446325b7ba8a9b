package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/lab/bench"
)

func benchNotify(t *testing.T, args ...string) (bench.NotifyResult, int, string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, append([]string{"bench", "notify"}, args...)...)
	var res bench.NotifyResult
	if code == 0 || code == 1 {
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("exit %d, stdout %q, stderr %q: %v", code, stdout, stderr, err)
		}
	}
	return res, code, stderr
}

// The monolith mode on real PostgreSQL: small sizes are delivered
// exactly, with the sink failing a fifth of its calls, and a request past
// the 65,535-parameter limit is reported failed with the driver's reason.
func TestBenchNotifyMonolith(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	res, code, stderr := benchNotify(t, "--users-db", url, "--schema", schema, "--mode", "monolith",
		"--sizes", "1,100,65536", "--runs", "1", "--latency-runs", "3", "--sink-error-rate", "0.2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !res.Pass || len(res.Failures) != 0 || res.Users != 65536 || res.ColdMS == nil {
		t.Fatalf("result %+v", res)
	}
	c := res.Checks
	if c.ExpectedDeliveries == 0 || c.UniqueKeys != c.ExpectedDeliveries || c.DuplicateDeliveries != 0 || c.MetricsMismatches != nil || c.Retries < c.SinkFailedCalls {
		t.Fatalf("checks %+v", c)
	}
	if len(res.Rows) != 3 {
		t.Fatalf("rows %+v", res.Rows)
	}
	one, hundred, over := res.Rows[0], res.Rows[1], res.Rows[2]
	if one.Size != 1 || one.Runs != 3 || one.Failed || one.P99MS <= 0 || one.Mode != "monolith" {
		t.Fatalf("size 1: %+v", one)
	}
	if hundred.Size != 100 || hundred.Runs != 1 || hundred.Failed || hundred.MeanMS <= 0 || hundred.Deliveries == 0 {
		t.Fatalf("size 100: %+v", hundred)
	}
	// One cold and three warm requests to user 1, one to users 1…100.
	if want := 4*one.Deliveries + hundred.Deliveries; c.ExpectedDeliveries != want {
		t.Fatalf("expected deliveries %d, want %d", c.ExpectedDeliveries, want)
	}
	if !over.Failed || over.Runs != 0 || !strings.Contains(over.Reason, "limited to 65535 parameters") {
		t.Fatalf("size 65,536: %+v", over)
	}
}

func TestBenchNotifyUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--mode", "monolith"},
		{"--users-db", "postgres://x", "--mode", "lambda"},
		{"--users-db", "postgres://x", "--mode", "monolith", "--sizes", "0"},
		{"--users-db", "postgres://x", "--mode", "monolith", "--sink-error-rate", "1"},
		{"--users-db", "postgres://x", "--mode", "monolith", "--data", "d"},
		{"--users-db", "postgres://x", "--mode", "stages"}, // no --bus
		{"--users-db", "postgres://x", "--mode", "stages", "--bus", "kafka://h:1/p", "--kill-stage", "sink"},
		{"--users-db", "postgres://x", "--mode", "stages", "--bus", "kafka://h:1/p", "--stage-procs", "0"},
		{"--users-db", "postgres://x", "--mode", "stages", "--bus", "kafka://h:1/p", "--data", "d"},
		{"--users-db", "postgres://x", "--mode", "pipeline", "--kill-stage", "build"},
	} {
		code, _, stderr := runCLI(t, append([]string{"bench", "notify"}, args...)...)
		if code != 2 || stderr == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}
