package aggregate

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

type reqKind uint8

const (
	reqCommand reqKind = iota
	reqCreate
	reqState
)

type request[S, C, E any] struct {
	kind reqKind
	id   string
	cmd  C
	key  string
	// fingerprint names the command its key was given with (runtime.go).
	fingerprint string
	expect      int64
	ctx         context.Context
	start       time.Time
	attempts    int

	// Answer, written by the shard before it closes done.
	result  Result[E]
	state   S
	version uint64
	err     error
	done    chan struct{}
}

// entry is one live aggregate in a shard's cache.
type entry[S, C, E any] struct {
	id, stream string
	state      S
	version    uint64
	keys       keyRing
	snapshotAt uint64 // version of the last snapshot saved or loaded

	busy     bool                 // an append is in flight
	flight   *completion[S, C, E] // that append
	queue    []*request[S, C, E]  // commands waiting for it
	lru      *list.Element
	lastUsed time.Time
	weight   int // Definition.Weight of state, when the shard has a budget
}

// span is the part of an append one command contributed.
type span[S, C, E any] struct {
	req        *request[S, C, E]
	start, end int    // its events in the append
	before     uint64 // the aggregate's version before it (in the decided state)
}

type completion[S, C, E any] struct {
	e      *entry[S, C, E]
	spans  []span[S, C, E]
	events []E
	state  S // the state after all spans, if the append succeeds
	res    eventstore.AppendResult
	err    error
	// results are the spans' answers, given by answer when the append
	// succeeds; answered is set before the first of them is given.
	results  []Result[E]
	answered atomic.Bool
}

type shard[S, C, E any] struct {
	rt *Runtime[S, C, E]
	in chan *request[S, C, E]
	// Appends report here, from the store's goroutine (post): a list
	// under a lock and a wake-up, so that the store never waits for the
	// shard, however many appends it has in flight.
	mu       sync.Mutex
	posted   []*completion[S, C, E]
	wake     chan struct{} // one pending wake-up at most
	taken    []*completion[S, C, E]
	entries  map[string]*entry[S, C, E]
	lru      *list.List // front: most recently used
	capacity int
	budget   int64 // bytes of states (0: no Weight, no bound)
	weight   int64 // the entries' weights
	inflight int
}

func newShard[S, C, E any](rt *Runtime[S, C, E], capacity int) *shard[S, C, E] {
	return &shard[S, C, E]{
		rt:       rt,
		in:       make(chan *request[S, C, E], 256),
		wake:     make(chan struct{}, 1),
		entries:  make(map[string]*entry[S, C, E]),
		lru:      list.New(),
		capacity: capacity,
	}
}

// maxBatchCommands bounds how many queued commands of one aggregate are
// decided into one append.
const maxBatchCommands = 256

// maxBatchBytes bounds the encoded size of an append that batches several
// commands (the store refuses appends over its MaxAppendBytes, 16 MiB by
// default).
const maxBatchBytes = 4 << 20

func encodedSize(evs []eventstore.NewEvent) int {
	n := 0
	for _, ev := range evs {
		n += len(ev.Type) + len(ev.Data)
		for _, t := range ev.Tags {
			n += len(t)
		}
		for k, v := range ev.Meta {
			n += len(k) + len(v)
		}
	}
	return n
}

func (sh *shard[S, C, E]) run() {
	var tick <-chan time.Time
	if idle := sh.rt.opts.IdleTimeout; idle > 0 {
		t := time.NewTicker(max(idle/4, 10*time.Millisecond))
		defer t.Stop()
		tick = t.C
	}
	in := sh.in
	for in != nil || sh.inflight > 0 {
		select {
		case req, ok := <-in:
			if !ok {
				in = nil // closed: finish the appends in flight, then stop
				continue
			}
			sh.handle(req)
		case <-sh.wake:
			sh.mu.Lock()
			sh.taken, sh.posted = sh.posted, sh.taken[:0]
			sh.mu.Unlock()
			for i, c := range sh.taken {
				sh.complete(c)
				sh.taken[i] = nil
			}
		case now := <-tick:
			sh.evictIdle(now)
		}
	}
}

func (sh *shard[S, C, E]) handle(req *request[S, C, E]) {
	if err := req.ctx.Err(); err != nil {
		sh.finish(req, err)
		return
	}
	e, err := sh.get(req.id)
	if err != nil {
		sh.finish(req, err)
		return
	}
	if req.kind == reqState {
		// Once the commands of the append in flight have been answered
		// (answer), the cached state is behind what their callers know:
		// the read waits for the shard to take the new state. Before
		// that the append's outcome is known to no one, and the cached
		// state is a correct answer.
		if e.busy && e.flight.answered.Load() {
			e.queue = append(e.queue, req)
			return
		}
		sh.readState(e, req)
		return
	}
	if e.busy {
		e.queue = append(e.queue, req)
		return
	}
	sh.decide(e, []*request[S, C, E]{req})
}

// readState answers a state read with the aggregate's current state.
func (sh *shard[S, C, E]) readState(e *entry[S, C, E], req *request[S, C, E]) {
	if e.version == 0 {
		sh.finish(req, fmt.Errorf("%w: %s", ErrNotFound, e.stream))
		return
	}
	req.state, req.version = e.state, e.version
	sh.finish(req, nil)
}

// decide runs the commands one after another on the aggregate's state and
// starts one append with all their events.
func (sh *shard[S, C, E]) decide(e *entry[S, C, E], reqs []*request[S, C, E]) {
	state, version := e.state, e.version
	var (
		events []E
		batch  []eventstore.NewEvent
		spans  []span[S, C, E]
		keys   map[string]bool
		size   int
	)
	for i, req := range reqs {
		if err := req.ctx.Err(); err != nil {
			sh.finish(req, err)
			continue
		}
		if req.key != "" {
			if k, ok := e.keys.get(req.key); ok {
				if k.fingerprint != "" && req.fingerprint != "" && k.fingerprint != req.fingerprint {
					sh.reject(req, fmt.Errorf("%w: key %q on %s", ErrKeyReused, req.key, e.stream))
					continue
				}
				req.result = Result[E]{ID: e.id, FirstSeq: k.first, Version: k.last, Position: k.pos, Duplicate: true}
				sh.rt.metrics.command(req.start, outcomeDuplicate)
				sh.finish(req, nil)
				continue
			}
			if keys[req.key] {
				// The same key twice in one append: decide the second
				// after the first is stored, when it will be a duplicate.
				e.queue = append(reqs[i:i+1:i+1], e.queue...)
				continue
			}
		}
		var err error
		var out []E
		var part []eventstore.NewEvent
		var next S
		switch {
		case req.expect >= 0 && uint64(req.expect) != version:
			err = &eventstore.ConflictError{Stream: e.stream, Expected: eventstore.Exactly(uint64(req.expect)), Actual: version}
		case req.kind == reqCreate && version != 0:
			err = fmt.Errorf("aggregate: create %s: %w", e.stream, ErrExists)
		default:
			out, part, next, err = sh.decideOne(e, state, req)
		}
		if err != nil && version != e.version {
			// Refused because of events of this batch, which are not
			// stored yet: answering now would tell of a state no read
			// can see, or that never comes to be if the append fails.
			// Decide this and the rest again after the append.
			e.queue = append(slices.Clone(reqs[i:]), e.queue...)
			break
		}
		if err != nil {
			sh.reject(req, err)
			continue
		}
		n := encodedSize(part)
		if len(spans) > 0 && size+n > maxBatchBytes {
			// Would make the append too large: leave this and the rest
			// for the next append.
			e.queue = append(slices.Clone(reqs[i:]), e.queue...)
			break
		}
		size += n
		spans = append(spans, span[S, C, E]{req: req, start: len(events), end: len(events) + len(out), before: version})
		events = append(events, out...)
		batch = append(batch, part...)
		state, version = next, version+uint64(len(out))
		if req.key != "" {
			if keys == nil {
				keys = map[string]bool{}
			}
			keys[req.key] = true
		}
	}
	if len(spans) == 0 {
		sh.drain(e)
		return
	}
	if len(batch) == 0 {
		// Only no-op commands: nothing to write, and their answer is the
		// current version.
		for _, sp := range spans {
			sp.req.result = Result[E]{ID: e.id, Version: e.version}
			sh.rt.metrics.command(sp.req.start, outcomeOK)
			sh.finish(sp.req, nil)
		}
		sh.drain(e)
		return
	}
	e.busy = true
	sh.inflight++
	c := &completion[S, C, E]{e: e, spans: spans, events: events, state: state}
	e.flight = c
	expect := eventstore.Exactly(e.version)
	eventstore.AppendAsync(sh.rt.store, e.stream, expect, batch, func(res eventstore.AppendResult, err error) {
		c.res, c.err = res, err
		if err == nil {
			sh.answer(c)
		}
		sh.post(c)
	})
}

// answer gives the commands of a stored append their results. It runs
// where the store reports the append durable, before the shard's own
// bookkeeping (complete): a command's answer waits for no other
// goroutine. Until complete has run the aggregate stays busy, so no
// command is decided and no state read answered on the state before it.
// It reads only what decide wrote before the append began.
func (sh *shard[S, C, E]) answer(c *completion[S, C, E]) {
	c.results = make([]Result[E], len(c.spans))
	c.answered.Store(true)
	for i, sp := range c.spans {
		r := Result[E]{ID: c.e.id, Version: sp.before + uint64(sp.end-sp.start)}
		if sp.end > sp.start {
			r.Events = c.events[sp.start:sp.end:sp.end]
			r.FirstSeq = c.res.FirstSeq + uint64(sp.start)
			r.Position = c.res.FirstPosition + uint64(sp.end) - 1
		}
		c.results[i] = r
		sp.req.result = r
		sh.rt.metrics.command(sp.req.start, outcomeOK)
		sh.finish(sp.req, nil)
	}
}

// post hands a finished append to the shard's goroutine. It never blocks.
func (sh *shard[S, C, E]) post(c *completion[S, C, E]) {
	sh.mu.Lock()
	sh.posted = append(sh.posted, c)
	sh.mu.Unlock()
	select {
	case sh.wake <- struct{}{}:
	default: // a wake-up is pending already; it takes c along
	}
}

// decideOne runs one command on state: its events, encoded for the store,
// and the state after them. On error nothing of the command is kept.
func (sh *shard[S, C, E]) decideOne(e *entry[S, C, E], state S, req *request[S, C, E]) (out []E, enc []eventstore.NewEvent, next S, err error) {
	def := &sh.rt.def
	defer func() {
		if p := recover(); p != nil {
			out, enc, next, err = nil, nil, state, fmt.Errorf("%w: deciding %T on %s: %v", ErrPanic, req.cmd, e.stream, p)
			sh.rt.opts.Logger.Error("aggregate: a decide or evolve function panicked; the command fails", "stream", e.stream, "version", e.version, "command", fmt.Sprintf("%T", req.cmd), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		}
	}()
	if out, err = def.Decide(state, req.cmd); err != nil {
		return nil, nil, state, err
	}
	enc = make([]eventstore.NewEvent, len(out))
	next = state
	for i, ev := range out {
		if enc[i], err = sh.encode(e, ev, req.key, req.fingerprint); err != nil {
			return nil, nil, state, err
		}
		next = def.Evolve(next, ev)
	}
	return out, enc, next, nil
}

func (sh *shard[S, C, E]) encode(e *entry[S, C, E], ev E, key, fingerprint string) (eventstore.NewEvent, error) {
	def := &sh.rt.def
	typ, ver, data, err := def.Events.Encode(ev)
	if err != nil {
		return eventstore.NewEvent{}, err
	}
	tags := []string{def.Kind}
	if def.Tags != nil {
		tags = append(tags, def.Tags(e.id, ev)...)
	}
	ne := eventstore.NewEvent{Type: typ, Version: ver, Data: data, Tags: tags}
	if key != "" {
		ne.Meta = map[string]string{metaIdempotencyKey: key}
		if fingerprint != "" {
			ne.Meta[metaFingerprint] = fingerprint
		}
	}
	return ne, nil
}

func (sh *shard[S, C, E]) complete(c *completion[S, C, E]) {
	sh.inflight--
	e := c.e
	e.busy, e.flight = false, nil
	switch {
	case c.err == nil:
		// The commands have their answers (answer); what is left is the
		// shard's: the state, and the keys for recognizing retries.
		e.state, e.version = c.state, c.res.LastSeq
		for i, sp := range c.spans {
			if r := c.results[i]; sp.end > sp.start && sp.req.key != "" {
				e.keys.put(sp.req.key, keyResult{first: r.FirstSeq, last: r.Version, pos: r.Position, fingerprint: sp.req.fingerprint}, sh.rt.opts.IdempotencyKeys)
			}
		}
		sh.rt.metrics.appended(len(c.events))
		sh.maybeSnapshot(e)
		sh.weigh(e)
		sh.evictOverflow(e)
	case isRefusal(c.err):
		// The store refused the append as too large or malformed:
		// nothing was written, and the cached state still holds. Only
		// the commands of this append fail.
		for _, sp := range c.spans {
			sh.reject(sp.req, fmt.Errorf("aggregate: append to %s: %w", e.stream, c.err))
		}
	case errors.Is(c.err, eventstore.ErrVersionConflict):
		// Another writer (another process on the same store) moved the
		// aggregate: catch up from the store and decide again.
		if err := sh.catchUp(e); err != nil {
			sh.failAll(c, err)
			sh.evict(e)
			return
		}
		sh.weigh(e)
		var retry []*request[S, C, E]
		for _, sp := range c.spans {
			sp.req.attempts++
			if sp.req.attempts > sh.rt.opts.MaxRetries {
				sh.rt.metrics.command(sp.req.start, outcomeConflict)
				sh.finish(sp.req, fmt.Errorf("aggregate: %s changed concurrently %d times: %w", e.stream, sp.req.attempts, c.err))
				continue
			}
			retry = append(retry, sp.req)
		}
		e.queue = append(retry, e.queue...)
	default:
		// The store failed; whether the events landed is unknown, so the
		// cached state cannot be trusted: forget it.
		sh.failAll(c, fmt.Errorf("aggregate: append to %s: %w", e.stream, c.err))
		sh.evict(e)
		return
	}
	sh.drain(e)
}

// isRefusal reports whether the store refused an append for its input
// (limits, malformed events): a definite "nothing written", unlike other
// errors, whose outcome is unknown.
func isRefusal(err error) bool {
	var le *eventstore.LimitError
	return errors.As(err, &le) || errors.Is(err, eventstore.ErrEmptyAppend)
}

func (sh *shard[S, C, E]) failAll(c *completion[S, C, E], err error) {
	for _, sp := range c.spans {
		sh.rt.metrics.command(sp.req.start, outcomeError)
		sh.finish(sp.req, err)
	}
	for _, q := range c.e.queue {
		sh.finish(q, err)
	}
	c.e.queue = nil
}

// drain decides the commands that queued while the aggregate was busy.
func (sh *shard[S, C, E]) drain(e *entry[S, C, E]) {
	if e.busy || len(e.queue) == 0 {
		return
	}
	// State reads that waited for the append see its outcome now.
	q := e.queue[:0]
	for _, r := range e.queue {
		if r.kind == reqState {
			sh.readState(e, r)
		} else {
			q = append(q, r)
		}
	}
	clear(e.queue[len(q):])
	e.queue = q
	if len(e.queue) == 0 {
		e.queue = nil
		return
	}
	n := min(len(e.queue), maxBatchCommands)
	next := e.queue[:n:n]
	e.queue = e.queue[n:]
	if len(e.queue) == 0 {
		e.queue = nil
	}
	sh.decide(e, next)
}

func (sh *shard[S, C, E]) reject(req *request[S, C, E], err error) {
	sh.rt.metrics.command(req.start, outcomeRejected)
	sh.finish(req, err)
}

func (sh *shard[S, C, E]) finish(req *request[S, C, E], err error) {
	req.err = err
	close(req.done)
}
