package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/logbook/logbook/internal/progress"
	"github.com/logbook/logbook/lab/plot"
	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/cassandrakv"
	"github.com/logbook/logbook/services/kv/etcdkv"
	"github.com/logbook/logbook/services/kv/pebblekv"
	"github.com/logbook/logbook/services/kv/pgkv"
	"github.com/logbook/logbook/services/kv/rediskv"
)

// KVConfig is the kv benchmark: puts per second into each backend, by
// batch size, payload, connections and persistence mode.
type KVConfig struct {
	// Backends: embedded, postgres, redis, etcd, cassandra, kafka, and
	// cassandra-blobs (the published Cassandra workload, see blobs.go).
	Backends []string
	// Tables: batch, payload, connections, partitions, persistence,
	// replicas (Kafka, cassandra-blobs), consistency and space
	// (cassandra-blobs); batch-20kB and connections-20kB are the batch
	// and connections tables with 20 kB values (cassandra-blobs splits
	// its own by blob size).
	Tables []string
	// Duration of each measurement (each row).
	Duration time.Duration
	// Clients put concurrently (except in the connections table).
	Clients int
	DataDir string   // the embedded backend's parent directory
	PG      string   // PostgreSQL URL
	Redis   string   // host:port
	Etcd    []string // endpoints
	Kafka   []string // brokers
	// Cassandra is the contact points (host:port) of a Cassandra cluster.
	Cassandra []string
	// UpdateClients compare-and-set one key each in the CAS row of the
	// embedded backend (0: no CAS row).
	UpdateClients int
	Progress      *progress.Counter
}

// KVRow is one measurement.
type KVRow struct {
	Backend         string  `json:"backend"`
	Table           string  `json:"table"`
	Setting         string  `json:"setting"`
	OpsPerSec       float64 `json:"ops_per_sec"`
	P99Ms           float64 `json:"p99_ms"`
	BytesPerMessage float64 `json:"bytes_per_message"`
	// Seed is the published figure for the same setting, for Redis,
	// Kafka and Cassandra, where it has one (0: none).
	Seed float64 `json:"seed,omitempty"`
	// SeedBytesPerMessage is the published bytes per message, where the
	// row measures it (0: none).
	SeedBytesPerMessage float64 `json:"seed_bytes_per_message,omitempty"`
	// Error says why the setting could not be measured.
	Error string `json:"error,omitempty"`
}

// KVResult is every row measured.
type KVResult struct {
	Rows []KVRow `json:"rows"`
}

// Table prints the result as aligned columns.
func (r *KVResult) Table() [][]string {
	out := [][]string{{"table", "setting", "backend", "puts/s", "p99 ms", "B/msg", "reference puts/s"}}
	for _, row := range r.Rows {
		seed := ""
		if row.Seed > 0 {
			seed = fmt.Sprintf("%.0f", row.Seed)
		}
		bpm := ""
		if row.BytesPerMessage > 0 {
			bpm = fmt.Sprintf("%.0f", row.BytesPerMessage)
		}
		if row.SeedBytesPerMessage > 0 {
			bpm += fmt.Sprintf(" (reference %.0f)", row.SeedBytesPerMessage)
		}
		if row.Error != "" {
			out = append(out, []string{row.Table, row.Setting, row.Backend, "failed: " + row.Error, "", "", seed})
			continue
		}
		out = append(out, []string{row.Table, row.Setting, row.Backend, fmt.Sprintf("%.0f", row.OpsPerSec), fmt.Sprintf("%.2f", row.P99Ms), bpm, seed})
	}
	return out
}

// The published figures (100-byte messages unless the setting says): Redis
// LPUSH and Kafka producers on a 32-core server over 10 Gbit/s.
var kvSeed = map[string]float64{
	"kafka/partitions/1": 535e3, "kafka/partitions/2": 457e3, "kafka/partitions/4": 493e3, "kafka/partitions/8": 284e3,
	"redis/batch/128": 570e3, "redis/batch/256": 570e3, "redis/batch/1024": 557e3, "redis/batch/32768": 600e3,
	"kafka/batch/128": 392e3, "kafka/batch/256": 432e3, "kafka/batch/512": 433e3, "kafka/batch/1024": 495e3, "kafka/batch/32768": 396e3,
	"redis/payload/100": 960e3, "redis/payload/20000": 38e3, "redis/payload/500000": 1418, "redis/payload/5000000": 85,
	"kafka/payload/100": 640e3, "kafka/payload/20000": 6e3, "kafka/payload/500000": 314,
	"redis/persistence/none": 960e3, "redis/persistence/everysec": 800e3, "redis/persistence/always": 330e3,
	"redis/connections/2": 750e3, "redis/connections/4": 646e3, "redis/connections/8": 560e3, "redis/connections/32": 960e3,
	"redis/connections/128": 998e3,
	// Kafka's connections table was published per connection (84k, 74k,
	// 62k, 58k, 37k and 17k for 1, 2, 4, 8, 16, 32, batches of 512):
	// here the total over all connections.
	"kafka/connections/1": 84e3, "kafka/connections/2": 148e3, "kafka/connections/4": 248e3,
	"kafka/connections/8": 464e3, "kafka/connections/16": 592e3, "kafka/connections/32": 544e3,
	// 20 kB values: Redis's batch and connections rows; Kafka's one
	// batch figure (9k, its batch size not stated: put at the first
	// column) and its connections row per connection (3.2k, 2.5k, 1.7k
	// at 1, 2, 4), here the total.
	"redis/batch-20kB/128": 38e3, "redis/batch-20kB/256": 40e3, "redis/batch-20kB/1024": 35e3, "redis/batch-20kB/32768": 33e3,
	"kafka/batch-20kB/128":     9e3,
	"redis/connections-20kB/1": 9.2e3, "redis/connections-20kB/2": 16.8e3, "redis/connections-20kB/4": 20.8e3,
	"redis/connections-20kB/8": 34e3, "redis/connections-20kB/32": 35e3, "redis/connections-20kB/128": 52e3,
	"kafka/connections-20kB/1": 3.2e3, "kafka/connections-20kB/2": 5e3, "kafka/connections-20kB/4": 6.8e3,
	"kafka/replicas/1": 577e3, "kafka/replicas/2": 536e3,
}

// hugePayload is the payload table's largest value, 100 MB.
const hugePayload = 100_000_000

// benchLimits lets the payload table's largest value through. A backend
// that cannot store it (etcd, Cassandra: kv.ValueLimiter) lowers the limit
// to its own, and its row says why it failed.
var benchLimits = kv.Limits{MaxValueBytes: 128 << 20}

// kvSeedBytes is the published bytes per 100-byte message (Redis: in
// memory; Kafka and Cassandra: on disk).
var kvSeedBytes = map[string]float64{"redis": 152, "kafka": 183, "cassandra-blobs": blobSeedBytes}

// putter puts one batch of values under fresh ids.
type putter interface {
	put(ctx context.Context, ids []string, value []byte) error
	// bytes is the backend's storage in use (disk, or Redis's memory).
	bytes(ctx context.Context) (int64, error)
	close() error
}

type setting struct {
	table, name string
	batch       int
	payload     int
	clients     int
	mode        string // persistence: sync nosync | none everysec always | batch periodic
	// partitions: Kafka's topic partitions; for the other engines, the
	// key prefixes the ids are spread over (where the data resides). 0:
	// the default (8 topic partitions, one prefix per client).
	partitions int
	// replicas: Kafka's replication factor, Cassandra's (cassandra-blobs);
	// 0: the default (Kafka: the broker's).
	replicas int
	// consistency of cassandra-blobs' writes: any, one, two.
	consistency string
	// minDuration: the setting measures at least this long.
	minDuration time.Duration
	// refused, when set, is why the setting is not run: its row says so.
	refused string
}

func kvSettings(cfg KVConfig) []setting {
	var out []setting
	for _, t := range cfg.Tables {
		switch t {
		case "batch":
			for _, b := range []int{128, 256, 512, 1024, 8192, 32768} {
				out = append(out, setting{table: t, name: strconv.Itoa(b), batch: b, payload: 100, clients: cfg.Clients})
			}
		case "batch-20kB":
			// The published 20 kB rows (Redis; one Kafka figure). A
			// batch of 32,768 × 20 kB is 655 MB per client: refused
			// here, where 8 clients would want 5 GB in flight.
			for _, b := range []int{128, 256, 1024, 32768} {
				st := setting{table: t, name: strconv.Itoa(b), batch: b, payload: 20000, clients: cfg.Clients}
				if int64(b)*20000*int64(cfg.Clients) > 1<<30 {
					st.refused = fmt.Sprintf("not run: %d clients × a batch of %d × 20 kB is %d MB in flight, more than this benchmark allows itself (1 GiB)", cfg.Clients, b, int64(b)*20000*int64(cfg.Clients)/1e6)
				}
				out = append(out, st)
			}
		case "payload":
			for _, p := range []int{100, 1000, 5000, 20000, 500000, 5000000, hugePayload} {
				b := max(1, min(256, (4<<20)/p))
				c := cfg.Clients
				if p == hugePayload {
					c = 1 // one 100 MB value at a time, as the reference measured
				}
				out = append(out, setting{table: t, name: strconv.Itoa(p), batch: b, payload: p, clients: c})
			}
		case "connections":
			for _, c := range []int{1, 2, 4, 8, 16, 32, 128} {
				out = append(out, setting{table: t, name: strconv.Itoa(c), batch: 256, payload: 100, clients: c})
			}
		case "connections-20kB":
			// Batches of 64 (1.3 MB): 128 clients of 256 × 20 kB would
			// hold 655 MB in flight.
			for _, c := range []int{1, 2, 4, 8, 16, 32, 128} {
				out = append(out, setting{table: t, name: strconv.Itoa(c), batch: 64, payload: 20000, clients: c})
			}
		case "partitions":
			// The published setting: 8 connections, batches of 256, 100 bytes.
			for _, n := range []int{1, 2, 4, 8, 16, 64} {
				out = append(out, setting{table: t, name: strconv.Itoa(n), batch: 256, payload: 100, clients: 8, partitions: n})
			}
		case "persistence":
			for _, m := range []string{"sync", "nosync", "none", "everysec", "always", "batch", "periodic"} {
				out = append(out, setting{table: t, name: m, batch: 256, payload: 100, clients: cfg.Clients, mode: m})
			}
		case "replicas":
			// Kafka's replication factor, 100-byte messages, 8 topics'
			// worth of clients; the published run's batches are not
			// stated: 256 as in the other tables.
			for _, r := range []int{1, 2} {
				out = append(out, setting{table: t, name: strconv.Itoa(r), batch: 256, payload: 100, clients: cfg.Clients, replicas: r})
			}
		}
	}
	return out
}

// RunKV measures every backend for every setting of the tables asked.
func RunKV(ctx context.Context, cfg KVConfig) (*KVResult, error) {
	if cfg.Duration <= 0 {
		cfg.Duration = 2 * time.Second
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 8
	}
	res := &KVResult{}
	for _, b := range cfg.Backends {
		settings := kvSettings(cfg)
		if b == "cassandra-blobs" {
			settings = blobSettings(cfg)
		}
		for _, s := range settings {
			if s.mode != "" && !modeApplies(b, s.mode) {
				continue
			}
			if s.replicas > 0 && b != "kafka" && b != "cassandra-blobs" {
				continue
			}
			if s.refused != "" {
				res.Rows = append(res.Rows, KVRow{Backend: b, Table: s.table, Setting: s.name, Error: s.refused, Seed: seedFor(b, s)})
				continue
			}
			row, err := measure(ctx, cfg, b, s)
			if err != nil {
				// One engine refusing one setting (etcd's request
				// timeout on huge transactions) is a result too.
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
				row = KVRow{Backend: b, Table: s.table, Setting: s.name, Error: err.Error(), Seed: seedFor(b, s)}
			}
			res.Rows = append(res.Rows, row)
		}
		if b == "embedded" && cfg.UpdateClients > 0 {
			row, err := measureCAS(ctx, cfg)
			if err != nil {
				return res, fmt.Errorf("embedded CAS: %w", err)
			}
			res.Rows = append(res.Rows, row)
		}
	}
	return res, nil
}

func modeApplies(backend, mode string) bool {
	switch backend {
	case "embedded":
		return mode == "sync" || mode == "nosync"
	case "redis":
		return mode == "none" || mode == "everysec" || mode == "always"
	case "cassandra":
		return mode == "batch" || mode == "periodic"
	}
	return false
}

func randomTag() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func open(ctx context.Context, cfg KVConfig, backend string, s setting) (putter, error) {
	tag := randomTag()
	switch backend {
	case "embedded":
		dir := filepath.Join(cfg.DataDir, "kv-"+tag)
		b, err := pebblekv.Open(dir, pebblekv.Options{NoSync: s.mode == "nosync"})
		if err != nil {
			return nil, err
		}
		return &repoPutter{r: kv.New(b, benchLimits), size: func(context.Context) (int64, error) { return dirSize(dir) }, dir: dir}, nil
	case "postgres":
		if cfg.PG == "" {
			return nil, errors.New("no PostgreSQL URL (--postgres)")
		}
		schema := "kvbench_" + tag
		url, err := withSearchPath(cfg.PG, schema)
		if err != nil {
			return nil, err
		}
		b, err := pgkv.Open(ctx, url, pgkv.Options{MaxConns: int32(max(8, s.clients))})
		if err != nil {
			return nil, err
		}
		pool := b.Pool()
		return &repoPutter{r: kv.New(b, benchLimits), size: func(ctx context.Context) (int64, error) {
			var n int64
			err := pool.QueryRow(ctx, `SELECT pg_total_relation_size('kv')`).Scan(&n)
			return n, err
		}, cleanup: func() { _, _ = pool.Exec(context.Background(), `DROP SCHEMA `+schema+` CASCADE`) }}, nil
	case "redis":
		if cfg.Redis == "" {
			return nil, errors.New("no Redis address (--redis)")
		}
		b, err := rediskv.Open(ctx, cfg.Redis, rediskv.Options{Prefix: "kvbench-" + tag + ":", PoolSize: max(10, s.clients)})
		if err != nil {
			return nil, err
		}
		c := b.Client()
		// The server is left in the persistence mode it was found in.
		was, err := c.ConfigGet(ctx, "append*").Result()
		if err != nil {
			return nil, err
		}
		restore := func() {
			bg := context.Background()
			_ = c.ConfigSet(bg, "appendfsync", was["appendfsync"]).Err()
			_ = c.ConfigSet(bg, "appendonly", was["appendonly"]).Err()
		}
		mode := s.mode
		if mode == "" {
			mode = "none"
		}
		if mode == "none" {
			err = c.ConfigSet(ctx, "appendonly", "no").Err()
		} else {
			if err = c.ConfigSet(ctx, "appendonly", "yes").Err(); err == nil {
				err = c.ConfigSet(ctx, "appendfsync", mode).Err()
			}
		}
		if err != nil {
			restore()
			return nil, fmt.Errorf("redis persistence %s: %w", mode, err)
		}
		base, _ := redisMemory(ctx, b)
		return &repoPutter{r: kv.New(b, benchLimits), size: func(ctx context.Context) (int64, error) {
			m, err := redisMemory(ctx, b)
			return m - base, err
		}, cleanup: func() {
			// Only this run's keys: the server may hold others.
			bg := context.Background()
			iter := c.Scan(bg, 0, "kvbench-"+tag+":*", 10000).Iterator()
			var keys []string
			for iter.Next(bg) {
				if keys = append(keys, iter.Val()); len(keys) == 10000 {
					_ = c.Unlink(bg, keys...).Err()
					keys = keys[:0]
				}
			}
			if len(keys) > 0 {
				_ = c.Unlink(bg, keys...).Err()
			}
			restore()
		}}, nil
	case "etcd":
		if len(cfg.Etcd) == 0 {
			return nil, errors.New("no etcd endpoints (--etcd)")
		}
		b, err := etcdkv.Open(ctx, cfg.Etcd, etcdkv.Options{Prefix: "kvbench-" + tag + "/"})
		if err != nil {
			return nil, err
		}
		prefix := "kvbench-" + tag + "/"
		return &repoPutter{r: kv.New(b, benchLimits), cleanup: func() {
			_, _ = b.Client().Delete(context.Background(), prefix, clientv3.WithPrefix())
		}}, nil
	case "cassandra":
		if len(cfg.Cassandra) == 0 {
			return nil, errors.New("no Cassandra contact points (--cassandra)")
		}
		part := "kvbench-" + tag
		b, err := cassandrakv.Open(ctx, cfg.Cassandra, cassandrakv.Options{Keyspace: "kvbench", Partition: part, Conns: max(2, s.clients/4)})
		if err != nil {
			return nil, err
		}
		if s.mode != "" {
			// The commit log's sync is the node's configuration, not a
			// client's: measure the mode the node runs, say how to get
			// the other.
			var mode string
			err := b.Session().Query(`SELECT value FROM system_views.settings WHERE name = 'commitlog_sync'`).WithContext(ctx).Scan(&mode)
			if err == nil && mode != s.mode {
				err = fmt.Errorf("the node runs commitlog_sync %s: restart it with CASSANDRA_COMMITLOG_SYNC=%s scripts/cassandra.sh start", mode, s.mode)
			}
			if err != nil {
				_ = b.Close()
				return nil, err
			}
		}
		return &repoPutter{r: kv.New(b, benchLimits), cleanup: func() {
			_ = b.Session().Query(`DELETE FROM kv WHERE part = ?`, part).Exec()
		}}, nil
	case "kafka":
		if len(cfg.Kafka) == 0 {
			return nil, errors.New("no Kafka brokers (--kafka)")
		}
		return openKafka(ctx, cfg.Kafka, "kvbench-"+tag, cmp.Or(s.partitions, 8), s.replicas)
	case "cassandra-blobs":
		return openBlobs(ctx, cfg.Cassandra, s)
	}
	return nil, fmt.Errorf("unknown backend %q (embedded, postgres, redis, etcd, cassandra, cassandra-blobs, kafka)", backend)
}

func redisMemory(ctx context.Context, b *rediskv.Backend) (int64, error) {
	info, err := b.Client().Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("no used_memory in INFO")
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n, err
}

type repoPutter struct {
	r       *kv.Repository
	size    func(context.Context) (int64, error)
	cleanup func()
	dir     string // removed after Close
}

func (p *repoPutter) put(ctx context.Context, ids []string, value []byte) error {
	items := make([]kv.Item, len(ids))
	for i, id := range ids {
		items[i] = kv.Item{ID: id, Value: value}
	}
	return p.r.AddBatch(ctx, items)
}

func (p *repoPutter) bytes(ctx context.Context) (int64, error) {
	if p.size == nil {
		return 0, nil
	}
	return p.size(ctx)
}

func (p *repoPutter) close() error {
	if p.cleanup != nil {
		p.cleanup() // before Close: it may use the backend's client
	}
	err := p.r.Close()
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
	return err
}

type kafkaPutter struct {
	cl         *kgo.Client
	topic      string
	partitions int
	replicas   int
}

// openKafka makes the topic with partitions and the replication factor
// replicas (0: the broker's default).
func openKafka(ctx context.Context, brokers []string, topic string, partitions, replicas int) (*kafkaPutter, error) {
	// No compression, as the published producers (Kafka 0.8's default):
	// the one value every record repeats would otherwise shrink the log
	// to a few bytes per message.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(16<<20), kgo.MaxBufferedRecords(1<<20), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return nil, err
	}
	mmb := strconv.Itoa(16 << 20)
	rf := int16(-1)
	if replicas > 0 {
		rf = int16(replicas)
	}
	created, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), rf, map[string]*string{"max.message.bytes": &mmb}, topic)
	if err == nil {
		err = created.Err
	}
	if err != nil {
		cl.Close()
		if replicas > 1 && errors.Is(err, kerr.InvalidReplicationFactor) {
			return nil, fmt.Errorf("replication factor %d needs %d brokers (scripts/kafka.sh start --brokers %d): %w", replicas, replicas, replicas, err)
		}
		return nil, fmt.Errorf("create topic %s: %w", topic, err)
	}
	k := &kafkaPutter{cl: cl, topic: topic, partitions: partitions, replicas: max(1, int(created.ReplicationFactor))}
	// A new topic's partitions have no leader for a moment: produce to
	// every partition once before the clock starts. The records name
	// their partition, which only a manual partitioner honours (the
	// measuring client hashes keys): a partition left cold made the
	// first batches sent to it wait for a metadata refresh, seconds.
	warmer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		k.close()
		return nil, err
	}
	defer warmer.Close()
	warm := make([]*kgo.Record, partitions)
	for i := range warm {
		warm[i] = &kgo.Record{Topic: topic, Partition: int32(i), Value: []byte("warm-up")}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := warmer.ProduceSync(wctx, warm...).FirstErr()
		if err == nil {
			break
		}
		if wctx.Err() != nil {
			k.close()
			return nil, fmt.Errorf("topic %s: %w", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The measuring client learns the leaders now that all are elected.
	if err := cl.ProduceSync(wctx, &kgo.Record{Topic: topic, Value: []byte("warm-up")}).FirstErr(); err != nil {
		k.close()
		return nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	return k, nil
}

func (k *kafkaPutter) put(ctx context.Context, ids []string, value []byte) error {
	recs := make([]*kgo.Record, len(ids))
	for i, id := range ids {
		recs[i] = &kgo.Record{Topic: k.topic, Key: []byte(id), Value: value}
	}
	return k.cl.ProduceSync(ctx, recs...).FirstErr()
}

// bytes is the topic's log size on disk (every partition's segments, as
// the brokers report them) divided by its replication factor: the bytes
// of one copy.
func (k *kafkaPutter) bytes(ctx context.Context) (int64, error) {
	// Every partition named: a topic with none asks for none.
	var set kadm.TopicsSet
	for p := range k.partitions {
		set.Add(k.topic, int32(p))
	}
	dirs, err := kadm.NewClient(k.cl).DescribeAllLogDirs(ctx, set)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, byDir := range dirs {
		for _, d := range byDir {
			if d.Err != nil {
				return 0, d.Err
			}
			d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
				if p.Topic == k.topic {
					n += p.Size
				}
			})
		}
	}
	return n / int64(k.replicas), nil
}

func (k *kafkaPutter) close() error {
	_, _ = kadm.NewClient(k.cl).DeleteTopics(context.Background(), k.topic)
	k.cl.Close()
	return nil
}

// measure runs one setting for cfg.Duration: s.clients put batches of
// fresh ids in a closed loop.
func measure(ctx context.Context, cfg KVConfig, backend string, s setting) (KVRow, error) {
	p, err := open(ctx, cfg, backend, s)
	if err != nil {
		return KVRow{}, err
	}
	defer p.close()
	value := make([]byte, s.payload)
	_, _ = rand.Read(value)
	var puts atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	deadline := time.Now().Add(max(cfg.Duration, s.minDuration))
	errs := make(chan error, s.clients)
	start := time.Now()
	var wg sync.WaitGroup
	for c := range s.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]string, s.batch)
			var mine []time.Duration
			for n := 0; time.Now().Before(deadline); n++ {
				for i := range ids {
					if s.partitions > 0 {
						ids[i] = fmt.Sprintf("p%d/c%d/%d/%d", (n*len(ids)+i)%s.partitions, c, n, i)
					} else {
						ids[i] = fmt.Sprintf("c%d/%d/%d", c, n, i)
					}
				}
				t0 := time.Now()
				if err := p.put(ctx, ids, value); err != nil {
					errs <- err
					return
				}
				mine = append(mine, time.Since(t0))
				puts.Add(int64(s.batch))
				if cfg.Progress != nil {
					cfg.Progress.Add(s.batch)
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return KVRow{}, err
	}
	row := KVRow{Backend: backend, Table: s.table, Setting: s.name, OpsPerSec: float64(puts.Load()) / elapsed.Seconds(),
		P99Ms: p99(lat), Seed: seedFor(backend, s)}
	if n, err := p.bytes(ctx); err == nil && n > 0 && puts.Load() > 0 {
		row.BytesPerMessage = float64(n) / float64(puts.Load())
		if s.payload == 100 {
			row.SeedBytesPerMessage = kvSeedBytes[backend]
		}
	}
	return row, nil
}

// seedFor is the published puts/s for the setting on the backend (0: none).
func seedFor(backend string, s setting) float64 {
	if backend == "cassandra-blobs" {
		return blobSeed[s.table+"/"+s.name]
	}
	return kvSeed[backend+"/"+s.table+"/"+s.name]
}

func p99(lat []time.Duration) float64 {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return float64(lat[len(lat)*99/100]) / 1e6
}

// measureCAS: UpdateClients clients each compare-and-set their own key on
// the embedded backend, durable, for cfg.Duration.
func measureCAS(ctx context.Context, cfg KVConfig) (KVRow, error) {
	p, err := open(ctx, cfg, "embedded", setting{})
	if err != nil {
		return KVRow{}, err
	}
	defer p.close()
	r := p.(*repoPutter).r
	n := cfg.UpdateClients
	for c := range n {
		if err := r.Add(ctx, "cas/"+strconv.Itoa(c), make([]byte, 100)); err != nil {
			return KVRow{}, err
		}
	}
	var done atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	deadline := time.Now().Add(cfg.Duration)
	errs := make(chan error, n)
	start := time.Now()
	var wg sync.WaitGroup
	for c := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, v := "cas/"+strconv.Itoa(c), uint64(1)
			value := make([]byte, 100)
			var mine []time.Duration
			for time.Now().Before(deadline) {
				t0 := time.Now()
				nv, err := r.Update(ctx, id, v, value)
				if err != nil {
					errs <- err
					return
				}
				mine = append(mine, time.Since(t0))
				v = nv
				done.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return KVRow{}, err
	}
	return KVRow{Backend: "embedded", Table: "cas", Setting: strconv.Itoa(n) + " clients", OpsPerSec: float64(done.Load()) / elapsed.Seconds(), P99Ms: p99(lat)}, nil
}

// kvAxis names each table's setting, the x axis of its figure.
var kvAxis = map[string]string{
	"batch":       "puts per batch",
	"payload":     "value size, bytes",
	"connections": "concurrent clients",
	"partitions":  "partitions (Kafka: topic partitions; others: key prefixes)",
	"persistence": "persistence mode",
	"cas":         "compare-and-set clients",
	"replicas":    "replication factor",
	"consistency": "write consistency level",
	"space":       "blob size, bytes",
}

// Figures draws each table of the run as the storage benchmarks draw
// them: puts per second against the table's setting, one line per
// backend. A table whose settings are not numbers (persistence modes)
// numbers them in order and names them in the axis label.
func (r *KVResult) Figures() map[string]plot.Figure {
	out := map[string]plot.Figure{}
	var tables []string
	settings := map[string][]string{}
	for _, row := range r.Rows {
		if _, ok := settings[row.Table]; !ok {
			tables = append(tables, row.Table)
		}
		if !slices.Contains(settings[row.Table], row.Setting) {
			settings[row.Table] = append(settings[row.Table], row.Setting)
		}
	}
	for _, t := range tables {
		numeric := true
		for _, s := range settings[t] {
			if _, err := strconv.ParseFloat(s, 64); err != nil {
				numeric = false
			}
		}
		// cassandra-blobs' tables are split by blob size: batch-100B-8c.
		family, _, _ := strings.Cut(t, "-")
		axis := kvAxis[family]
		xLabel := axis
		if xLabel == "" {
			xLabel = t
		}
		if family != t {
			xLabel += " (" + strings.TrimPrefix(t, family+"-") + ")"
		}
		if !numeric {
			names := make([]string, len(settings[t]))
			for i, s := range settings[t] {
				names[i] = fmt.Sprintf("%d = %s", i+1, s)
			}
			xLabel += " (" + strings.Join(names, ", ") + ")"
		}
		byBackend := map[string]*plot.Series{}
		var order []string
		for _, row := range r.Rows {
			if row.Table != t || row.Error != "" {
				continue
			}
			x := float64(slices.Index(settings[t], row.Setting) + 1)
			if numeric {
				x, _ = strconv.ParseFloat(row.Setting, 64)
			}
			s := byBackend[row.Backend]
			if s == nil {
				s = &plot.Series{Name: row.Backend}
				byBackend[row.Backend] = s
				order = append(order, row.Backend)
			}
			s.X, s.Y = append(s.X, x), append(s.Y, row.OpsPerSec)
		}
		panel := plot.Panel{YLabel: "puts per second"}
		for _, b := range order {
			panel.Series = append(panel.Series, *byBackend[b])
		}
		out[t] = plot.Figure{Title: "kv: puts per second by " + cmp.Or(axis, t), XLabel: xLabel, Panels: []plot.Panel{panel}}
	}
	return out
}
