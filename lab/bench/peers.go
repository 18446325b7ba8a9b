package bench

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/lab/stats"
)

// PeersConfig describes `logbook bench peers`: the same append workloads
// on logbook's PostgreSQL store and on other event stores installed into
// the same database, one after the other in one run.
type PeersConfig struct {
	// MessageDB is the directory of Message DB's SQL (the database/
	// directory of its npm package, @eventide/message-db); "" leaves
	// Message DB out.
	MessageDB string
	// Python is a python with the eventsourcing library and its
	// PostgreSQL driver installed; "" leaves it out.
	Python string
	// Workloads are the rows' shapes; each runs on every store.
	Workloads []PeerWorkload
	Payload   int // bytes of data per event
	Streams   int // streams the events are spread over
	// NoCheckpoint skips the CHECKPOINT the bench otherwise asks of the
	// database before each timed run (it needs the pg_checkpoint role or
	// a superuser).
	NoCheckpoint bool
	// NoCeiling leaves out the row that writes the same events by
	// PostgreSQL's binary COPY (RunBaseline), a transaction per append: no
	// peer, but for batched appends the most a store on this database
	// could reach, for each peer's figure to be read against.
	NoCeiling bool
}

// PeerWorkload is one row's shape: Events in appends of Batch events from
// Writers concurrent writers.
type PeerWorkload struct {
	Batch, Writers, Events int
}

// DefaultPeerWorkloads are batches of 100 from one writer and single
// events from 256 writers.
var DefaultPeerWorkloads = []PeerWorkload{{Batch: 100, Writers: 1, Events: 100_000}, {Batch: 1, Writers: 256, Events: 20_000}}

// PeerRow is one peer under one workload, beside logbook's figure for the
// same workload.
type PeerRow struct {
	Peer                 string  `json:"peer"`
	Batch                int     `json:"batch"`
	Writers              int     `json:"writers"`
	Events               int     `json:"events"`
	LogbookEventsPerSec  float64 `json:"logbook_events_per_sec"`
	LogbookP99MS         float64 `json:"logbook_p99_ms"`
	PeerEventsPerSec     float64 `json:"peer_events_per_sec"`
	PeerP99MS            float64 `json:"peer_p99_ms,omitempty"` // not measured for the COPY row
	Ratio                float64 `json:"ratio"`                 // logbook ÷ peer
	PeerVersion          string  `json:"peer_version"`
	PeerWritePathSummary string  `json:"peer_write_path"`
}

// PeersResult is what `logbook bench peers` prints.
type PeersResult struct {
	Peers []PeerRow `json:"rows"`
}

// Rows renders the result as a table, a line per row.
func (r PeersResult) Rows() [][2]string {
	var rows [][2]string
	for _, x := range r.Peers {
		figures := fmt.Sprintf("logbook %.0f events/s (p99 %.1f ms), peer %.0f (p99 %.1f ms): %.1f×",
			x.LogbookEventsPerSec, x.LogbookP99MS, x.PeerEventsPerSec, x.PeerP99MS, x.Ratio)
		if x.Peer == ceilingPeer {
			figures = fmt.Sprintf("logbook %.0f events/s, binary COPY %.0f: logbook at %.2f× of it",
				x.LogbookEventsPerSec, x.PeerEventsPerSec, x.Ratio)
		}
		rows = append(rows, [2]string{
			fmt.Sprintf("%s %s, batch %d, %d writers", x.Peer, x.PeerVersion, x.Batch, x.Writers), figures,
		})
	}
	return rows
}

// ceilingPeer names the rows of PostgreSQL's binary COPY.
const ceilingPeer = "postgresql-copy"

// peerRun is one store's figures for one workload.
type peerRun struct {
	eventsPerSec, p99MS float64
}

// RunPeers runs each workload on logbook's store (already open on the
// database at url), then on each peer installed into the same database.
// The peers' tables are made for the run and dropped after it.
func RunPeers(ctx context.Context, store eventstore.Store, url string, cfg PeersConfig) (PeersResult, error) {
	if len(cfg.Workloads) == 0 {
		cfg.Workloads = DefaultPeerWorkloads
	}
	if cfg.Streams <= 0 || cfg.Payload < 0 {
		return PeersResult{}, errors.New("bench peers: streams must be positive, payload not negative")
	}
	maxConns := int32(1) // a connection per writer of the largest workload
	for _, w := range cfg.Workloads {
		if w.Batch <= 0 || w.Writers <= 0 || w.Events <= 0 {
			return PeersResult{}, fmt.Errorf("bench peers: workload %+v: batch, writers and events must be positive", w)
		}
		maxConns = max(maxConns, int32(w.Writers))
	}
	var mdb *messageDB
	if cfg.MessageDB != "" {
		m, err := installMessageDB(ctx, url, cfg.MessageDB, maxConns)
		if err != nil {
			return PeersResult{}, err
		}
		defer m.close()
		mdb = m
	}
	var copyPool *pgxpool.Pool
	var copyVersion string
	if !cfg.NoCeiling {
		pc, err := pgxpool.ParseConfig(url)
		if err != nil {
			return PeersResult{}, fmt.Errorf("bench peers: %w", err)
		}
		pc.MaxConns = maxConns
		if copyPool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			return PeersResult{}, fmt.Errorf("bench peers: %w", err)
		}
		defer copyPool.Close()
		if err := copyPool.QueryRow(ctx, `SHOW server_version`).Scan(&copyVersion); err != nil {
			return PeersResult{}, fmt.Errorf("bench peers: %w", err)
		}
		copyVersion, _, _ = strings.Cut(copyVersion, " ") // drop a distribution's suffix, "(Debian …)"
	}
	var res PeersResult
	for _, w := range cfg.Workloads {
		if err := checkpoint(ctx, url, cfg); err != nil {
			return PeersResult{}, err
		}
		lb, err := RunAppend(ctx, store, AppendConfig{Events: w.Events, Batch: w.Batch, Writers: w.Writers, Payload: cfg.Payload, Streams: max(cfg.Streams, w.Writers)}, nil)
		if err != nil {
			return PeersResult{}, err
		}
		row := func(peer, version, path string, p peerRun) PeerRow {
			return PeerRow{Peer: peer, Batch: w.Batch, Writers: w.Writers, Events: w.Events,
				LogbookEventsPerSec: lb.EventsPerSec, LogbookP99MS: lb.P99MS,
				PeerEventsPerSec: stats.Round(p.eventsPerSec, 0), PeerP99MS: stats.Round(p.p99MS, 3),
				Ratio: stats.Round(lb.EventsPerSec/p.eventsPerSec, 2), PeerVersion: version, PeerWritePathSummary: path}
		}
		if mdb != nil {
			if err := checkpoint(ctx, url, cfg); err != nil {
				return PeersResult{}, err
			}
			p, err := mdb.run(ctx, w, cfg)
			if err != nil {
				return PeersResult{}, err
			}
			res.Peers = append(res.Peers, row("message-db", mdb.version,
				"message_store.write_message per event, one transaction per batch, sent pipelined", p))
		}
		if cfg.Python != "" {
			if err := checkpoint(ctx, url, cfg); err != nil {
				return PeersResult{}, err
			}
			p, err := runEventsourcing(ctx, url, cfg.Python, w, cfg)
			if err != nil {
				return PeersResult{}, err
			}
			res.Peers = append(res.Peers, row("python-eventsourcing", "9.5.6",
				"PostgresApplicationRecorder.insert_events per batch, a thread per writer", p))
		}
		if copyPool != nil {
			if err := checkpoint(ctx, url, cfg); err != nil {
				return PeersResult{}, err
			}
			if err := warm(ctx, copyPool, w.Writers); err != nil {
				return PeersResult{}, fmt.Errorf("bench peers: %w", err)
			}
			eps, err := RunBaseline(ctx, copyPool, AppendConfig{Events: w.Events, Batch: w.Batch, Writers: w.Writers, Payload: cfg.Payload, Streams: max(cfg.Streams, w.Writers)}, PlainTable)
			copyPool.Reset() // the next store opens its own connections
			if err != nil {
				return PeersResult{}, err
			}
			res.Peers = append(res.Peers, row(ceilingPeer, copyVersion,
				"no peer: the same rows by binary COPY into a table with only a primary key, a transaction per append; the ceiling for batched appends", peerRun{eventsPerSec: eps}))
		}
	}
	return res, nil
}

// checkpoint asks the database to write out every dirty page before a
// timed run, so that no run pays for the one before it: the WAL and the
// dirty buffers the previous store's run left would otherwise be flushed
// by a checkpoint or the background writer in the middle of the next.
func checkpoint(ctx context.Context, url string, cfg PeersConfig) error {
	if cfg.NoCheckpoint {
		return nil
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("bench peers: checkpoint: %w", err)
	}
	defer conn.Close(context.Background())
	if err := Checkpoint(ctx, conn); err != nil {
		return fmt.Errorf("bench peers: before a run (--no-checkpoint skips it): %w", err)
	}
	return nil
}

// warm opens n of the pool's connections, so that a store's timed run
// does not pay for opening them (logbook's pool is open already, and the
// Python library's threads connect before its clock starts).
func warm(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		conns = append(conns, c)
	}
	return nil
}

// messageDB is Message DB installed, for the run, into the message_store
// schema of the database.
type messageDB struct {
	pool    *pgxpool.Pool
	version string
}

// messageDBFiles are the SQL files of Message DB's own install script
// (database/install.sh), in its order, without the role, the views and
// the grants: the bench connects as the database's owner.
var messageDBFiles = []string{
	"schema/message-store.sql",
	"extensions/pgcrypto.sql",
	"tables/messages.sql",
	"types/message.sql",
	"functions/message-store-version.sql",
	"functions/hash-64.sql",
	"functions/acquire-lock.sql",
	"functions/category.sql",
	"functions/is-category.sql",
	"functions/id.sql",
	"functions/cardinal-id.sql",
	"functions/stream-version.sql",
	"functions/write-message.sql",
	"functions/get-stream-messages.sql",
	"functions/get-category-messages.sql",
	"functions/get-last-stream-message.sql",
	"indexes/messages-id.sql",
	"indexes/messages-stream.sql",
	"indexes/messages-category.sql",
}

func installMessageDB(ctx context.Context, url, dir string, maxConns int32) (*messageDB, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("bench peers: %w", err)
	}
	pc.ConnConfig.RuntimeParams["search_path"] = "message_store,public"
	pc.MaxConns = maxConns // a connection per writer; they close after each run
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("bench peers: %w", err)
	}
	if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS message_store CASCADE`); err != nil {
		pool.Close()
		return nil, fmt.Errorf("bench peers: message db: %w", err)
	}
	for _, f := range messageDBFiles {
		sql, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("bench peers: message db (run scripts/peers.sh to install it): %w", err)
		}
		if _, err := pool.Exec(ctx, string(sql)); err != nil {
			pool.Close()
			return nil, fmt.Errorf("bench peers: message db: %s: %w", f, err)
		}
	}
	m := &messageDB{pool: pool}
	if err := pool.QueryRow(ctx, `SELECT message_store_version()`).Scan(&m.version); err != nil {
		m.close()
		return nil, fmt.Errorf("bench peers: message db: %w", err)
	}
	return m, nil
}

func (m *messageDB) close() {
	_, _ = m.pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS message_store CASCADE`)
	m.pool.Close()
}

// run writes the workload through write_message, the only write path
// Message DB has: a batch is one transaction of write_message calls, the
// first with the stream's expected version, as Eventide's clients write a
// batch — sent in one round trip, the fastest a client can. Streams share
// one category ("bench<run>-<n>"), as the streams of one entity type do;
// Message DB takes a lock per category for each write.
func (m *messageDB) run(ctx context.Context, w PeerWorkload, cfg PeersConfig) (peerRun, error) {
	appends := (w.Events + w.Batch - 1) / w.Batch
	streams := max(cfg.Streams, w.Writers)
	category := "bench" + newRunID()
	var next atomic.Int64
	lat := make([][]time.Duration, w.Writers)
	errs := make(chan error, w.Writers)
	data, _ := json.Marshal(map[string]string{"d": strings.Repeat("x", max(0, cfg.Payload-8))})
	if err := warm(ctx, m.pool, w.Writers); err != nil {
		return peerRun{}, fmt.Errorf("bench peers: message db: %w", err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for wr := range w.Writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(wr), uint64(start.UnixNano())))
			mine := streamsOf(wr, w.Writers, streams)
			versions := make(map[int]int64)
			for k := 0; ; k++ {
				n := next.Add(1) - 1
				if n >= int64(appends) {
					return
				}
				size := min(w.Batch, w.Events-int(n)*w.Batch)
				si := mine[k%len(mine)]
				v, ok := versions[si]
				if !ok {
					v = -1
				}
				name := fmt.Sprintf("%s-%d", category, si)
				var b pgx.Batch
				for i := range size {
					var expect any
					if i == 0 {
						expect = v
					}
					b.Queue(`SELECT write_message($1, $2, 'bench.Event', $3, NULL, $4)`, randomID(rng).String(), name, data, expect)
				}
				t0 := time.Now()
				err := pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error { return tx.SendBatch(ctx, &b).Close() })
				lat[wr] = append(lat[wr], time.Since(t0))
				if err != nil {
					errs <- fmt.Errorf("bench peers: message db: %w", err)
					return
				}
				versions[si] = v + int64(size)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	// The database's connections are shared by every store in the run:
	// close this run's before the next store opens its own.
	defer m.pool.Reset()
	close(errs)
	if err := <-errs; err != nil {
		return peerRun{}, err
	}
	var got int
	if err := m.pool.QueryRow(ctx, `SELECT count(*) FROM messages WHERE category(stream_name) = $1`, category).Scan(&got); err != nil {
		return peerRun{}, fmt.Errorf("bench peers: message db: %w", err)
	}
	if got != w.Events {
		return peerRun{}, fmt.Errorf("bench peers: message db holds %d of the %d events written", got, w.Events)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	return peerRun{eventsPerSec: float64(w.Events) / elapsed.Seconds(), p99MS: stats.Summarize(all).P99}, nil
}

//go:embed peers/eventsourcing_bench.py
var eventsourcingScript []byte

// eventsourcingTable is the table the Python library's recorder writes,
// made and dropped by each run.
const eventsourcingTable = "logbook_peer_eventsourcing"

// runEventsourcing runs the workload with the Python eventsourcing
// library's PostgreSQL recorder, in a python process of its own.
func runEventsourcing(ctx context.Context, url, python string, w PeerWorkload, cfg PeersConfig) (peerRun, error) {
	pc, err := pgx.ParseConfig(url)
	if err != nil {
		return peerRun{}, fmt.Errorf("bench peers: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		return peerRun{}, fmt.Errorf("bench peers: %w", err)
	}
	defer conn.Close(context.Background())
	drop := func() error {
		_, err := conn.Exec(context.Background(), `DROP TABLE IF EXISTS public.`+eventsourcingTable)
		return err
	}
	if err := drop(); err != nil {
		return peerRun{}, fmt.Errorf("bench peers: eventsourcing: %w", err)
	}
	defer drop() //nolint:errcheck // best effort
	script := filepath.Join(os.TempDir(), fmt.Sprintf("logbook-eventsourcing-%d.py", os.Getpid()))
	if err := os.WriteFile(script, eventsourcingScript, 0o600); err != nil {
		return peerRun{}, err
	}
	defer os.Remove(script)
	arg, _ := json.Marshal(map[string]any{
		"host": pc.Host, "port": pc.Port, "user": pc.User, "password": pc.Password, "dbname": pc.Database,
		"table": eventsourcingTable, "events": w.Events, "batch": w.Batch, "writers": w.Writers,
		"streams": max(cfg.Streams, w.Writers), "payload": cfg.Payload,
	})
	cmd := exec.CommandContext(ctx, python, script)
	// The configuration, password included, goes through the environment
	// rather than the command line, where ps would show it.
	cmd.Env = append(os.Environ(), "LOGBOOK_PEER_CONFIG="+string(arg))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return peerRun{}, fmt.Errorf("bench peers: eventsourcing (%s; run scripts/peers.sh to install it): %w: %s", python, err, strings.TrimSpace(stderr.String()))
	}
	var r struct {
		EventsPerSec float64 `json:"events_per_sec"`
		P99MS        float64 `json:"p99_ms"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return peerRun{}, fmt.Errorf("bench peers: eventsourcing printed %q: %w", out, err)
	}
	var got int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM public.`+eventsourcingTable).Scan(&got); err != nil {
		return peerRun{}, fmt.Errorf("bench peers: eventsourcing: %w", err)
	}
	if got != w.Events {
		return peerRun{}, fmt.Errorf("bench peers: eventsourcing's table holds %d of the %d events written", got, w.Events)
	}
	return peerRun{eventsPerSec: r.EventsPerSec, p99MS: r.P99MS}, nil
}
