package pebblekv_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/pebblekv"
)

func benchRepo(b *testing.B, opts pebblekv.Options) *kv.Repository {
	b.Helper()
	backend, err := pebblekv.Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	repo := kv.New(backend, kv.Limits{})
	b.Cleanup(func() { _ = repo.Close() })
	return repo
}

// BenchmarkPut is a put of a 100-byte value through the repository: add
// of a new key, and compare-and-set update of one of 1,000 keys, one at a
// time without fsync (with it the disk would dominate, and benchstat would
// compare disks rather than commits); parallel is adds from 64 goroutines
// per core with fsync, sharing it (group commit).
func BenchmarkPut(b *testing.B) {
	ctx := context.Background()
	value := make([]byte, 100)
	b.Run("add", func(b *testing.B) {
		repo := benchRepo(b, pebblekv.Options{NoSync: true})
		for i := 0; b.Loop(); i++ {
			if err := repo.Add(ctx, "k/"+strconv.Itoa(i), value); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("update", func(b *testing.B) {
		const keys = 1000
		repo := benchRepo(b, pebblekv.Options{NoSync: true})
		versions := make([]uint64, keys)
		for i := range keys {
			if err := repo.Add(ctx, "k/"+strconv.Itoa(i), value); err != nil {
				b.Fatal(err)
			}
			versions[i] = 1
		}
		for i := 0; b.Loop(); i++ {
			k := i % keys
			v, err := repo.Update(ctx, "k/"+strconv.Itoa(k), versions[k], value)
			if err != nil {
				b.Fatal(err)
			}
			versions[k] = v
		}
	})
	b.Run("parallel", func(b *testing.B) {
		repo := benchRepo(b, pebblekv.Options{})
		b.SetParallelism(64)
		b.RunParallel(func(pb *testing.PB) {
			prefix := "k/" + strconv.FormatUint(rand.Uint64(), 36) + "/"
			for i := 0; pb.Next(); i++ {
				if err := repo.Add(ctx, prefix+strconv.Itoa(i), value); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
