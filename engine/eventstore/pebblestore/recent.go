package pebblestore

import (
	"hash/maphash"
	"math/bits"

	"github.com/logbook/logbook/engine/eventstore"
)

// maxRecentIDs bounds Options.RecentIDs: the table's slots, at most four
// per entry, are numbered by uint32.
const maxRecentIDs = 1 << 30

// recentIDs remembers the positions of the last cap events, by id: the
// sequencer's memory for recognizing retried appends (see checkIDs). Owned
// by the sequencer goroutine.
//
// Every event an append writes is added here, and every event of an
// append with ids from its caller looked up first, so the table is on the
// path of every append: as a Go map of 100,000 ids it cost a few cache
// misses per event (lookup, insert, and the delete of the id it pushes
// out), and one writer's batches ran 12–25 % faster with it shrunk to
// nothing. So it is laid out for one miss per lookup: an open-addressing
// table of 16-byte slots, four to a cache line, probed linearly from the
// id's home slot and at most half full. A slot keeps 31 more bits of the
// id's hash, not the id: positions are what a hit needs, and the caller
// reads the event anyway to learn its stream, so it confirms the id there
// (findHash's match). A ring of the same slots, in the order added, says
// which entry to drop when a new one comes; deletion shifts the probe run
// back (no tombstones, so the table never needs rebuilding).
type recentIDs struct {
	hash  func(eventstore.ID) uint64
	slots []recentSlot // a power of two, at least twice cap
	mask  uint32
	ring  []recentSlot // entries in the order added; once full, ring[next] is the oldest
	next  int
}

// recentSlot is one entry. tag is never 0 in an entry: 0 marks an empty
// slot.
type recentSlot struct {
	tag  uint32 // the hash's high 32 bits, with the lowest bit set (31 of them count)
	home uint32 // the slot the id hashes to
	pos  uint64
}

func newRecentIDs(n int) *recentIDs {
	seed := maphash.MakeSeed() // ids are the callers': a seed they cannot know keeps probe runs short
	r := &recentIDs{hash: func(id eventstore.ID) uint64 { return maphash.Bytes(seed, id[:]) }}
	r.reset(n)
	return r
}

// reset sizes the table for n entries and empties it.
func (r *recentIDs) reset(n int) {
	if n <= 0 {
		r.slots, r.ring, r.mask, r.next = nil, nil, 0, 0
		return
	}
	size := 1 << bits.Len(uint(2*n-1)) // the power of two ≥ 2n
	r.slots = make([]recentSlot, size)
	r.mask = uint32(size - 1)
	r.ring = make([]recentSlot, 0, n)
	r.next = 0
}

// hashOf is id's hash; it only reads what is fixed at Open, so the
// appends' own goroutines compute it (Append), off the sequencer's path.
func (r *recentIDs) hashOf(id eventstore.ID) uint64 { return r.hash(id) }

// entry is the slot of the id of hash h at pos.
func (r *recentIDs) entry(h, pos uint64) recentSlot {
	return recentSlot{tag: uint32(h>>32) | 1, home: uint32(h) & r.mask, pos: pos}
}

// add remembers that id lies at pos, forgetting the oldest entry if the
// table is full.
func (r *recentIDs) add(id eventstore.ID, pos uint64) { r.addHash(r.hash(id), pos) }

// addHash is add given the id's hash.
func (r *recentIDs) addHash(h, pos uint64) {
	if cap(r.ring) == 0 {
		return
	}
	e := r.entry(h, pos)
	if len(r.ring) < cap(r.ring) {
		r.ring = append(r.ring, e)
	} else {
		r.remove(r.ring[r.next])
		r.ring[r.next] = e
		r.next = (r.next + 1) % len(r.ring)
	}
	i := e.home
	for r.slots[i].tag != 0 {
		i = (i + 1) & r.mask
	}
	r.slots[i] = e
}

// remove deletes the entry e from the table, then moves back each entry
// after it in the probe run that would otherwise be cut off from its
// home slot.
func (r *recentIDs) remove(e recentSlot) {
	i := e.home
	for r.slots[i] != e {
		if r.slots[i].tag == 0 {
			return // not there: cannot happen, every ring entry is in the table
		}
		i = (i + 1) & r.mask
	}
	for j := i; ; {
		j = (j + 1) & r.mask
		s := r.slots[j]
		if s.tag == 0 {
			break
		}
		// s may fill the hole at i unless its home lies cyclically in
		// (i, j]: then it would sit before its home.
		if (j-s.home)&r.mask >= (j-i)&r.mask {
			r.slots[i] = s
			i = j
		}
	}
	r.slots[i] = recentSlot{}
}

// findHash returns the position of the id of hash h: the first entry, in
// probe order, whose hash matches and for whose position match, which
// checks the id there, reports true. Most lookups miss and read one
// cache line.
func (r *recentIDs) findHash(h uint64, match func(pos uint64) bool) (uint64, bool) {
	if len(r.slots) == 0 {
		return 0, false
	}
	e := r.entry(h, 0)
	for i := e.home; ; i = (i + 1) & r.mask {
		s := r.slots[i]
		if s.tag == 0 {
			return 0, false
		}
		if s.tag == e.tag && s.home == e.home && match(s.pos) {
			return s.pos, true
		}
	}
}
