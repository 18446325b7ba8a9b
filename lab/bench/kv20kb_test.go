package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The 20 kB tables carry the published figures beside their rows, and a
// batch too large for the machine is a row saying why, not a run.
func TestKV20kBTables(t *testing.T) {
	cfg := KVConfig{Backends: []string{"redis"}, Tables: []string{"batch-20kB", "connections-20kB"}, Clients: 8}
	var refused, measured int
	for _, s := range kvSettings(cfg) {
		if s.payload != 20000 {
			t.Fatalf("%s/%s: payload %d, want 20000", s.table, s.name, s.payload)
		}
		if s.refused != "" {
			refused++
			if s.table != "batch-20kB" || s.name != "32768" || !strings.Contains(s.refused, "655 MB") && !strings.Contains(s.refused, "5242 MB") {
				t.Fatalf("refused %s/%s: %q", s.table, s.name, s.refused)
			}
			continue
		}
		measured++
	}
	if refused != 1 || measured != 10 {
		t.Fatalf("refused %d, measured %d settings; want 1 and 10", refused, measured)
	}
	if seedFor("redis", setting{table: "batch-20kB", name: "256"}) != 40e3 || seedFor("redis", setting{table: "connections-20kB", name: "128"}) != 52e3 {
		t.Fatal("the published 20 kB figures are not beside their rows")
	}
	// RunKV reports the refused setting without opening the backend (no
	// Redis address is given: opening it would fail differently).
	res, err := RunKV(context.Background(), KVConfig{Backends: []string{"redis"}, Tables: []string{"batch-20kB"}, Clients: 8, Duration: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	last := res.Rows[len(res.Rows)-1]
	if last.Setting != "32768" || !strings.HasPrefix(last.Error, "not run:") || last.Seed != 33e3 {
		t.Fatalf("the refused row: %+v", last)
	}
}
