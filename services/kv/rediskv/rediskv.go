// Package rediskv is the Redis backend of the kv repository, on go-redis
// v9.
//
// A key is a hash (field v: the version, d: the value) named prefix + "k:"
// + id; a sorted set, prefix + "ids", holds every id with score 0 so that
// the ids under "a" are a lexicographic range. Every write is one Lua
// script, which Redis runs atomically: the version checks and the writes
// of a batch, or a delete and its cascade, happen with nothing in between
// and in one round trip (WATCH/MULTI/EXEC would take three and retry under
// contention). Reads are one HMGET. The scripts touch keys they are not
// given (the cascade's children), so this backend is for one Redis
// server, not a Redis Cluster.
package rediskv

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/logbook/logbook/services/kv"
)

// Options configure the backend.
type Options struct {
	// Prefix starts every Redis key the backend uses (default "kv:").
	Prefix string
	// PoolSize is the number of connections (default go-redis's).
	PoolSize int
}

// Backend is the Redis kv backend.
type Backend struct {
	c      *redis.Client
	prefix string
}

// Open connects to the Redis server at addr (host:port) and checks that it
// answers.
func Open(ctx context.Context, addr string, o Options) (*Backend, error) {
	if o.Prefix == "" {
		o.Prefix = "kv:"
	}
	c := redis.NewClient(&redis.Options{
		Addr: addr, PoolSize: o.PoolSize,
		// A write is not idempotent: a script that timed out may have
		// run, and a retry would then answer "exists" or "stale" for the
		// caller's own write. Fail instead, and let the caller's deadline
		// (not a fixed read timeout) bound a large batch.
		MaxRetries:            -1,
		ReadTimeout:           -1,
		ContextTimeoutEnabled: true,
	})
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("%w: rediskv: %s: %w", kv.ErrUnavailable, addr, err)
	}
	return &Backend{c: c, prefix: o.Prefix}, nil
}

// Client is the underlying client, for benchmarks that compare with raw
// commands.
func (b *Backend) Client() *redis.Client { return b.c }

func (b *Backend) key(id string) string { return b.prefix + "k:" + id }
func (b *Backend) index() string        { return b.prefix + "ids" }

// Close closes the connections.
func (b *Backend) Close() error { return b.c.Close() }

// Get reads the key.
func (b *Backend) Get(ctx context.Context, id string) (kv.Entry, bool, error) {
	vals, err := b.c.HMGet(ctx, b.key(id), "v", "d").Result()
	if err != nil {
		return kv.Entry{}, false, err
	}
	vs, ok := vals[0].(string)
	if !ok {
		return kv.Entry{}, false, nil
	}
	v, err := strconv.ParseUint(vs, 10, 64)
	if err != nil {
		return kv.Entry{}, false, fmt.Errorf("rediskv: version of %q: %w", id, err)
	}
	d, _ := vals[1].(string)
	return kv.Entry{ID: id, Version: v, Value: []byte(d)}, true, nil
}

// KEYS[1] the index, KEYS[2..] the keys; ARGV[1..] the ids, then the
// values. Returns 0, or the 1-based item that exists.
var addScript = redis.NewScript(`
local n = #KEYS - 1
for i = 1, n do
  if redis.call('EXISTS', KEYS[i+1]) == 1 then return i end
end
for i = 1, n do
  redis.call('HSET', KEYS[i+1], 'v', '1', 'd', ARGV[n+i])
  redis.call('ZADD', KEYS[1], 0, ARGV[i])
end
return 0`)

// KEYS the keys; ARGV the expected versions, the new versions, the
// values. Returns {0, 0}, or {item, current version} (0: absent).
var updateScript = redis.NewScript(`
local n = #KEYS
for i = 1, n do
  local v = redis.call('HGET', KEYS[i], 'v')
  if not v then return {i, 0} end
  if v ~= ARGV[i] then return {i, tonumber(v)} end
end
for i = 1, n do
  redis.call('HSET', KEYS[i], 'v', ARGV[n+i], 'd', ARGV[2*n+i])
end
return {0, 0}`)

// KEYS[1] the index, KEYS[2] the key; ARGV: version, id, key prefix.
// Returns 0 when deleted, -1 when absent, else the current version.
var deleteScript = redis.NewScript(`
local v = redis.call('HGET', KEYS[2], 'v')
if not v then return -1 end
if v ~= ARGV[1] then return tonumber(v) end
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[1], ARGV[2])
local lo, hi = '[' .. ARGV[2] .. '/', '(' .. ARGV[2] .. '0'
local kids = redis.call('ZRANGEBYLEX', KEYS[1], lo, hi)
for _, id in ipairs(kids) do redis.call('DEL', ARGV[3] .. id) end
if #kids > 0 then redis.call('ZREMRANGEBYLEX', KEYS[1], lo, hi) end
return 0`)

// Add adds the items atomically.
func (b *Backend) Add(ctx context.Context, items []kv.Item) error {
	keys := make([]string, 1+len(items))
	args := make([]any, 2*len(items))
	keys[0] = b.index()
	for i, it := range items {
		keys[1+i] = b.key(it.ID)
		args[i] = it.ID
		args[len(items)+i] = it.Value
	}
	n, err := addScript.Run(ctx, b.c, keys, args...).Int()
	if err != nil {
		return err
	}
	if n > 0 {
		return &kv.BatchError{Index: n - 1, Err: kv.Exists(items[n-1].ID)}
	}
	return nil
}

// Update compares-and-sets the items atomically.
func (b *Backend) Update(ctx context.Context, items []kv.Item) ([]uint64, error) {
	n := len(items)
	keys := make([]string, n)
	args := make([]any, 3*n)
	versions := make([]uint64, n)
	for i, it := range items {
		keys[i] = b.key(it.ID)
		versions[i] = it.Version + 1
		args[i] = strconv.FormatUint(it.Version, 10)
		args[n+i] = strconv.FormatUint(it.Version+1, 10)
		args[2*n+i] = it.Value
	}
	res, err := updateScript.Run(ctx, b.c, keys, args...).Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(res) != 2 {
		return nil, errors.New("rediskv: unexpected script result")
	}
	if i := int(res[0]); i > 0 {
		it := items[i-1]
		if res[1] == 0 {
			return nil, &kv.BatchError{Index: i - 1, Err: kv.NotFound(it.ID)}
		}
		return nil, &kv.BatchError{Index: i - 1, Err: kv.Stale(it.ID, it.Version, uint64(res[1]))}
	}
	return versions, nil
}

// Delete deletes the key and everything under it.
func (b *Backend) Delete(ctx context.Context, id string, version uint64) error {
	n, err := deleteScript.Run(ctx, b.c, []string{b.index(), b.key(id)},
		strconv.FormatUint(version, 10), id, b.prefix+"k:").Int64()
	switch {
	case err != nil:
		return err
	case n == -1:
		return kv.NotFound(id)
	case n > 0:
		return kv.Stale(id, version, uint64(n))
	}
	return nil
}
