package window

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// TestBlockCacheBeyondMemtables: Pebble reserves each live memtable's
// size in the block cache, so a cache no larger than the memtables the
// writer may queue holds no block, and every query reads its buckets
// from the files again (the view's 64 MiB cache beside 64 MiB memtables
// did). tune must leave cacheBlocks for blocks with every memtable
// queued.
func TestBlockCacheBeyondMemtables(t *testing.T) {
	var o pebble.Options
	tune(&o)
	o.EnsureDefaults()
	reserved := int64(o.MemTableStopWritesThreshold) * int64(o.MemTableSize)
	if free := o.CacheSize - reserved; free < cacheBlocks {
		t.Fatalf("block cache %d MiB, memtables reserve up to %d MiB: %d MiB left for blocks, want %d",
			o.CacheSize>>20, reserved>>20, free>>20, cacheBlocks>>20)
	}
}
