// Package pgstore is the event store on PostgreSQL, for when one machine
// is not enough: several logbook processes share one database, each with
// this Store, and they see one log.
//
// Each process gathers the appends waiting in it into one transaction
// (group commit). The transaction takes the lock of the head row, gives
// its events the positions after the head, whole appends at a time, and
// commits still holding the lock, so transactions commit in the order of
// their positions: the log readers see is a gap-free prefix that never
// grows in the middle, and no reader's cursor passes an append that
// commits late. An append returns once committed, with its positions.
// docs/ARCHITECTURE.md weighs this against the alternatives.
package pgstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/backend"
)

//go:embed schema.sql
var schemaSQL string

// Options configure a Store. The zero value is usable.
type Options struct {
	// Schema holds the store's tables; default the URL's search_path
	// parameter, else "logbook". It is created if missing.
	Schema string
	// MaxConns bounds the connection pool; default 64. The stream
	// queries' permitter keeps concurrent queries below its own limit, which
	// should be below this one.
	MaxConns int32
	Limits   eventstore.Limits
	// MaxReadBatch caps the events one read returns; default 4096.
	MaxReadBatch int
	// Poll is the safety net under LISTEN/NOTIFY: how often the head is
	// read when no notification came; default 200ms.
	Poll time.Duration
	// Clock, if set, gives events their commit times and retention
	// rules their "now", instead of the database's clock: for tests of
	// expiry.
	Clock func() time.Time
	// SweepInterval is how often the background pass runs that applies
	// retention rules and deletes removed events (default 1 minute;
	// negative: only when Sweep is called). SweepBatch is how many events
	// one DELETE removes (default 1,000), SweepRate how many a second at
	// most (default 20,000).
	SweepInterval time.Duration
	SweepBatch    int
	SweepRate     int
	// beforeCommit, for tests, runs inside an append's transaction just
	// before it commits.
	beforeCommit func(ctx context.Context, stream string) error
}

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

// Store is an eventstore.Store on PostgreSQL.
type Store struct {
	pool    *pgxpool.Pool
	schema  string
	lockKey int64  // lockKey+1 is the advisory lock schema changes run under
	headCh  string // NOTIFY channel: the head moved (payload: new head)
	limits  backend.Limits
	opts    Options

	notify backend.Notifier

	mu       sync.Mutex
	known    uint64            // the head this process has published to its subscribers
	moved    chan struct{}     // closed, and replaced, when known moves
	versions map[string]uint64 // streams known to have a row, each with its last version seen; bounded
	instance string            // names this Store in its NOTIFY payloads

	// Batches written on guessed versions, and guesses that failed (the
	// batch then written by writeTx); for tests.
	guessed, guessesFailed atomic.Uint64
	// Stretches of the log this process read to learn their streams and
	// tags (publish), rather than being told by its appender or a NOTIFY;
	// for tests.
	stretchesRead atomic.Uint64
	// Announcements that gave up waiting for the stretch before theirs
	// to be published (announceWait); for tests.
	waitedOut atomic.Uint64

	reqs chan *appendReq

	// The follower starts with the first wait for new events (Changed):
	// a process that only appends — a cluster's write node — never
	// LISTENs, and is not woken by every other process's commit.
	followOnce sync.Once
	following  atomic.Bool
	followed   chan struct{} // closed when the follower stops (or can no longer start)
	bg         context.Context
	// committed maps the start of each stretch this process committed
	// and has not yet announced to its end: an appender finding the log
	// grown before its own stretch tells from it whether the growth is
	// its other appender's or another process's (see announce).
	committed map[uint64]uint64

	// foreignAt is when (UnixNano) this process last heard of an append
	// by another process; while that is recent, its appenders keep one
	// batch in flight, not two (see appender). oneBatch is the turn they
	// take then.
	foreignAt atomic.Int64
	oneBatch  sync.Mutex
	// Batches written, and the most ever in flight at once; for tests.
	batches, inFlight, maxInFlight atomic.Int64

	closeMu sync.RWMutex
	closed  bool
	closing <-chan struct{} // closed by Close
	stop    context.CancelFunc
	wg      sync.WaitGroup
	sweepMu sync.Mutex // one sweep at a time
}

var _ eventstore.Store = (*Store)(nil)
var _ eventstore.Deleter = (*Store)(nil)
var _ backend.Tail = (*Store)(nil)

// DefaultIdleInTransaction is the idle_in_transaction_session_timeout a
// store's sessions have unless its URL says otherwise.
const DefaultIdleInTransaction = "10s"

// Open connects to the database at url and creates the schema if needed.
// It starts following the log — LISTENing for other processes' commits —
// when something first waits for new events (a subscription that has
// caught up).
//
// Settings in the URL's query that are not pgx's own are PostgreSQL
// session settings: application_name names the process's sessions,
// search_path the schema, idle_in_transaction_session_timeout (default
// DefaultIdleInTransaction) bounds how long a stalled process holds the
// head's lock.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if opts.Schema == "" {
		opts.Schema = cfg.ConnConfig.RuntimeParams["search_path"]
	}
	if opts.Schema == "" {
		opts.Schema = "logbook"
	}
	if !schemaName.MatchString(opts.Schema) {
		return nil, fmt.Errorf("pgstore: schema %q: want lower-case letters, digits and _", opts.Schema)
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 64
	}
	if opts.MaxReadBatch <= 0 {
		opts.MaxReadBatch = 4096
	}
	if opts.Poll <= 0 {
		opts.Poll = 200 * time.Millisecond
	}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = time.Minute
	}
	if opts.SweepBatch <= 0 {
		opts.SweepBatch = 1000
	}
	if opts.SweepRate <= 0 {
		opts.SweepRate = 20_000
	}
	cfg.MaxConns = opts.MaxConns
	cfg.ConnConfig.RuntimeParams["search_path"] = opts.Schema
	// The URL may name the process (application_name=…), which then
	// tells it apart from the others in pg_stat_activity.
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "logbook"
	}
	// An append holds the head's lock until it commits: a process that
	// stalls inside its transaction (a partition, a stopped VM) must not
	// hold every writer for longer than this. The URL may set it
	// (…&idle_in_transaction_session_timeout=4s).
	if cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] == "" {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = DefaultIdleInTransaction
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	h := fnv.New64a()
	h.Write([]byte("logbook sequencer " + opts.Schema)) // the name it has had since stores had a sequencer
	s := &Store{
		pool:      pool,
		schema:    opts.Schema,
		lockKey:   int64(h.Sum64() >> 1),
		headCh:    opts.Schema + "_head",
		limits:    backend.NewLimits(opts.Limits),
		opts:      opts,
		reqs:      make(chan *appendReq, 4096),
		versions:  make(map[string]uint64),
		instance:  eventstore.NewID().String(),
		moved:     make(chan struct{}),
		followed:  make(chan struct{}),
		committed: make(map[uint64]uint64),
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := pool.QueryRow(ctx, `SELECT position FROM head`).Scan(&s.known); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: read head: %w", err)
	}
	bg, stop := context.WithCancel(context.Background())
	s.stop, s.closing, s.bg = stop, bg.Done(), bg
	for range appenders {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.appender(bg) }()
	}
	if opts.SweepInterval > 0 {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.sweeper(bg) }()
	}
	return s, nil
}

// migrate creates the schema under an advisory lock, so processes that
// start together do not trip over each other's DDL.
func (s *Store) migrate(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.lockKey+1); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{s.schema}.Sanitize()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schemaSQL)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: create schema %s: %w", s.schema, err)
	}
	return nil
}

// Limits reports the limits appends are checked against.
func (s *Store) Limits() eventstore.Limits { return s.limits.Limits }

// Pool is the connection pool, for callers that report its statistics.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

func (s *Store) enter() error {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return eventstore.ErrClosed
	}
	return nil
}

func (s *Store) leave() { s.closeMu.RUnlock() }

// Close stops following the log and closes the pool. Reads in
// flight finish first; appends still waiting for their outcome, and every
// later call, fail with eventstore.ErrClosed (an append so answered may
// have committed: a retry with its event ids tells).
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	s.closeMu.Unlock()
	s.followOnce.Do(func() { close(s.followed) }) // never started: it cannot now
	s.stop()
	s.wg.Wait()
	s.notify.Close()
	s.pool.Close()
	return nil
}

func checkCtx(ctx context.Context) error {
	if ctx == nil {
		return nil
	}
	return ctx.Err()
}

// fail adds context to a database error, and tells a caller whose call
// raced with Close that the store is closed rather than what the pool said.
func (s *Store) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	s.closeMu.RLock()
	closed := s.closed
	s.closeMu.RUnlock()
	if closed {
		return eventstore.ErrClosed
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}
