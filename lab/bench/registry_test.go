package bench_test

import (
	"context"
	"testing"

	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/lab/bench"
)

// The registry and Avro-codec workloads run end to end at a small size,
// twice on one store (a reused --data directory), and report what they
// measured.
func TestRegistryAndAvroCommands(t *testing.T) {
	s, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for range 2 {
		r, err := bench.RunRegistry(ctx, s, bench.RegistryConfig{Lookups: 2000, Writers: 4, Versions: 5, Fields: 20, Timed: 2})
		if err != nil {
			t.Fatal(err)
		}
		if r.LookupsPerSec <= 0 || r.RegisterMS <= 0 || r.Level != "FULL_TRANSITIVE" {
			t.Fatalf("%+v", r)
		}
		c, err := bench.RunCommands(ctx, s, bench.CommandsConfig{Aggregates: 50, Commands: 2000, Writers: 8, Codec: "avro"}, nil)
		if err != nil || c.Codec != "avro" {
			t.Fatalf("%+v, %v", c, err)
		}
	}
	if _, err := bench.RunCommands(ctx, s, bench.CommandsConfig{Aggregates: 1, Commands: 1, Writers: 1, Codec: "xml"}, nil); err == nil {
		t.Fatal("unknown codec accepted")
	}
}
