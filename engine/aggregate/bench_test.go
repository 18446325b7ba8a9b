package aggregate_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
)

// benchRuntime returns a runtime over accounts "0" … "n-1", opened, on a
// store without fsync (with it the disk would dominate, and benchstat
// would compare disks rather than commits).
func benchRuntime(b *testing.B, n int) *aggregate.Runtime[account, any, any] {
	b.Helper()
	store, err := pebblestore.Open(b.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	rt, err := aggregate.New(store, definition(), aggregate.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close(); store.Close() })
	for i := range n {
		if _, err := rt.Execute(context.Background(), strconv.Itoa(i), open{Owner: "o"}); err != nil {
			b.Fatal(err)
		}
	}
	return rt
}

// BenchmarkExecute is a command through the runtime: shard, cached state,
// Decide, Append, Evolve. serial sends one command at a time to 1,000
// accounts in turn; parallel sends them from 64 goroutines per core to
// random accounts, so that shards pipeline appends and a busy aggregate's
// commands are decided together; refused is a command Decide refuses,
// which writes nothing.
func BenchmarkExecute(b *testing.B) {
	const accounts = 1000
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		rt := benchRuntime(b, accounts)
		for i := 0; b.Loop(); i++ {
			if _, err := rt.Execute(ctx, strconv.Itoa(i%accounts), deposit{Amount: 1}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		rt := benchRuntime(b, accounts)
		b.SetParallelism(64)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := rt.Execute(ctx, strconv.Itoa(rand.IntN(accounts)), deposit{Amount: 1}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("refused", func(b *testing.B) {
		rt := benchRuntime(b, accounts)
		for i := 0; b.Loop(); i++ {
			if _, err := rt.Execute(ctx, strconv.Itoa(i%accounts), withdraw{Amount: 1}); !errors.Is(err, errOverdraft) {
				b.Fatalf("withdraw from an empty account: %v", err)
			}
		}
	})
}
