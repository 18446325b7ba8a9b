package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logbook/logbook/internal/testenv"
)

func TestBenchKV(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"bench", "kv", "--table", "nope"}, `--table "nope"`},
		{[]string{"bench", "kv", "--clients", "0"}, "must be positive"},
		{[]string{"bench", "kv", "--backends", "cassandra-blob"}, `--backends "cassandra-blob"`},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.msg)
		}
	}
	// The embedded backend needs no server: a short run gives its rows.
	figs := t.TempDir()
	code, out, stderr := runCLI(t, "bench", "kv", "--backends", "embedded", "--table", "persistence",
		"--duration", "200ms", "--cas-clients", "4", "--data", t.TempDir(), "--json", "--plot", filepath.Join(figs, "kv.svg"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Rows []struct {
			Backend   string  `json:"backend"`
			Table     string  `json:"table"`
			Setting   string  `json:"setting"`
			OpsPerSec float64 `json:"ops_per_sec"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var got []string
	for _, r := range res.Rows {
		if r.OpsPerSec <= 0 {
			t.Errorf("row %+v measured nothing", r)
		}
		got = append(got, r.Table+"/"+r.Setting)
	}
	if strings.Join(got, ",") != "persistence/sync,persistence/nosync,cas/4 clients" {
		t.Fatalf("rows %v", got)
	}
	// --plot drew one figure per table, each naming the backend.
	for _, table := range []string{"persistence", "cas"} {
		svg, err := os.ReadFile(filepath.Join(figs, "kv-"+table+".svg"))
		if err != nil || !strings.Contains(string(svg), "embedded") {
			t.Errorf("figure of %s: %v", table, err)
		}
	}
}

// On Cassandra the persistence table measures the commit log sync the node
// runs and names how to get the other one.
func TestBenchKVCassandra(t *testing.T) {
	hosts := strings.Join(testenv.Cassandra(t), ",")
	code, out, stderr := runCLI(t, "bench", "kv", "--backends", "cassandra", "--cassandra", hosts,
		"--table", "persistence", "--duration", "300ms", "--clients", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Rows []struct {
			Backend   string  `json:"backend"`
			Setting   string  `json:"setting"`
			OpsPerSec float64 `json:"ops_per_sec"`
			Error     string  `json:"error"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	measured, refused := 0, 0
	for _, r := range res.Rows {
		switch {
		case r.Backend != "cassandra" || (r.Setting != "batch" && r.Setting != "periodic"):
			t.Errorf("row %+v", r)
		case r.OpsPerSec > 0 && r.Error == "":
			measured++
		case strings.Contains(r.Error, "CASSANDRA_COMMITLOG_SYNC="+r.Setting):
			refused++
		default:
			t.Errorf("row %+v: neither measured nor refused with the mode to restart in", r)
		}
	}
	if measured != 1 || refused != 1 {
		t.Fatalf("%d rows measured, %d refused; want one each: %s", measured, refused, out)
	}
}
