package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/logbook/logbook/lab/plot"
)

// KVLongConfig is the kv benchmark's long run: each backend is filled
// with Size bytes of values, and its puts per second are taken every
// Interval, to see whether a backend slows as it grows (compactions, a
// larger index, a full cache).
type KVLongConfig struct {
	KVConfig
	// Size is the bytes of values put into each backend (default 20 GB).
	Size int64
	// Payload is each value's size (default 1,000 bytes) and Batch the
	// puts per atomic batch (default 256); KVConfig.Clients put
	// concurrently.
	Payload, Batch int
	// Interval is how often throughput is taken (default one minute).
	Interval time.Duration
	// Replicas and Consistency are cassandra-blobs' replication factor
	// (default 1) and write consistency (default "one"): the published
	// long run's three columns are RF 1 with ONE, RF 2 with ONE and RF 2
	// with TWO. Other backends ignore them.
	Replicas    int
	Consistency string
}

// LongFloor is the embedded backend's floor: its last interval at least
// this share of its first.
const LongFloor = 0.6

// KVLongRow is one backend's fill.
type KVLongRow struct {
	Backend string `json:"backend"`
	// Setting is cassandra-blobs' replication factor and consistency.
	Setting string `json:"setting,omitempty"`
	// PerInterval is puts per second in each whole interval, in order.
	PerInterval []float64 `json:"puts_per_sec"`
	IntervalSec float64   `json:"interval_sec"`
	First       float64   `json:"first"`
	Last        float64   `json:"last"`
	// Ratio is Last / First (0 with fewer than two intervals).
	Ratio float64 `json:"last_over_first"`
	// Bytes is the value bytes put, Seconds the fill's length.
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	// DiskBytes is the backend's storage in use at the end, where known.
	DiskBytes int64 `json:"disk_bytes,omitempty"`
	// Floor is LongFloor for the embedded backend (0: no floor).
	Floor float64 `json:"floor,omitempty"`
	Error string  `json:"error,omitempty"`
}

// KVLongResult is every backend's fill.
type KVLongResult struct {
	Rows []KVLongRow `json:"rows"`
}

// RunKVLong fills each backend in turn. A backend that cannot hold Size
// (disk, memory, etcd's quota, one Cassandra partition) gets a row
// saying so instead. The values
// are removed after each fill.
func RunKVLong(ctx context.Context, cfg KVLongConfig) (*KVLongResult, error) {
	if cfg.Size <= 0 {
		cfg.Size = 20e9
	}
	if cfg.Payload <= 0 {
		cfg.Payload = 1000
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 8
	}
	res := &KVLongResult{}
	for _, b := range cfg.Backends {
		row := KVLongRow{Backend: b}
		if b == "cassandra-blobs" {
			// Named in the table by its column, as "cassandra-blobs RF 2 TWO".
			row.Setting = fmt.Sprintf("RF %d %s", max(1, cfg.Replicas), strings.ToUpper(cmp.Or(cfg.Consistency, "one")))
		}
		if b == "embedded" {
			row.Floor = LongFloor
		}
		err := canHold(cfg, b)
		if err == nil {
			err = fill(ctx, cfg, b, &row)
		}
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			row.Error = err.Error()
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// etcdQuota is the backend quota scripts/etcd.sh starts etcd with (8
// GiB, the most etcd advises).
const etcdQuota = 8 << 30

// cassandraRepoMost is the most the long run puts into the repository
// on Cassandra: the repository is one Cassandra partition (its batches
// and cascading deletes are atomic within one partition only), and
// Cassandra advises partitions of at most about 100 MB. A 20 GB fill of
// it on one node held 1,600–2,200 puts/s to 18 GB, then a write timed
// out (docs/benchmarks.md, "Long runs").
const cassandraRepoMost = 2e9

// canHold says why a backend cannot hold the fill, if it cannot: the
// disk of the data directory (where the local servers keep theirs too)
// with a quarter to spare for compactions and logs, Redis's memory,
// etcd's quota, or what one Cassandra partition holds.
func canHold(cfg KVLongConfig, backend string) error {
	switch backend {
	case "cassandra":
		if cfg.Size > cassandraRepoMost {
			return fmt.Errorf("the repository on Cassandra is one partition (atomic batches and cascading deletes need it), which Cassandra advises keeping near 100 MB: %d bytes is more than the %d this run puts into one (the published table, cassandra-blobs, spreads its rows over partitions and takes the fill)", cfg.Size, int64(cassandraRepoMost))
		}
		// and the disk, below
	case "etcd":
		if cfg.Size > etcdQuota/2 {
			return fmt.Errorf("etcd keeps at most its quota (%d GiB as scripts/etcd.sh starts it, the most etcd advises), and every version until compacted: %d bytes do not fit", etcdQuota>>30, cfg.Size)
		}
		return nil
	case "redis":
		avail, err := memAvailable()
		if err == nil && cfg.Size*3/2 > avail {
			return fmt.Errorf("redis keeps every value in memory: %d bytes (and its overhead) is more than the %d bytes available", cfg.Size, avail)
		}
		return nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(cfg.DataDir, &st); err != nil {
		return nil // unknown: try
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if need := cfg.Size * 5 / 4; need > free {
		return fmt.Errorf("%d bytes of values need about %d bytes of disk; %d are free under %s", cfg.Size, need, free, cfg.DataDir)
	}
	return nil
}

func memAvailable() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no MemAvailable")
}

// fill puts fresh keys into one backend until Size bytes of values are
// in, taking the puts per second of every interval.
func fill(ctx context.Context, cfg KVLongConfig, backend string, row *KVLongRow) error {
	st := setting{table: "long", batch: cfg.Batch, payload: cfg.Payload, clients: cfg.Clients}
	if backend == "cassandra-blobs" {
		// The published long run's table: 8 partitions; by default its
		// first column, replication factor 1 and consistency ONE.
		st.replicas, st.consistency, st.partitions = max(1, cfg.Replicas), cmp.Or(cfg.Consistency, "one"), 8
	}
	p, err := open(ctx, cfg.KVConfig, backend, st)
	if err != nil {
		return err
	}
	defer p.close()
	value := make([]byte, cfg.Payload)
	_, _ = rand.Read(value)
	target := (cfg.Size + int64(cfg.Payload) - 1) / int64(cfg.Payload) // puts
	var puts, claimed atomic.Int64
	errs := make(chan error, cfg.Clients)
	start := time.Now()
	stop := make(chan struct{})
	var sampled sync.WaitGroup
	sampled.Add(1)
	go func() {
		defer sampled.Done()
		t := time.NewTicker(cfg.Interval)
		defer t.Stop()
		last, lastAt := int64(0), start
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				n := puts.Load()
				row.PerInterval = append(row.PerInterval, float64(n-last)/now.Sub(lastAt).Seconds())
				last, lastAt = n, now
			}
		}
	}()
	var wg sync.WaitGroup
	for c := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]string, cfg.Batch)
			for n := 0; ; n++ {
				// Each batch claims its puts first, so the clients
				// together put the target and no more.
				if claimed.Add(int64(cfg.Batch)) > target+int64(cfg.Batch)-1 {
					return
				}
				for i := range ids {
					ids[i] = fmt.Sprintf("c%d/%d/%d", c, n, i)
				}
				if err := p.put(ctx, ids, value); err != nil {
					errs <- err
					return
				}
				puts.Add(int64(cfg.Batch))
				if cfg.Progress != nil {
					cfg.Progress.Add(cfg.Batch)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	sampled.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	row.Seconds = time.Since(start).Seconds()
	row.Bytes = puts.Load() * int64(cfg.Payload)
	row.IntervalSec = cfg.Interval.Seconds()
	if n := len(row.PerInterval); n > 0 {
		row.First, row.Last = row.PerInterval[0], row.PerInterval[n-1]
		if n >= 2 && row.First > 0 {
			row.Ratio = row.Last / row.First
		}
	}
	if n, err := p.bytes(ctx); err == nil {
		row.DiskBytes = n
	}
	return nil
}

// Table prints each backend's fill: first and last interval, their
// ratio against the floor, and the fill's size and length.
func (r *KVLongResult) Table() [][]string {
	out := [][]string{{"backend", "GB put", "minutes", "first puts/s", "last puts/s", "last/first", "floor", "GB on disk"}}
	for _, row := range r.Rows {
		if row.Error != "" {
			out = append(out, []string{row.Backend, "cannot: " + row.Error, "", "", "", "", "", ""})
			continue
		}
		floor := ""
		if row.Floor > 0 {
			verdict := "met"
			if row.Ratio < row.Floor {
				verdict = "NOT met"
			}
			floor = fmt.Sprintf("%.1f %s", row.Floor, verdict)
		}
		disk := ""
		if row.DiskBytes > 0 {
			disk = fmt.Sprintf("%.2f", float64(row.DiskBytes)/1e9)
		}
		out = append(out, []string{strings.TrimSpace(row.Backend + " " + row.Setting), fmt.Sprintf("%.2f", float64(row.Bytes)/1e9), fmt.Sprintf("%.1f", row.Seconds/60),
			fmt.Sprintf("%.0f", row.First), fmt.Sprintf("%.0f", row.Last), fmt.Sprintf("%.2f", row.Ratio), floor, disk})
	}
	return out
}

// Figure charts puts per second against time, one line per backend.
func (r *KVLongResult) Figure() plot.Figure {
	unit, div := "minutes", 60.0
	if len(r.Rows) > 0 && r.Rows[0].IntervalSec > 0 && r.Rows[0].IntervalSec < 60 {
		unit, div = "seconds", 1
	}
	panel := plot.Panel{YLabel: "puts per second"}
	for _, row := range r.Rows {
		if row.Error != "" {
			continue
		}
		s := plot.Series{Name: row.Backend}
		for i, v := range row.PerInterval {
			s.X = append(s.X, float64(i+1)*row.IntervalSec/div)
			s.Y = append(s.Y, v)
		}
		panel.Series = append(panel.Series, s)
	}
	return plot.Figure{Title: "kv: puts per second through a long fill", XLabel: unit + " since the fill began (end of each interval)", Panels: []plot.Panel{panel}}
}
