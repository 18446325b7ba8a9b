package pebblestore

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
)

// Every table and every block of a table records the interval of event
// positions among its keys (a Pebble block property), so that a read of
// events by position skips the tables and blocks that hold none of them.
//
// The reason is the live tail. A view or subscription that follows the
// log reads the newest events, which are still in the memtable; but each
// table's key range runs from its first event key to its stream and tag
// index keys, so it overlaps any range of event keys, and without the
// property each such read sought into every table of every level: one
// block read per table, decompressed again whenever a flush or compaction
// had made new tables. In the flights write load test that was about a
// twentieth of the server's CPU while compactions ran.
//
// The name is stored in each table's properties; it must not change, nor
// what it means. Tables written before the property existed have none and
// are always read.
const positionsProperty = "logbook.positions"

// positionCollector returns the collector Pebble runs for each table it
// writes.
func positionCollector() pebble.BlockPropertyCollector {
	return sstable.NewBlockIntervalCollector(positionsProperty, positionMapper{}, nil)
}

// positionMapper gives an event key, a value or a deletion, the interval
// [pos, pos+1), and every other key none.
type positionMapper struct{}

func (positionMapper) MapPointKey(k sstable.InternalKey, _ []byte) (sstable.BlockInterval, error) {
	if u := k.UserKey; len(u) == 9 && u[0] == prefixEvent {
		p := be64(u[1:])
		return sstable.BlockInterval{Lower: p, Upper: p + 1}, nil
	}
	return sstable.BlockInterval{}, nil
}

func (positionMapper) MapRangeKeys(sstable.Span) (sstable.BlockInterval, error) {
	return sstable.BlockInterval{}, nil
}

// eventRange is the iterator options for the events at positions from
// through to: bounds and the block filter on the same interval. They
// must be the same: a block is skipped only when no key within the
// bounds can be in it, deletions included (an event's deletion maps to
// its position too), so no deleted event can show through. Every scan of
// a range of event keys takes its options here.
func eventRange(from, to uint64) *pebble.IterOptions {
	filters := make([]pebble.BlockPropertyFilter, 1, 2) // Pebble appends one of its own
	filters[0] = sstable.NewBlockIntervalFilter(positionsProperty, from, to+1, nil)
	return &pebble.IterOptions{
		LowerBound:      eventKey(nil, from),
		UpperBound:      eventKey(nil, to+1),
		PointKeyFilters: filters,
	}
}
