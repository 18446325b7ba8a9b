package eventstore

import (
	"bytes"
	"sync"
	"testing"
)

// TestNewID: ids are unique, carry the version 7 layout, and their time
// prefix never goes backwards, so they reach an index in rough order.
func TestNewID(t *testing.T) {
	seen := make(map[ID]bool)
	var prev ID
	for i := range 10000 {
		id := NewID()
		if seen[id] {
			t.Fatalf("id %s twice", id)
		}
		seen[id] = true
		if id[6]>>4 != 7 || id[8]>>6 != 2 {
			t.Fatalf("id %s: version %d variant %d, want 7 and 2", id, id[6]>>4, id[8]>>6)
		}
		if i > 0 && bytes.Compare(id[:6], prev[:6]) < 0 {
			t.Fatalf("time prefix went back: %s after %s", id, prev)
		}
		prev = id
	}
}

// TestNewIDConcurrent: goroutines that make ids at once, each drawing from
// a buffer of random bytes it takes from a pool, never hand out the same
// random bits twice.
func TestNewIDConcurrent(t *testing.T) {
	const goroutines, each = 8, 5000
	ids := make([][]ID, goroutines)
	var wg sync.WaitGroup
	for g := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				ids[g] = append(ids[g], NewID())
			}
		}()
	}
	wg.Wait()
	seen := make(map[[10]byte]bool)
	for _, list := range ids {
		for _, id := range list {
			var r [10]byte
			copy(r[:], id[6:])
			if seen[r] {
				t.Fatalf("random bits of %s twice", id)
			}
			seen[r] = true
		}
	}
}

func BenchmarkNewID(b *testing.B) {
	for b.Loop() {
		NewID()
	}
}
