// Package eventstore defines the event log every other part of logbook
// stands on: streams of events with per-stream sequence numbers, a gap-free
// global order, tags, snapshots and live subscriptions. It is the
// caller's API: Store and Subscription, the event types, the errors to
// test for with errors.Is, and the Limits a store is configured with.
//
// Backends live in subpackages (pebblestore, pgstore) and elsewhere
// (httpreplica, kafkabus's ReplicaStore). Writing one? The pieces a
// backend is built from (Tail and NewSubscription, Notifier, input
// validation against Limits, the ReadOnly base of a replica) are in
// engine/eventstore/backend, apart from this package as
// database/sql/driver is apart from database/sql; engine/eventstore/storetest
// holds the conformance suite every backend must pass.
//
// Events can be removed: a store that implements the optional Deleter
// deletes streams (softly or for good), truncates them and expires their
// events by retention rules. Positions are handed out gap-free and never
// reused, so after a removal the log has holes: ReadAll, ReadTag and
// subscriptions skip them, positions still only grow, and no reader
// stalls on one. Deleter's documentation says exactly what each removal
// means for readers.
package eventstore

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"
)

// ID is an event's idempotency key. The zero ID means "none given": the
// store then generates a random one.
type ID [16]byte

// NewID returns a new ID in the layout of a version 7 UUID: the time in
// milliseconds, then 74 random bits. Ids made close in time sort close
// together, so a database's unique index on them (pgstore's) inserts near
// its right edge instead of dirtying a random page per event.
//
// The random bits come from crypto/rand, read a few hundred bytes at a
// time (randBuf): one call per id cost about 190 ns, most of it the call,
// which was 6 % of an embedded append of 100 events.
func NewID() ID {
	var id ID
	b := randBufs.Get().(*randBuf)
	if b.off+10 > len(b.buf) {
		_, _ = rand.Read(b.buf[:]) // crypto/rand.Read never fails on supported platforms
		b.off = 0
	}
	copy(id[6:], b.buf[b.off:b.off+10])
	b.off += 10
	randBufs.Put(b)
	ms := uint64(time.Now().UnixMilli())
	for i := range 6 {
		id[i] = byte(ms >> (40 - 8*i))
	}
	id[6] = id[6]&0x0f | 0x70
	id[8] = id[8]&0x3f | 0x80
	return id
}

// randBuf is random bytes from crypto/rand not yet handed out, from
// buf[off:]. A goroutine takes one from randBufs and owns it until it puts
// it back, so no two ids share bytes.
type randBuf struct {
	buf [640]byte
	off int
}

var randBufs = sync.Pool{New: func() any { b := &randBuf{}; b.off = len(b.buf); return b }}

// IsZero reports whether the ID was left unset.
func (id ID) IsZero() bool { return id == ID{} }

// String formats the ID like a UUID.
func (id ID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return string(b[:])
}

// ParseID parses a UUID-formatted (or 32 hex digit) ID.
func ParseID(s string) (ID, error) {
	var id ID
	var clean [32]byte
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '-' {
			continue
		}
		if n == len(clean) {
			return ID{}, fmt.Errorf("eventstore: invalid id %q: too long", s)
		}
		clean[n] = c
		n++
	}
	if n != len(clean) {
		return ID{}, fmt.Errorf("eventstore: invalid id %q: want 32 hex digits", s)
	}
	if _, err := hex.Decode(id[:], clean[:]); err != nil {
		return ID{}, fmt.Errorf("eventstore: invalid id %q: %w", s, err)
	}
	return id, nil
}

// NewEvent is an event as a writer hands it to Append.
type NewEvent struct {
	ID      ID // idempotency key; zero means the store generates one
	Type    string
	Version int // schema version of Data, for upcasting on read
	Tags    []string
	Meta    map[string]string
	Data    []byte
}

// Event is a stored event. Data and the other slices must be treated as
// read-only: readers may share them.
type Event struct {
	Stream   string
	Seq      uint64 // 1, 2, 3… within the stream
	Position uint64 // global, gap-free, in commit order, starting at 1
	ID       ID
	Type     string
	Version  int
	Tags     []string
	Meta     map[string]string
	Data     []byte
	Time     time.Time // commit time, assigned by the store
}

// ExpectedVersion is the optimistic-concurrency condition of an append: a
// stream version (the sequence number of its last event, 0 for an empty
// stream), or one of the sentinels Any and NoStream.
type ExpectedVersion int64

const (
	// Any appends whatever the stream's version.
	Any ExpectedVersion = -1
	// NoStream appends only if the stream has no events yet.
	NoStream ExpectedVersion = -2
)

// Exactly expects the stream to be at version v.
func Exactly(v uint64) ExpectedVersion { return ExpectedVersion(v) }

func (e ExpectedVersion) String() string {
	switch {
	case e == Any:
		return "any"
	case e == NoStream:
		return "no stream"
	case e >= 0:
		return fmt.Sprintf("version %d", int64(e))
	default:
		return fmt.Sprintf("invalid(%d)", int64(e))
	}
}

// Satisfied reports whether a stream at version actual meets e.
func (e ExpectedVersion) Satisfied(actual uint64) bool {
	switch {
	case e == Any:
		return true
	case e == NoStream:
		return actual == 0
	default:
		return e >= 0 && uint64(e) == actual
	}
}

// AppendResult tells where an append's events landed.
type AppendResult struct {
	Stream        string
	FirstSeq      uint64
	LastSeq       uint64 // the stream's version after the append
	FirstPosition uint64
	LastPosition  uint64
	// Duplicate is true when every event ID of the append was already
	// stored by an earlier, identical append: nothing was written and the
	// fields above describe the original.
	Duplicate bool
}

// Snapshot is the state of a stream's aggregate after event Seq.
type Snapshot struct {
	Stream  string
	Seq     uint64
	Version int // schema version of Data
	Data    []byte
}

// FilterKind selects what a subscription follows.
type FilterKind uint8

const (
	// FilterAll follows every event in global order.
	FilterAll FilterKind = iota
	// FilterTag follows events carrying one tag, in global order.
	FilterTag
	// FilterStream follows one stream in sequence order.
	FilterStream
)

// Filter selects the events a subscription delivers.
type Filter struct {
	Kind   FilterKind
	Tag    string
	Stream string
}

// All selects every event.
func All() Filter { return Filter{Kind: FilterAll} }

// Tagged selects events carrying tag.
func Tagged(tag string) Filter { return Filter{Kind: FilterTag, Tag: tag} }

// OfStream selects the events of one stream.
func OfStream(stream string) Filter { return Filter{Kind: FilterStream, Stream: stream} }

func (f Filter) String() string {
	switch f.Kind {
	case FilterTag:
		return "tag " + f.Tag
	case FilterStream:
		return "stream " + f.Stream
	default:
		return "all"
	}
}
