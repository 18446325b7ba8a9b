package pebblestore

import "github.com/logbook/logbook/engine/eventstore"

// recentIDs remembers the positions of the last cap events, by id: the
// sequencer's memory for recognizing retried appends (see checkIDs). It is
// a ring of ids plus a map; the oldest id is forgotten when a new one
// comes. Only positions are kept, to keep the map small: a hit, which is
// rare, reads the event to learn its stream. Owned by the sequencer
// goroutine.
type recentIDs struct {
	ring []eventstore.ID
	next int
	locs map[eventstore.ID]uint64
}

func newRecentIDs(n int) *recentIDs {
	return &recentIDs{ring: make([]eventstore.ID, 0, n), locs: make(map[eventstore.ID]uint64, n)}
}

func (r *recentIDs) add(id eventstore.ID, pos uint64) {
	if cap(r.ring) == 0 {
		return
	}
	if len(r.ring) < cap(r.ring) {
		r.ring = append(r.ring, id)
	} else {
		old := r.ring[r.next]
		if p, ok := r.locs[old]; ok && p <= pos {
			delete(r.locs, old)
		}
		r.ring[r.next] = id
		r.next = (r.next + 1) % len(r.ring)
	}
	r.locs[id] = pos
}

func (r *recentIDs) get(id eventstore.ID) (uint64, bool) {
	pos, ok := r.locs[id]
	return pos, ok
}
