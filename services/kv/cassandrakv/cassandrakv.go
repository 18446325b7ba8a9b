// Package cassandrakv is the Apache Cassandra backend of the kv repository,
// on gocql.
//
// One table, kv(part, id, version, value) with PRIMARY KEY ((part), id),
// in the keyspace named at Open (created with SimpleStrategy and the
// replication factor given). A repository is one partition, part =
// Options.Partition: Cassandra's lightweight transactions (Paxos) are
// atomic across the rows of one partition only, and a repository's batches
// and cascading deletes must be atomic across any of its keys. Ids are
// the partition's clustering key, compared bytewise, so the ids under "a"
// are the range ["a/", "a0") and a cascading delete is one range deletion.
// The price is that one repository lives on one replica set and is
// bounded by what a Cassandra partition holds well (hundreds of MB);
// several repositories (partitions) spread over a cluster.
//
// Every write is one conditional statement or one conditional batch at
// SERIAL consistency (QUORUM for its commit): Add is INSERT … IF NOT
// EXISTS, Update is UPDATE … IF version = ?, Delete is DELETE … IF
// version = ? with the range deletion of the ids under it in the same
// batch. A write that is not applied returns the rows it compared, which
// say which item failed and why, from the same Paxos round. Reads are at
// SERIAL consistency too (a Paxos read), so that a read sees every write
// acknowledged before it began and the repository is linearizable; a
// QUORUM read could miss a write whose Paxos round is still being
// committed. No request is retried by the driver: a retried compare-and-set
// that had in fact been applied would report itself stale.
package cassandrakv

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/gocql/gocql"

	"github.com/logbook/logbook/services/kv"
)

// Options configure the backend.
type Options struct {
	// Keyspace holds the table (default "logbook"); created if absent.
	Keyspace string
	// Partition names the repository's partition (default "kv").
	Partition string
	// Replication is the keyspace's replication factor when Open creates
	// it (default 1).
	Replication int
	// Conns is the number of connections per node (default 2).
	Conns int
	// Timeout bounds one request (default 15 s).
	Timeout time.Duration
}

// Backend is the Cassandra kv backend.
type Backend struct {
	s    *gocql.Session
	part string
}

var keyspaceName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,47}$`)

// Open connects to the Cassandra nodes at hosts (host:port) and creates
// the keyspace and table if needed.
func Open(ctx context.Context, hosts []string, o Options) (*Backend, error) {
	if o.Keyspace == "" {
		o.Keyspace = "logbook"
	}
	if !keyspaceName.MatchString(o.Keyspace) {
		return nil, &kv.InvalidError{Reason: fmt.Sprintf("cassandrakv: keyspace %q: want a letter, then up to 47 letters, digits or _", o.Keyspace)}
	}
	if o.Partition == "" {
		o.Partition = "kv"
	}
	if o.Replication <= 0 {
		o.Replication = 1
	}
	if o.Conns <= 0 {
		o.Conns = 2
	}
	if o.Timeout <= 0 {
		o.Timeout = 15 * time.Second
	}
	if len(hosts) == 0 {
		return nil, &kv.InvalidError{Reason: "cassandrakv: no host"}
	}
	c := gocql.NewCluster(hosts...)
	c.Timeout = o.Timeout
	c.ConnectTimeout = 10 * time.Second
	c.NumConns = o.Conns
	c.Consistency = gocql.Quorum
	c.SerialConsistency = gocql.Serial
	// No retries: see the package comment.
	c.RetryPolicy = &gocql.SimpleRetryPolicy{NumRetries: 0}
	s, err := c.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("%w: cassandrakv: %v: %w", kv.ErrUnavailable, hosts, err)
	}
	ddl := []string{
		fmt.Sprintf(`CREATE KEYSPACE IF NOT EXISTS %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': %d}`, o.Keyspace, o.Replication),
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.kv (part text, id text, version bigint, value blob, PRIMARY KEY ((part), id))`, o.Keyspace),
	}
	for _, q := range ddl {
		if err := s.Query(q).WithContext(ctx).Consistency(gocql.All).Exec(); err != nil {
			s.Close()
			return nil, fmt.Errorf("%w: cassandrakv: %w", kv.ErrUnavailable, err)
		}
	}
	s.Close()
	// A session bound to the keyspace: statements name only the table.
	c.Keyspace = o.Keyspace
	// Each request goes to a replica of the partition, which coordinates
	// its Paxos round without another hop (a policy serves one session).
	c.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	s, err = c.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("%w: cassandrakv: %v: %w", kv.ErrUnavailable, hosts, err)
	}
	return &Backend{s: s, part: o.Partition}, nil
}

// Session is the underlying session.
func (b *Backend) Session() *gocql.Session { return b.s }

// Close closes the session.
func (b *Backend) Close() error {
	b.s.Close()
	return nil
}

// Healthy reports whether a node answers.
func (b *Backend) Healthy() error {
	var v string
	return classify(b.s.Query(`SELECT release_version FROM system.local`).Scan(&v))
}

// classify makes Cassandra's timeouts, after which a write may or may not
// have been applied, kv.ErrTimeout.
func classify(err error) error {
	var wt *gocql.RequestErrWriteTimeout
	var rt *gocql.RequestErrReadTimeout
	var cas *gocql.RequestErrCASWriteUnknown
	switch {
	case err == nil:
		return nil
	case errors.As(err, &wt), errors.As(err, &rt), errors.As(err, &cas), errors.Is(err, gocql.ErrTimeoutNoResponse):
		return fmt.Errorf("%w: cassandrakv: %w", kv.ErrTimeout, err)
	}
	return fmt.Errorf("cassandrakv: %w", err)
}

// Get reads the key with a Paxos read (SERIAL consistency).
func (b *Backend) Get(ctx context.Context, id string) (kv.Entry, bool, error) {
	var version int64
	var value []byte
	err := b.s.Query(`SELECT version, value FROM kv WHERE part = ? AND id = ?`, b.part, id).
		WithContext(ctx).Consistency(serialRead).Scan(&version, &value)
	if errors.Is(err, gocql.ErrNotFound) {
		return kv.Entry{}, false, nil
	}
	if err != nil {
		return kv.Entry{}, false, classify(err)
	}
	if value == nil {
		value = []byte{}
	}
	return kv.Entry{ID: id, Version: uint64(version), Value: value}, true, nil
}

// casBatch runs the conditional batch and, when it was not applied,
// returns the version of every row it compared that exists, by id.
func (b *Backend) casBatch(ctx context.Context, add func(*gocql.Batch)) (bool, map[string]int64, error) {
	batch := b.s.NewBatch(gocql.LoggedBatch).WithContext(ctx)
	batch.SetConsistency(gocql.Quorum)
	batch.SerialConsistency(gocql.Serial)
	add(batch)
	row := map[string]any{}
	applied, iter, err := b.s.MapExecuteBatchCAS(batch, row)
	if err != nil {
		return false, nil, classify(err)
	}
	found := map[string]int64{}
	if !applied {
		for {
			if id, ok := row["id"].(string); ok {
				if v, ok := row["version"].(int64); ok {
					found[id] = v
				}
			}
			row = map[string]any{}
			if !iter.MapScan(row) {
				break
			}
		}
	}
	if err := iter.Close(); err != nil {
		return false, nil, classify(err)
	}
	return applied, found, nil
}

// Add adds the items atomically.
func (b *Backend) Add(ctx context.Context, items []kv.Item) error {
	applied, found, err := b.casBatch(ctx, func(batch *gocql.Batch) {
		for _, it := range items {
			batch.Query(`INSERT INTO kv (part, id, version, value) VALUES (?, ?, 1, ?) IF NOT EXISTS`, b.part, it.ID, it.Value)
		}
	})
	if err != nil || applied {
		return err
	}
	for i, it := range items {
		if _, ok := found[it.ID]; ok {
			return &kv.BatchError{Index: i, Err: kv.Exists(it.ID)}
		}
	}
	return fmt.Errorf("cassandrakv: add not applied with no key present")
}

// Update compares-and-sets the items atomically.
func (b *Backend) Update(ctx context.Context, items []kv.Item) ([]uint64, error) {
	versions := make([]uint64, len(items))
	applied, found, err := b.casBatch(ctx, func(batch *gocql.Batch) {
		for i, it := range items {
			versions[i] = it.Version + 1
			batch.Query(`UPDATE kv SET version = ?, value = ? WHERE part = ? AND id = ? IF version = ?`,
				int64(it.Version+1), it.Value, b.part, it.ID, int64(it.Version))
		}
	})
	if err != nil {
		return nil, err
	}
	if applied {
		return versions, nil
	}
	for i, it := range items {
		v, ok := found[it.ID]
		switch {
		case !ok:
			return nil, &kv.BatchError{Index: i, Err: kv.NotFound(it.ID)}
		case uint64(v) != it.Version:
			return nil, &kv.BatchError{Index: i, Err: kv.Stale(it.ID, it.Version, uint64(v))}
		}
	}
	return nil, fmt.Errorf("cassandrakv: update not applied with every version matching")
}

// Delete deletes the key and, in the same Paxos round, every key under it.
func (b *Backend) Delete(ctx context.Context, id string, version uint64) error {
	applied, found, err := b.casBatch(ctx, func(batch *gocql.Batch) {
		batch.Query(`DELETE FROM kv WHERE part = ? AND id = ? IF version = ?`, b.part, id, int64(version))
		batch.Query(`DELETE FROM kv WHERE part = ? AND id >= ? AND id < ?`, b.part, id+"/", id+"0")
	})
	if err != nil || applied {
		return err
	}
	v, ok := found[id]
	if !ok {
		return kv.NotFound(id)
	}
	return kv.Stale(id, version, uint64(v))
}

// serialRead is SERIAL as a read's consistency level: gocql types it as
// a serial consistency only, but the protocol takes it for reads (a read
// at SERIAL runs Paxos).
const serialRead = gocql.Consistency(gocql.Serial)
