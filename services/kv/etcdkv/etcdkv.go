// Package etcdkv is the etcd backend of the kv repository, on etcd's
// official v3 client.
//
// A key is the etcd key prefix + id. etcd keeps, for every key, its
// Version: 1 when created, one more with every put, and back to 0 when
// deleted — exactly the repository's version, so nothing else is stored.
// Every write is one transaction: Add compares each key's CreateRevision
// with 0 (absent), Update each key's Version with the expected one, Delete
// the key's Version and then deletes the key and the prefix id + "/". When
// a comparison fails, the transaction's else branch reads the keys, so the
// failure is reported from the same revision.
package etcdkv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logbook/logbook/services/kv"
)

// maxMessage is the largest gRPC message the client sends or takes.
const maxMessage = 64 << 20

// ValueLimit is the largest value the client sends: what fits in one of
// its messages with room for the request around it. The server refuses
// less than that unless it is started with a larger --max-request-bytes
// (1.5 MiB by default; scripts/etcd.sh starts it with 32 MiB): such a
// refusal is a *kv.TooLargeError too. etcd is made for small values —
// each one goes through the Raft log, is held in memory by every member
// until applied, and is sent whole to a member that falls behind — and
// does not take values of 100 MB.
func (b *Backend) ValueLimit() (int64, string) {
	return maxMessage - 1<<20, "etcd's client sends messages of at most 64 MiB"
}

// tooLarge turns etcd's refusal of a request over its size limit into a
// *kv.TooLargeError.
func tooLarge(err error, items []kv.Item) error {
	if !errors.Is(err, rpctypes.ErrGRPCRequestTooLarge) && !errors.Is(err, rpctypes.ErrRequestTooLarge) && status.Code(err) != codes.ResourceExhausted {
		return err
	}
	var n int64
	for _, it := range items {
		n += int64(len(it.Value))
	}
	return &kv.TooLargeError{Size: n, Why: "more than the etcd server takes in one request (its --max-request-bytes): " + err.Error()}
}

// Options configure the backend.
type Options struct {
	// Prefix starts every etcd key the backend uses (default "kv/").
	Prefix string
}

// Backend is the etcd kv backend.
type Backend struct {
	c      *clientv3.Client
	prefix string
}

// Open connects to etcd at endpoints (host:port) and checks that it
// answers.
func Open(ctx context.Context, endpoints []string, o Options) (*Backend, error) {
	if o.Prefix == "" {
		o.Prefix = "kv/"
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:          endpoints,
		DialTimeout:        5 * time.Second,
		MaxCallSendMsgSize: maxMessage,
		MaxCallRecvMsgSize: maxMessage,
		// Failures reach the caller as errors; the client's own log
		// would only repeat them.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: etcdkv: %w", kv.ErrUnavailable, err)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := c.Status(sctx, endpoints[0]); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("%w: etcdkv: %v: %w", kv.ErrUnavailable, endpoints, err)
	}
	return &Backend{c: c, prefix: o.Prefix}, nil
}

// Client is the underlying client.
func (b *Backend) Client() *clientv3.Client { return b.c }

func (b *Backend) key(id string) string { return b.prefix + id }

// Close closes the connection.
func (b *Backend) Close() error { return b.c.Close() }

// Get reads the key (a linearizable read: etcd's default).
func (b *Backend) Get(ctx context.Context, id string) (kv.Entry, bool, error) {
	r, err := b.c.Get(ctx, b.key(id))
	if err != nil {
		return kv.Entry{}, false, err
	}
	if len(r.Kvs) == 0 {
		return kv.Entry{}, false, nil
	}
	return kv.Entry{ID: id, Version: uint64(r.Kvs[0].Version), Value: r.Kvs[0].Value}, true, nil
}

// Add adds the items atomically.
func (b *Backend) Add(ctx context.Context, items []kv.Item) error {
	cmps := make([]clientv3.Cmp, len(items))
	puts := make([]clientv3.Op, len(items))
	gets := make([]clientv3.Op, len(items))
	for i, it := range items {
		k := b.key(it.ID)
		cmps[i] = clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
		puts[i] = clientv3.OpPut(k, string(it.Value))
		gets[i] = clientv3.OpGet(k, clientv3.WithKeysOnly())
	}
	r, err := b.c.Txn(ctx).If(cmps...).Then(puts...).Else(gets...).Commit()
	if err != nil {
		return tooLarge(err, items)
	}
	if r.Succeeded {
		return nil
	}
	for i, rr := range r.Responses {
		if len(rr.GetResponseRange().Kvs) > 0 {
			return &kv.BatchError{Index: i, Err: kv.Exists(items[i].ID)}
		}
	}
	return fmt.Errorf("etcdkv: add failed with no key present")
}

// Update compares-and-sets the items atomically.
func (b *Backend) Update(ctx context.Context, items []kv.Item) ([]uint64, error) {
	cmps := make([]clientv3.Cmp, len(items))
	puts := make([]clientv3.Op, len(items))
	gets := make([]clientv3.Op, len(items))
	versions := make([]uint64, len(items))
	for i, it := range items {
		k := b.key(it.ID)
		cmps[i] = clientv3.Compare(clientv3.Version(k), "=", int64(it.Version))
		puts[i] = clientv3.OpPut(k, string(it.Value))
		gets[i] = clientv3.OpGet(k, clientv3.WithKeysOnly())
		versions[i] = it.Version + 1
	}
	r, err := b.c.Txn(ctx).If(cmps...).Then(puts...).Else(gets...).Commit()
	if err != nil {
		return nil, tooLarge(err, items)
	}
	if r.Succeeded {
		return versions, nil
	}
	for i, rr := range r.Responses {
		kvs := rr.GetResponseRange().Kvs
		switch {
		case len(kvs) == 0:
			return nil, &kv.BatchError{Index: i, Err: kv.NotFound(items[i].ID)}
		case uint64(kvs[0].Version) != items[i].Version:
			return nil, &kv.BatchError{Index: i, Err: kv.Stale(items[i].ID, items[i].Version, uint64(kvs[0].Version))}
		}
	}
	return nil, fmt.Errorf("etcdkv: update failed with every version matching")
}

// Delete deletes the key and everything under it.
func (b *Backend) Delete(ctx context.Context, id string, version uint64) error {
	k := b.key(id)
	r, err := b.c.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(k), "=", int64(version))).
		Then(clientv3.OpDelete(k), clientv3.OpDelete(k+"/", clientv3.WithPrefix())).
		Else(clientv3.OpGet(k, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return err
	}
	if r.Succeeded {
		return nil
	}
	kvs := r.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return kv.NotFound(id)
	}
	return kv.Stale(id, version, uint64(kvs[0].Version))
}
