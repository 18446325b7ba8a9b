package bench_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/lab/bench"
)

// Kafka's rows say how many bytes its log takes per message: at least the
// 100-byte value itself (the producer does not compress), and the
// replication factor the brokers cannot give is refused by name.
func TestKVKafkaBytesAndReplicas(t *testing.T) {
	brokers := testenv.Kafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := bench.RunKV(ctx, bench.KVConfig{Backends: []string{"kafka"}, Tables: []string{"replicas"},
		Duration: 300 * time.Millisecond, Clients: 2, Kafka: brokers})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 {
		t.Fatalf("rows %+v, want replicas 1 and 2", res.Rows)
	}
	one := res.Rows[0]
	if one.Setting != "1" || one.Error != "" || one.OpsPerSec <= 0 {
		t.Fatalf("replicas 1: %+v", one)
	}
	if one.BytesPerMessage < 100 || one.BytesPerMessage > 1000 || one.SeedBytesPerMessage != 183 {
		t.Errorf("replicas 1: %.0f bytes per 100-byte message (reference %.0f)", one.BytesPerMessage, one.SeedBytesPerMessage)
	}
	two := res.Rows[1]
	if two.Error != "" && !strings.Contains(two.Error, "kafka.sh start --brokers 2") {
		t.Errorf("replicas 2 on one broker: %q does not say how to get two", two.Error)
	}
	if two.Error == "" && two.BytesPerMessage < 100 {
		t.Errorf("replicas 2: %.0f bytes per message", two.BytesPerMessage)
	}
}

// The published Cassandra workload: consistency TWO needs a second node,
// and the space table measures the bytes on disk of every row's own
// random 100 bytes (which LZ4 cannot shrink below the value).
func TestKVCassandraBlobs(t *testing.T) {
	hosts := testenv.Cassandra(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := bench.RunKV(ctx, bench.KVConfig{Backends: []string{"cassandra-blobs"}, Tables: []string{"consistency", "space"},
		Duration: 300 * time.Millisecond, Cassandra: hosts})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res.Rows {
		got = append(got, r.Table+"/"+r.Setting)
		if r.Seed <= 0 && r.SeedBytesPerMessage <= 0 {
			t.Errorf("row %+v has no published figure beside it", r)
		}
		switch {
		case r.Setting == "two" && len(hosts) == 1:
			if r.Error == "" {
				t.Errorf("consistency TWO on one node measured: %+v", r)
			}
		case r.Error != "" || r.OpsPerSec <= 0:
			t.Errorf("row %+v measured nothing", r)
		case r.Table == "space" && (r.BytesPerMessage < 100 || r.BytesPerMessage > 2000):
			t.Errorf("space: %.0f bytes on disk per 100-byte message", r.BytesPerMessage)
		}
	}
	if strings.Join(got, ",") != "consistency/any,consistency/one,consistency/two,space/100" {
		t.Fatalf("rows %v", got)
	}
}

// The long fill of the published Cassandra table takes its column's
// replication factor and consistency: TWO on one node is refused by the
// node, ONE fills.
func TestKVLongCassandraBlobsColumns(t *testing.T) {
	hosts := testenv.Cassandra(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, c := range []struct {
		rf      int
		cons    string
		setting string
		fails   bool
	}{
		{1, "one", "RF 1 ONE", false},
		{2, "two", "RF 2 TWO", len(hosts) == 1},
	} {
		res, err := bench.RunKVLong(ctx, bench.KVLongConfig{
			KVConfig: bench.KVConfig{Backends: []string{"cassandra-blobs"}, Cassandra: hosts, Clients: 2},
			Size:     2e6, Payload: 100, Batch: 64, Interval: 200 * time.Millisecond, Replicas: c.rf, Consistency: c.cons,
		})
		if err != nil {
			t.Fatal(err)
		}
		r := res.Rows[0]
		if r.Setting != c.setting {
			t.Errorf("setting %q, want %q", r.Setting, c.setting)
		}
		if failed := r.Error != ""; failed != c.fails {
			t.Errorf("%s: error %q, want failure %v", c.setting, r.Error, c.fails)
		}
		if !c.fails && r.Bytes < 2e6 {
			t.Errorf("%s: %d bytes put", c.setting, r.Bytes)
		}
	}
}

// A table split by blob size is drawn against its own setting, named
// for what it varies and for the blob size.
func TestKVFiguresSplitTables(t *testing.T) {
	res := &bench.KVResult{Rows: []bench.KVRow{
		{Backend: "cassandra-blobs", Table: "batch-100B-8c", Setting: "128", OpsPerSec: 10},
		{Backend: "cassandra-blobs", Table: "batch-100B-8c", Setting: "256", OpsPerSec: 20},
		{Backend: "cassandra-blobs", Table: "consistency", Setting: "any", OpsPerSec: 30},
	}}
	figs := res.Figures()
	f, ok := figs["batch-100B-8c"]
	if !ok || f.XLabel != "puts per batch (100B-8c)" || f.Panels[0].Series[0].X[1] != 256 {
		t.Fatalf("figures %+v", figs)
	}
	if c := figs["consistency"]; !strings.HasPrefix(c.XLabel, "write consistency level (1 = any") {
		t.Errorf("consistency figure's x axis %q", c.XLabel)
	}
}
