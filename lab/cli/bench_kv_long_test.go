package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bench kv --table long fills the embedded backend with --size bytes,
// takes puts/s every --interval, reports the first and last and their
// ratio against the floor, charts them, and removes the data; a backend
// that cannot hold the fill gets a row saying why.
func TestBenchKVLong(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"bench", "kv", "--table", "long", "--size", "lots"}, `--size "lots"`},
		{[]string{"bench", "kv", "--table", "long", "--interval", "0s"}, "must be positive"},
		{[]string{"bench", "kv", "--table", "long", "--replicas", "0"}, "--replicas 0: 1, 2 or 3"},
		{[]string{"bench", "kv", "--table", "long", "--consistency", "quorum"}, `--consistency "quorum": any, one or two`},
		{[]string{"bench", "kv", "--table", "long,batch"}, `--table "long"`},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.msg)
		}
	}
	data, figs := t.TempDir(), t.TempDir()
	code, out, stderr := runCLI(t, "bench", "kv", "--backends", "embedded,kafka", "--kafka", "127.0.0.1:1", "--table", "long",
		"--size", "24MB", "--payload", "1000", "--interval", "150ms", "--clients", "2", "--data", data, "--json", "--plot", filepath.Join(figs, "long.svg"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Rows []struct {
			Backend     string    `json:"backend"`
			PerInterval []float64 `json:"puts_per_sec"`
			First, Last float64
			Ratio       float64 `json:"last_over_first"`
			Bytes       int64   `json:"bytes"`
			Floor       float64 `json:"floor"`
			Error       string  `json:"error"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(res.Rows) != 2 {
		t.Fatalf("rows: %s", out)
	}
	e := res.Rows[0]
	if e.Backend != "embedded" || e.Error != "" || e.Bytes < 24e6 || e.Bytes > 24e6+2*256*1000 || e.Floor != 0.6 {
		t.Fatalf("the embedded fill: %+v", e)
	}
	if len(e.PerInterval) >= 2 && (e.First != e.PerInterval[0] || e.Last != e.PerInterval[len(e.PerInterval)-1] || e.Ratio != e.Last/e.First) {
		t.Fatalf("first, last and ratio do not match the intervals: %+v", e)
	}
	// A backend that cannot be reached gets its row with the reason,
	// and the run goes on.
	if k := res.Rows[1]; k.Backend != "kafka" || k.Error == "" || k.Bytes != 0 {
		t.Fatalf("the Kafka row: %+v", k)
	}
	svg, err := os.ReadFile(filepath.Join(figs, "long.svg"))
	if err != nil || !strings.Contains(string(svg), "embedded") {
		t.Fatalf("the chart: %v", err)
	}
	if left, _ := os.ReadDir(data); len(left) != 0 {
		t.Fatalf("the fill's data was left in %s: %v", data, left)
	}
	// A fill larger than the disk is refused before it starts.
	code, out, stderr = runCLI(t, "bench", "kv", "--backends", "embedded", "--table", "long", "--size", "900TB", "--data", data, "--json")
	if code != 0 || !strings.Contains(out, "bytes of disk") {
		t.Fatalf("a fill larger than the disk: exit %d, %s %s", code, out, stderr)
	}
}
