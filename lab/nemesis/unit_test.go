package nemesis

import (
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/lab/nemesis/kvcas"
	"github.com/logbook/logbook/services/kv/kvtest"
)

// The --json summary has exactly the documented keys, violations an
// empty list when all holds, linearizable null when not checked.
func TestSummaryJSONKeys(t *testing.T) {
	b, err := json.Marshal((&Summary{Report: Report{Faults: map[string]int{"kill-writer": 2}, ReplicasConverged: true}}).JSON())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	want := []string{"acknowledged", "duplicate_effects", "faults", "kafka_duplicates", "kafka_gaps", "linearizable",
		"lost_acknowledged", "max_recovery_s", "operations", "replicas_converged", "violations"}
	if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
	if string(m["violations"]) != "[]" || string(m["linearizable"]) != "null" {
		t.Fatalf("violations %s, linearizable %s", m["violations"], m["linearizable"])
	}
}

func TestSelectFaults(t *testing.T) {
	all, err := selectFaults(Config{})
	want := []string{"kill-writer", "kill-replica", "pause-node", "kill-postgres", "stop-postgres", "kill-kafka",
		"partition-postgres", "reset-postgres", "latency-postgres", "partition-proxy", "partition-kafka"}
	var got []string
	for _, f := range all {
		got = append(got, f.Kind())
	}
	slices.Sort(got)
	slices.Sort(want)
	if err != nil || !slices.Equal(got, want) || len(Kinds()) != len(want) {
		t.Fatalf("faults %v (%v), kinds %v; want %v", got, err, Kinds(), want)
	}
	some, err := selectFaults(Config{Kinds: []string{"kill-kafka", "pause-node", "kill-kafka"}})
	if err != nil || len(some) != 2 || some[0].Kind() != "kill-kafka" {
		t.Fatalf("%v %v", some, err)
	}
	if _, err := selectFaults(Config{Kinds: []string{"flood"}}); err == nil || !strings.Contains(err.Error(), "kill-writer") {
		t.Fatalf("an unknown fault: %v", err)
	}
}

func TestWithAppName(t *testing.T) {
	got := nodeStoreURL("postgres://logbook@127.0.0.1:5/postgres?sslmode=disable", "writer-1")
	if !strings.Contains(got, "application_name=logbook-writer-1") || !strings.Contains(got, "sslmode=disable") {
		t.Fatal(got)
	}
}

// The planted bug's proxy turns every skipEvery-th LegsAdded event into a
// removal line and passes everything else as it is.
func TestSkipLines(t *testing.T) {
	in := `{"position":49,"type":"LegsAdded"}
{"position":50,"type":"LegsAdded"}
{"position":100,"type":"RotationCreated"}
heartbeat
`
	out, err := io.ReadAll(skipLines(io.NopCloser(strings.NewReader(in))))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"position":49,"type":"LegsAdded"}
{"removed_through":50}
{"position":100,"type":"RotationCreated"}
heartbeat
`
	if string(out) != want {
		t.Fatalf("got\n%s", out)
	}
}

// The kv workload's check: a history no order explains (a read that
// misses an add acknowledged before it began) makes linearizable false,
// and the violation names the visualization it wrote; a sound one makes
// it true.
func TestKVCheck(t *testing.T) {
	add := kvcas.Op{Input: kvtest.Input{Op: "add", Key: "k", Value: "v"}, Output: kvtest.Output{Kind: kvtest.OK, Version: 1}, Call: 0, Return: 10}
	read := kvcas.Op{Client: 1, Input: kvtest.Input{Op: "get", Key: "k"}, Output: kvtest.Output{Kind: kvtest.OK, Version: 1, Value: "v"}, Call: 20, Return: 30}
	for _, c := range []struct {
		name string
		out  kvtest.Output
		want bool
	}{{"sound", read.Output, true}, {"stale read", kvtest.Output{Kind: kvtest.Absent}, false}} {
		t.Run(c.name, func(t *testing.T) {
			r := read
			r.Output = c.out
			dir := t.TempDir()
			w := &KV{hist: &kvcas.History{Start: time.Now(), Ops: []kvcas.Op{add, r}}}
			sum := &Summary{}
			vs := w.Check(t.Context(), &Env{Dir: dir}, nil, sum)
			if sum.Linearizable == nil || *sum.Linearizable != c.want {
				t.Fatalf("linearizable %v, want %v", sum.Linearizable, c.want)
			}
			if c.want {
				if len(vs) != 0 {
					t.Fatalf("violations %v", vs)
				}
				return
			}
			viz := filepath.Join(dir, "kv-linearizability.html")
			if len(vs) != 1 || vs[0].Check != "linearizable" || !strings.Contains(vs[0].Detail, viz) {
				t.Fatalf("violations %v, want one naming %s", vs, viz)
			}
			if _, err := os.Stat(viz); err != nil {
				t.Fatal(err)
			}
		})
	}
}
