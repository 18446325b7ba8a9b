package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"
)

// The cassandra-blobs backend of the kv benchmark is not the kv
// repository: it is the storage benchmarks' own Cassandra workload, raw
// driver batches of INSERTs into their table
//
//	recording (PARTKEY int, ID uuid, VS_ID uuid, URL ascii,
//	           MESSAGE_TIME bigint, DATA blob,
//	           PRIMARY KEY ((PARTKEY, VS_ID), ID))
//
// with no existence check and no version, so that its rows compare with
// the published Cassandra figures. Each setting writes into a fresh
// table of the keyspace kvblobs_rfN (N the replication factor), dropped
// after the measurement. Batches are UNLOGGED (no batch log: the rows of
// a batch need not be applied together), each row's partition key
// PARTKEY the next of the setting's partitions in turn, VS_ID one
// random UUID per measurement.

// The published Cassandra figures: a two-node cluster (one seed, one
// replica, replication factor 2 unless the table varies it) on 32-core
// servers over 10 Gbit/s, the DataStax Java driver.
var blobSeed = map[string]float64{
	"batch-100B-8c/128": 67100, "batch-100B-8c/256": 63900, "batch-100B-8c/512": 55400,
	"batch-100B-8c/1024": 55800, "batch-100B-8c/8192": 23500, // 32768: timed out
	"batch-1kB-4c/128": 15600, "batch-1kB-4c/256": 20600, "batch-1kB-4c/512": 20300,
	"batch-1kB-4c/1024": 19400, "batch-1kB-4c/8192": 5500,
	"batch-5kB-1c/256": 8300, "batch-5kB-1c/512": 9200, "batch-5kB-1c/1024": 10000, "batch-5kB-1c/8192": 3000,
	"connections-100B/1": 27000, "connections-100B/2": 53000, "connections-100B/4": 75000,
	"connections-100B/8": 62000, "connections-100B/24": 62000,
	"connections-1kB/1": 17900, "connections-1kB/2": 31000, "connections-1kB/4": 42000, "connections-1kB/8": 40000,
	"connections-5kB/1": 9000, "connections-5kB/2": 14600, "connections-5kB/4": 16000, "connections-5kB/8": 10300,
	"connections-20kB/1": 3300, "connections-20kB/2": 4500, "connections-20kB/4": 3800,
	"partitions-100B/1": 58000, "partitions-100B/8": 71000, "partitions-100B/64": 70000,
	"partitions-10kB/1": 13200, "partitions-10kB/8": 9100, "partitions-10kB/64": 7300,
	"consistency/any": 67000, "consistency/one": 66000, "consistency/two": 66000,
	"replicas-100B/1": 121000, "replicas-100B/2": 72000,
	"replicas-10kB/1": 19200, "replicas-10kB/2": 8200,
	"payload/500000": 90, "payload/5000000": 9.5,
}

// blobSeedBytes is the published bytes on disk per 100-byte message.
const blobSeedBytes = 89

func sizeName(b int) string {
	if b >= 1000 && b%1000 == 0 {
		return strconv.Itoa(b/1000) + "kB"
	}
	return strconv.Itoa(b) + "B"
}

// blobSettings are the published Cassandra tables, for the tables asked.
// Unless a table varies them: 8 clients with 8 connections, batches of
// 256, 100-byte blobs, 8 partitions, consistency ONE, replication factor
// 2 when two or more contact points are given (1 with one). The
// configuration's Clients does not apply: the published tables fix them.
func blobSettings(cfg KVConfig) []setting {
	rf := min(2, len(cfg.Cassandra))
	base := setting{batch: 256, payload: 100, clients: 8, partitions: 8, consistency: "one", replicas: rf}
	var out []setting
	add := func(table, name string, f func(*setting)) {
		s := base
		s.table, s.name = table, name
		f(&s)
		out = append(out, s)
	}
	for _, t := range cfg.Tables {
		switch t {
		case "batch":
			for _, g := range []struct{ payload, clients int }{{100, 8}, {1000, 4}, {5000, 1}} {
				table := fmt.Sprintf("batch-%s-%dc", sizeName(g.payload), g.clients)
				for _, b := range []int{128, 256, 512, 1024, 8192, 32768} {
					add(table, strconv.Itoa(b), func(s *setting) { s.batch, s.payload, s.clients = b, g.payload, g.clients })
				}
			}
		case "connections":
			for _, p := range []int{100, 1000, 5000, 20000} {
				for _, c := range []int{1, 2, 4, 8, 24} {
					add("connections-"+sizeName(p), strconv.Itoa(c), func(s *setting) { s.payload, s.clients = p, c })
				}
			}
		case "partitions":
			for _, p := range []int{100, 10000} {
				for _, n := range []int{1, 8, 64} {
					add("partitions-"+sizeName(p), strconv.Itoa(n), func(s *setting) { s.payload, s.partitions = p, n })
				}
			}
		case "consistency":
			for _, c := range []string{"any", "one", "two"} {
				add(t, c, func(s *setting) { s.consistency = c })
			}
		case "replicas":
			for _, p := range []int{100, 10000} {
				for _, r := range []int{1, 2} {
					add("replicas-"+sizeName(p), strconv.Itoa(r), func(s *setting) { s.payload, s.replicas = p, r })
				}
			}
		case "payload":
			// The published large messages: consistency ONE, 2
			// partitions, 2 connections, batches of 2.
			for _, p := range []int{500000, 5000000} {
				add(t, strconv.Itoa(p), func(s *setting) { s.payload, s.clients, s.partitions, s.batch = p, 2, 2, 2 })
			}
		case "space":
			// Bytes on disk per 100-byte message, on one replica.
			// Whole MiB are read from the nodes: a 20 s fill at
			// least makes tens of them.
			add(t, "100", func(s *setting) { s.replicas, s.minDuration = 1, 20*time.Second })
		}
	}
	return out
}

// blobPutter writes the published table's rows with the driver.
type blobPutter struct {
	s          *gocql.Session
	hosts      []string
	keyspace   string
	table      string
	cons       gocql.Consistency
	partitions int
	vs         gocql.UUID
	next       atomic.Int64
	insert     string
	// space: the table flushes its memtable every second, and bytes
	// reports its size on disk.
	space bool
}

var blobConsistency = map[string]gocql.Consistency{"any": gocql.Any, "one": gocql.One, "two": gocql.Two}

func openBlobs(ctx context.Context, hosts []string, s setting) (*blobPutter, error) {
	if len(hosts) == 0 {
		return nil, errors.New("no Cassandra contact points (--cassandra)")
	}
	cons, ok := blobConsistency[s.consistency]
	if !ok {
		return nil, fmt.Errorf("consistency %q: any, one or two", s.consistency)
	}
	c := gocql.NewCluster(hosts...)
	c.Timeout = 30 * time.Second
	c.ConnectTimeout = 10 * time.Second
	c.NumConns = max(1, s.clients)
	c.Consistency = cons
	c.RetryPolicy = &gocql.SimpleRetryPolicy{NumRetries: 0}
	sess, err := c.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("cassandra %v: %w", hosts, err)
	}
	p := &blobPutter{s: sess, hosts: hosts, keyspace: fmt.Sprintf("kvblobs_rf%d", s.replicas), table: "recording_" + randomTag(),
		cons: cons, partitions: max(1, s.partitions), vs: gocql.TimeUUID(), space: s.table == "space"}
	opts := ""
	if p.space {
		opts = " WITH memtable_flush_period_in_ms = 1000"
	}
	ddl := []string{
		fmt.Sprintf(`CREATE KEYSPACE IF NOT EXISTS %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': %d}`, p.keyspace, s.replicas),
		fmt.Sprintf(`CREATE TABLE %s.%s (partkey int, id uuid, vs_id uuid, url ascii, message_time bigint, data blob, PRIMARY KEY ((partkey, vs_id), id))%s`, p.keyspace, p.table, opts),
	}
	for _, q := range ddl {
		if err := sess.Query(q).WithContext(ctx).Consistency(gocql.All).Exec(); err != nil {
			sess.Close()
			return nil, fmt.Errorf("cassandra: %w", err)
		}
	}
	if s.replicas > 1 {
		// A keyspace made on one node by an earlier run may claim more
		// replicas than this cluster has nodes: say so before the clock.
		var peers int
		if err := sess.Query(`SELECT COUNT(*) FROM system.peers`).WithContext(ctx).Scan(&peers); err == nil && peers+1 < s.replicas {
			sess.Close()
			return nil, fmt.Errorf("replication factor %d needs %d nodes, the cluster has %d (scripts/cassandra.sh start --nodes %d)", s.replicas, s.replicas, peers+1, s.replicas)
		}
	}
	p.insert = fmt.Sprintf(`INSERT INTO %s.%s (partkey, id, vs_id, url, message_time, data) VALUES (?, ?, ?, ?, ?, ?)`, p.keyspace, p.table)
	return p, nil
}

func (p *blobPutter) put(ctx context.Context, ids []string, value []byte) error {
	b := p.s.NewBatch(gocql.UnloggedBatch).WithContext(ctx)
	b.SetConsistency(p.cons)
	now := time.Now().UnixMilli()
	first := p.next.Add(int64(len(ids))) - int64(len(ids))
	for i := range ids {
		part := int((first + int64(i)) % int64(p.partitions))
		data := value
		if p.space {
			// Cassandra compresses its tables (LZ4 over 16 KiB chunks):
			// the one value of the other tables, repeated, would shrink
			// to nothing. Every row's own random bytes do not compress.
			data = make([]byte, len(value))
			_, _ = rand.Read(data)
		}
		b.Query(p.insert, part, gocql.TimeUUID(), p.vs, "/vs/service/endpoint", now, data)
	}
	return p.s.ExecuteBatch(b)
}

// bytes is the table's size on disk summed over the nodes, once its
// memtables are flushed: each node's system_views.disk_usage (whole MiB)
// read through a session to that node alone, until two readings 3 s
// apart agree. Only the space table measures it.
func (p *blobPutter) bytes(ctx context.Context) (int64, error) {
	if !p.space {
		return 0, nil
	}
	var last int64 = -1
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(3 * time.Second):
		}
		n, err := p.diskUsage(ctx)
		if err != nil {
			return 0, err
		}
		if n > 0 && n == last {
			return n, nil
		}
		last = n
	}
	return 0, errors.New("the table's size on disk did not settle in 2 minutes")
}

// nodes is every node's host:port: the first contact point's node and
// its peers, on the contact point's port.
func (p *blobPutter) nodes(ctx context.Context) ([]string, error) {
	host, port, err := net.SplitHostPort(p.hosts[0])
	if err != nil {
		host, port = p.hosts[0], "9042"
	}
	s, err := p.only(host, port)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	out := []string{net.JoinHostPort(host, port)}
	iter := s.Query(`SELECT rpc_address FROM system.peers`).WithContext(ctx).Iter()
	var ip net.IP
	for iter.Scan(&ip) {
		out = append(out, net.JoinHostPort(ip.String(), port))
	}
	return out, iter.Close()
}

// only is a session to one node alone.
func (p *blobPutter) only(host, port string) (*gocql.Session, error) {
	c := gocql.NewCluster(net.JoinHostPort(host, port))
	c.HostFilter = gocql.WhiteListHostFilter(host)
	c.Timeout = 10 * time.Second
	s, err := c.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("cassandra %s: %w", host, err)
	}
	return s, nil
}

func (p *blobPutter) diskUsage(ctx context.Context) (int64, error) {
	nodes, err := p.nodes(ctx)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, h := range nodes {
		host, port, _ := net.SplitHostPort(h)
		s, err := p.only(host, port)
		if err != nil {
			return 0, err
		}
		var mib int64
		err = s.Query(`SELECT mebibytes FROM system_views.disk_usage WHERE keyspace_name = ? AND table_name = ?`, p.keyspace, p.table).
			WithContext(ctx).Scan(&mib)
		s.Close()
		if err != nil && !errors.Is(err, gocql.ErrNotFound) {
			return 0, fmt.Errorf("disk_usage on %s: %w", h, err)
		}
		total += mib << 20
	}
	return total, nil
}

func (p *blobPutter) close() error {
	err := p.s.Query(fmt.Sprintf(`DROP TABLE IF EXISTS %s.%s`, p.keyspace, p.table)).Exec()
	p.s.Close()
	return err
}
