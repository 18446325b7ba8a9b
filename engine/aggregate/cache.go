package aggregate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

// get returns the live entry of aggregate id, loading it on a miss from
// its latest snapshot and the events after it.
func (sh *shard[S, C, E]) get(id string) (*entry[S, C, E], error) {
	now := time.Now()
	if e, ok := sh.entries[id]; ok {
		sh.lru.MoveToFront(e.lru)
		e.lastUsed = now
		sh.rt.metrics.cache(true)
		return e, nil
	}
	sh.rt.metrics.cache(false)
	e := &entry[S, C, E]{id: id, stream: sh.rt.Stream(id), state: sh.rt.def.Initial(id), lastUsed: now}
	if err := sh.loadSnapshot(e); err != nil {
		return nil, err
	}
	if err := sh.catchUp(e); err != nil {
		return nil, err
	}
	sh.entries[id] = e
	e.lru = sh.lru.PushFront(e)
	sh.rt.metrics.live(1)
	sh.weigh(e)
	sh.evictOverflow(e)
	return e, nil
}

// pageSize is how many events a load reads per call.
const pageSize = 1024

// evolveStored applies a stored event, turning a panic of Evolve into
// ErrPanic: an event the code cannot take fails its aggregate's load
// instead of the process, on every node and every restart.
func evolveStored[S, C, E any](def *Definition[S, C, E], s S, ev E) (next S, err error) {
	defer func() {
		if p := recover(); p != nil {
			next, err = s, fmt.Errorf("%w: %v", ErrPanic, p)
		}
	}()
	return def.Evolve(s, ev), nil
}

// catchUp applies the stream's events after the entry's version.
func (sh *shard[S, C, E]) catchUp(e *entry[S, C, E]) error {
	ctx := context.Background()
	def := &sh.rt.def
	for {
		evs, err := sh.rt.store.ReadStream(ctx, e.stream, e.version+1, pageSize)
		if err != nil {
			return fmt.Errorf("aggregate: load %s: %w", e.stream, err)
		}
		for i := range evs {
			se := &evs[i]
			ev, err := def.Events.Decode(se.Type, se.Version, se.Data)
			if err != nil {
				return fmt.Errorf("aggregate: load %s at seq %d: %w", e.stream, se.Seq, err)
			}
			if e.state, err = evolveStored(def, e.state, ev); err != nil {
				sh.rt.opts.Logger.Error("aggregate: a stored event cannot be applied; the aggregate cannot load", "stream", e.stream, "seq", se.Seq, "position", se.Position, "type", se.Type, "err", err)
				return fmt.Errorf("aggregate: load %s at seq %d (position %d): %w", e.stream, se.Seq, se.Position, err)
			}
			e.version = se.Seq
			if key := se.Meta[metaIdempotencyKey]; key != "" {
				e.keys.extend(key, se.Meta[metaFingerprint], se.Seq, se.Position, sh.rt.opts.IdempotencyKeys)
			}
		}
		if len(evs) < pageSize {
			return nil
		}
	}
}

func (sh *shard[S, C, E]) loadSnapshot(e *entry[S, C, E]) error {
	codec := sh.rt.def.Snapshots
	if codec == nil {
		return nil
	}
	snap, ok, err := sh.rt.store.LoadSnapshot(context.Background(), e.stream)
	if err != nil {
		return fmt.Errorf("aggregate: load snapshot of %s: %w", e.stream, err)
	}
	if !ok {
		return nil
	}
	keys, data, err := decodeEnvelope(snap.Data)
	var state S
	if err == nil {
		state, err = codec.DecodeState(snap.Version, data)
	}
	if err != nil {
		// A snapshot this build cannot read (its schema changed): replay
		// from the first event instead.
		sh.rt.metrics.snapshotUnreadable()
		sh.rt.log.Warn("ignoring unreadable snapshot", "stream", e.stream, "seq", snap.Seq, "err", err)
		return nil
	}
	e.state, e.version, e.keys, e.snapshotAt = state, snap.Seq, keys, snap.Seq
	return nil
}

func (sh *shard[S, C, E]) maybeSnapshot(e *entry[S, C, E]) {
	every := uint64(sh.rt.def.SnapshotEvery)
	if every == 0 || e.version/every == e.snapshotAt/every {
		return
	}
	ver, data, err := sh.rt.def.Snapshots.EncodeState(e.state)
	if err != nil {
		sh.rt.log.Warn("cannot encode snapshot", "stream", e.stream, "err", err)
		return
	}
	snap := eventstore.Snapshot{Stream: e.stream, Seq: e.version, Version: ver, Data: encodeEnvelope(e.keys, data)}
	e.snapshotAt = e.version
	store, log := sh.rt.store, sh.rt.log
	// Saving is off the shard's path: a snapshot is only a shortcut.
	go func() {
		if err := store.SaveSnapshot(context.Background(), snap); err != nil && !errors.Is(err, eventstore.ErrClosed) {
			log.Warn("cannot save snapshot", "stream", snap.Stream, "err", err)
		}
	}()
}

// inUse is how recently an aggregate must have been used to be kept
// over the shard's budget of bytes.
const inUse = time.Second

// weigh records e's weight after its state changed.
func (sh *shard[S, C, E]) weigh(e *entry[S, C, E]) {
	if sh.budget == 0 {
		return
	}
	w := sh.rt.def.Weight(e.state)
	sh.weight += int64(w - e.weight)
	e.weight = w
}

// evictOverflow passivates least recently used aggregates beyond the
// shard's capacity, and beyond its budget of bytes those not in use.
// Busy ones (an append in flight or commands queued) stay.
func (sh *shard[S, C, E]) evictOverflow(keep *entry[S, C, E]) {
	var now time.Time
	for el := sh.lru.Back(); el != nil; {
		overCount := sh.lru.Len() > sh.capacity
		if !overCount && (sh.budget == 0 || sh.weight <= sh.budget) {
			return
		}
		e := el.Value.(*entry[S, C, E])
		if !overCount {
			if now.IsZero() {
				now = time.Now()
			}
			if now.Sub(e.lastUsed) < inUse {
				return // the rest were used more recently
			}
		}
		prev := el.Prev()
		if e != keep && !e.busy && len(e.queue) == 0 {
			sh.evict(e)
		}
		el = prev
	}
}

func (sh *shard[S, C, E]) evictIdle(now time.Time) {
	cutoff := now.Add(-sh.rt.opts.IdleTimeout)
	for el := sh.lru.Back(); el != nil; {
		prev := el.Prev()
		e := el.Value.(*entry[S, C, E])
		if e.lastUsed.After(cutoff) {
			return // the rest were used more recently
		}
		if !e.busy && len(e.queue) == 0 {
			sh.evict(e)
		}
		el = prev
	}
}

func (sh *shard[S, C, E]) evict(e *entry[S, C, E]) {
	if cur, ok := sh.entries[e.id]; !ok || cur != e {
		return
	}
	delete(sh.entries, e.id)
	sh.lru.Remove(e.lru)
	sh.weight -= int64(e.weight)
	sh.rt.metrics.live(-1)
}

// Idempotency keys.

const (
	metaIdempotencyKey = "idempotency-key"
	metaFingerprint    = "command-fingerprint" // of the command the key came with
)

type keyResult struct {
	first, last, pos uint64
	fingerprint      string // "" in data written before fingerprints: the key alone decides
}

// keyRing remembers the results of an aggregate's latest commands by key,
// oldest forgotten first.
type keyRing struct {
	order []string
	byKey map[string]keyResult
}

func (k *keyRing) get(key string) (keyResult, bool) {
	r, ok := k.byKey[key]
	return r, ok
}

func (k *keyRing) put(key string, r keyResult, limit int) {
	if k.byKey == nil {
		k.byKey = make(map[string]keyResult)
	}
	if _, ok := k.byKey[key]; !ok {
		k.order = append(k.order, key)
		if len(k.order) > limit {
			delete(k.byKey, k.order[0])
			k.order = k.order[1:]
		}
	}
	k.byKey[key] = r
}

// extend records an event of key's command met on replay: the events of
// one command are consecutive and all carry its key.
func (k *keyRing) extend(key, fingerprint string, seq, pos uint64, limit int) {
	r, ok := k.byKey[key]
	if !ok || r.last+1 != seq {
		r = keyResult{first: seq, fingerprint: fingerprint}
	}
	r.last, r.pos = seq, pos
	k.put(key, r, limit)
}

// A snapshot's data is an envelope: the idempotency keys (so that a retry
// is still recognized after the aggregate is reloaded from the snapshot),
// then the state as the SnapshotCodec encoded it.
//
//	uvarint count, then per key: uvarint len, key, uvarint first, last, pos
//	state bytes: the rest
//
// A key with a fingerprint is written as key NUL fingerprint (an
// idempotency key has no NUL: HTTP headers cannot carry one), so
// envelopes written before fingerprints read as keys without one.
func encodeEnvelope(k keyRing, state []byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(k.order)))
	for _, key := range k.order {
		r := k.byKey[key]
		name := key
		if r.fingerprint != "" {
			name += "\x00" + r.fingerprint
		}
		b = binary.AppendUvarint(b, uint64(len(name)))
		b = append(b, name...)
		b = binary.AppendUvarint(b, r.first)
		b = binary.AppendUvarint(b, r.last)
		b = binary.AppendUvarint(b, r.pos)
	}
	return append(b, state...)
}

var errEnvelope = errors.New("aggregate: malformed snapshot envelope")

func decodeEnvelope(b []byte) (keyRing, []byte, error) {
	var k keyRing
	next := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			b = nil
			return 0
		}
		b = b[n:]
		return v
	}
	count := next()
	if b == nil || count > uint64(len(b)) {
		return k, nil, errEnvelope
	}
	for range count {
		n := next()
		if b == nil || n > uint64(len(b)) {
			return k, nil, errEnvelope
		}
		key, fp, _ := strings.Cut(string(b[:n]), "\x00")
		b = b[n:]
		r := keyResult{first: next(), last: next(), pos: next(), fingerprint: fp}
		if b == nil {
			return k, nil, errEnvelope
		}
		k.put(key, r, int(count))
	}
	return k, b, nil
}
