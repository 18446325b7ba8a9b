package aggregate

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

// Runtime runs the aggregates of one Definition on a store. It is safe for
// concurrent use.
type Runtime[S, C, E any] struct {
	store   eventstore.Store
	def     Definition[S, C, E]
	opts    Options
	shards  []*shard[S, C, E]
	metrics *metrics
	log     *slog.Logger

	mu     sync.RWMutex // guards closed against sends on shard inboxes
	closed bool
	wg     sync.WaitGroup
}

// New starts a runtime. Close stops it.
func New[S, C, E any](store eventstore.Store, def Definition[S, C, E], opts Options) (*Runtime[S, C, E], error) {
	if def.Kind == "" || def.Decide == nil || def.Evolve == nil || def.Events == nil {
		return nil, fmt.Errorf("aggregate: definition needs Kind, Decide, Evolve and Events")
	}
	if def.Initial == nil {
		def.Initial = func(string) S { var s S; return s }
	}
	if def.SnapshotEvery > 0 && def.Snapshots == nil {
		return nil, fmt.Errorf("aggregate %s: SnapshotEvery without a Snapshots codec", def.Kind)
	}
	opts = opts.withDefaults()
	m, err := newMetrics(opts.Registerer, def.Kind)
	if err != nil {
		return nil, err
	}
	r := &Runtime[S, C, E]{store: store, def: def, opts: opts, metrics: m, log: opts.Logger.With("aggregate", def.Kind)}
	perShard := max(1, opts.CacheSize/opts.Shards)
	for range opts.Shards {
		sh := newShard(r, perShard)
		if def.Weight != nil {
			sh.budget = max(1, opts.CacheBytes/int64(opts.Shards))
		}
		r.shards = append(r.shards, sh)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			sh.run()
		}()
	}
	return r, nil
}

// Close stops accepting commands, finishes those accepted, and returns.
func (r *Runtime[S, C, E]) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	for _, sh := range r.shards {
		close(sh.in)
	}
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

// Options returns the options in force, defaults filled in.
func (r *Runtime[S, C, E]) Options() Options { return r.opts }

// Stream returns the stream id of aggregate id.
func (r *Runtime[S, C, E]) Stream(id string) string { return r.def.Kind + "-" + id }

// Option adjusts one command.
type Option func(*callOptions)

type callOptions struct {
	key    string
	expect int64 // -1: none
}

// WithIdempotencyKey makes a retried command safe: a command whose key the
// aggregate has seen returns the original result and changes nothing. The
// key is stored with the command's events, so it survives restarts, and
// with a fingerprint of the command (its type and JSON encoding): the
// same key with another command is refused with ErrKeyReused.
func WithIdempotencyKey(key string) Option { return func(o *callOptions) { o.key = key } }

// WithExpectedVersion refuses the command with an *eventstore.ConflictError
// unless the aggregate is at version v: optimistic concurrency for clients
// that decided on a state they read.
func WithExpectedVersion(v uint64) Option { return func(o *callOptions) { o.expect = int64(v) } }

// Execute runs cmd on aggregate id and returns once its events are durable.
// A domain error from Decide is returned unchanged.
func (r *Runtime[S, C, E]) Execute(ctx context.Context, id string, cmd C, opts ...Option) (Result[E], error) {
	req := &request[S, C, E]{kind: reqCommand, id: id, cmd: cmd}
	return r.do(ctx, req, opts)
}

// Create runs cmd on a new aggregate with a generated id (derived from the
// idempotency key when there is one, so that a retried create finds the
// aggregate its first attempt made).
func (r *Runtime[S, C, E]) Create(ctx context.Context, cmd C, opts ...Option) (Result[E], error) {
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	id := eventstore.NewID().String()
	if o.key != "" {
		id = keyID(r.def.Kind, o.key)
	}
	req := &request[S, C, E]{kind: reqCreate, id: id, cmd: cmd}
	return r.do(ctx, req, opts)
}

// State returns the current state and version of aggregate id, through its
// shard, so it reflects every command acknowledged before the call.
// ErrNotFound if the aggregate has no events.
func (r *Runtime[S, C, E]) State(ctx context.Context, id string) (S, uint64, error) {
	req := &request[S, C, E]{kind: reqState, id: id}
	_, err := r.do(ctx, req, nil)
	return req.state, req.version, err
}

func (r *Runtime[S, C, E]) do(ctx context.Context, req *request[S, C, E], opts []Option) (Result[E], error) {
	o := callOptions{expect: -1}
	for _, opt := range opts {
		opt(&o)
	}
	if req.id == "" {
		return Result[E]{}, fmt.Errorf("aggregate %s: empty id", r.def.Kind)
	}
	req.key, req.expect = o.key, o.expect
	if req.key != "" && req.kind != reqState {
		req.fingerprint = fingerprint(req.cmd)
	}
	req.ctx = ctx
	req.start = time.Now()
	req.done = make(chan struct{})
	sh := r.shards[shardOf(req.id, len(r.shards))]
	r.mu.RLock()
	if r.closed {
		r.mu.RUnlock()
		return Result[E]{}, ErrClosed
	}
	select {
	case sh.in <- req:
	case <-ctx.Done():
		r.mu.RUnlock()
		return Result[E]{}, ctx.Err()
	}
	r.mu.RUnlock()
	select {
	case <-req.done:
		return req.result, req.err
	case <-ctx.Done():
		// Like an append, a command given up on may still take effect;
		// retrying it with the same idempotency key is safe.
		return Result[E]{}, ctx.Err()
	}
}

func shardOf(id string, n int) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum64() % uint64(n))
}

// keyID derives an aggregate id from an idempotency key: a name-based UUID
// (version 5 layout) of the kind and the key.
func keyID(kind, key string) string {
	sum := sha1.Sum([]byte(kind + "\x00" + key))
	var id eventstore.ID
	copy(id[:], sum[:16])
	id[6] = id[6]&0x0f | 0x50
	id[8] = id[8]&0x3f | 0x80
	return id.String()
}

// fingerprint names a command by its type and JSON encoding (map keys
// sorted, so equal commands encode alike). A command that cannot be
// encoded has none, and its key is then trusted alone.
func fingerprint(cmd any) string {
	b, err := json.Marshal(cmd)
	if err != nil {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "%T\x00", cmd)
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)[:12])
}
