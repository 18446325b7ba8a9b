package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/lab/bench"
)

// TestProduce: every run's events reach the topic and the log, each value
// in the registry's wire format, and the four ways are timed.
func TestProduce(t *testing.T) {
	brokers := testenv.Kafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	topic := "logbook-test-produce-" + time.Now().Format("150405.000000")
	before, _ := s.Head(ctx)
	r, err := bench.RunProduce(ctx, s, bench.ProduceConfig{Brokers: brokers, Topic: topic, Events: 10, Runs: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ProduceRows) != 4 || r.SchemaID <= 0 || r.ValueBytes <= 5 {
		t.Fatalf("%+v", r)
	}
	for _, row := range r.ProduceRows {
		if row.Runs != 3 || row.P50MS <= 0 || row.MaxMS < row.P50MS {
			t.Errorf("row %+v", row)
		}
	}
	// 3 runs × 10 events, as a batch and one by one, beside the registry's
	// own events.
	after, _ := s.Head(ctx)
	if after-before < 60 {
		t.Errorf("the log grew by %d events, want at least 60", after-before)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	defer adm.DeleteTopics(context.Background(), topic) //nolint:errcheck // best effort
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	if end.Offset != 61 { // the warm-up record and 60 more
		t.Fatalf("topic end offset %d, want 61", end.Offset)
	}
}
