package userscdc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/logbook/logbook/services/notify"
)

// Config says what a Follower follows.
type Config struct {
	// URL is the source database (the users' database), postgres://…
	// Its role needs the REPLICATION attribute (or to be a superuser),
	// and CREATE on the database the first time, for the publication.
	URL string
	// Schema holds the source tables (default "public").
	Schema string
	// Publication and Slot name the publication of the three tables and
	// the logical replication slot (default "logbook_notify_users" both).
	// One slot feeds one view: two views need two slots.
	Publication, Slot string
	// StatusInterval is how often the view's write-ahead log is synced
	// and the position it reached reported to PostgreSQL, which may then
	// recycle the WAL before it (default 1 s). A keepalive that asks for
	// a reply is answered at once.
	StatusInterval time.Duration
	// Sync syncs each source transaction's batch to disk as it commits,
	// rather than every StatusInterval. Exactly-once does not need it:
	// PostgreSQL is only told of positions already synced.
	Sync bool
	// MaxBatchBytes bounds one batch of the view (default 16 MiB). A
	// snapshot is copied in batches of about this size; so is a source
	// transaction that is larger, and readers may then see part of it
	// until its last batch commits with its position. Applying a
	// transaction again over its own part gives the same rows.
	MaxBatchBytes int
	// Resnapshot, when the slot the view was following is gone, takes a
	// new snapshot into the emptied view instead of failing with
	// ErrSlotMissing.
	Resnapshot bool
	// ServeDuringCopy makes Start return as soon as the slot exists,
	// when the view needs a snapshot: the copy then runs in the
	// background, and until it commits the view answers its reads from
	// the source itself, in the snapshot the slot exported (the source
	// at the slot's consistent point, the view's position meanwhile), on
	// up to SnapshotReaders connections (default 4).
	ServeDuringCopy bool
	SnapshotReaders int
	// Logger receives the follower's warnings (default slog.Default()).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Schema == "" {
		c.Schema = "public"
	}
	if c.Publication == "" {
		c.Publication = "logbook_notify_users"
	}
	if c.Slot == "" {
		c.Slot = "logbook_notify_users"
	}
	if c.StatusInterval <= 0 {
		c.StatusInterval = time.Second
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = 16 << 20
	}
	if c.SnapshotReaders <= 0 {
		c.SnapshotReaders = 4
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Errors a Follower stops with, wrapped with details.
var (
	// ErrWALLevel: the source's wal_level is not logical.
	ErrWALLevel = errors.New("userscdc: wal_level is not logical")
	// ErrSlotMissing: the view follows a slot that no longer exists
	// (dropped, or another database): changes may have been lost.
	ErrSlotMissing = errors.New("userscdc: replication slot does not exist")
	// ErrSlotTaken: the slot exists but this view has never taken its
	// snapshot; another view owns it.
	ErrSlotTaken = errors.New("userscdc: replication slot belongs to another view")
	// ErrPublicationMissing: the publication was dropped.
	ErrPublicationMissing = errors.New("userscdc: publication does not exist")
	// errStopped is what waiters get once the follower was closed.
	errStopped = errors.New("userscdc: follower stopped")
)

var nameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// testHookCommit, set by tests before Start, writes into each source
// transaction's batch before it commits.
var testHookCommit func(b *pebble.Batch, end LSN) error

// TestHookCopy, when set (by tests, also of other packages, before
// Start), is called as the snapshot copy begins each table and after
// each batch it commits; it may block to hold the copy.
var TestHookCopy func(ctx context.Context, table string)

// Follower applies the source's changes to a View until closed.
type Follower struct {
	v      *View
	cfg    Config
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	err error

	// The stream's state, owned by the run goroutine.
	relations map[uint32]relation
	tx        *batch // the open source transaction's batch; nil between transactions
	skip      bool   // the open transaction was applied before
	dirty     bool   // commits since the last WAL sync
	durable   LSN    // the position last confirmed to PostgreSQL
}

type relation struct {
	table string // "" for a relation the view does not follow
	cols  []string
}

// Start makes the publication and the slot if the view has none, copies
// the consistent snapshot the slot exports into the view, and then
// follows the slot's stream in the background, from the view's position.
// A view that has a position resumes from it.
func Start(ctx context.Context, v *View, cfg Config) (*Follower, error) {
	cfg = cfg.withDefaults()
	if !nameRE.MatchString(cfg.Slot) || !nameRE.MatchString(cfg.Publication) {
		return nil, fmt.Errorf("userscdc: slot %q and publication %q must be lower-case letters, digits and _", cfg.Slot, cfg.Publication)
	}
	if err := v.claim(); err != nil {
		return nil, err
	}
	// dirty: the position a killed predecessor stored may still be in
	// the page cache only; sync before confirming it.
	f := &Follower{v: v, cfg: cfg, log: cfg.Logger, done: make(chan struct{}), dirty: true}
	conn, p, err := f.setup(ctx)
	if err != nil {
		v.release()
		return nil, err
	}
	if p != nil && !cfg.ServeDuringCopy {
		if err := f.copyIn(ctx, p); err != nil {
			_ = p.repl.Close(context.Background())
			v.release()
			return nil, err
		}
		if err := f.start(ctx, p.repl); err != nil {
			_ = p.repl.Close(context.Background())
			v.release()
			return nil, err
		}
		conn, p = p.repl, nil
	}
	if p != nil {
		// Serve while the copy runs: one reader of the exported
		// snapshot now, so that the view answers once Start returns.
		r := newSnapshotReader(cfg.URL, cfg.Schema, p.snapshot, cfg.SnapshotReaders)
		if err := r.do(ctx, func(*pgx.Conn) error { return nil }); err != nil {
			r.close()
			_ = p.repl.Close(context.Background())
			v.release()
			return nil, err
		}
		v.hydrate(r, p.consistent)
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	go f.run(conn, p)
	return f, nil
}

// pending is a snapshot a new slot exported, to be copied into the view
// before the slot's stream starts.
type pending struct {
	// repl exported the snapshot: it stays importable while repl runs
	// no other command, so repl starts streaming only after the copy.
	repl       *pgconn.PgConn
	snapshot   string
	consistent LSN
}

func (f *Follower) table(name string) string {
	return pgx.Identifier{f.cfg.Schema, name}.Sanitize()
}

// setup checks the source and makes what is missing. It returns a
// replication connection streaming from the view's position, or, if the
// view needs a snapshot, the slot it created with the snapshot to copy.
func (f *Follower) setup(ctx context.Context) (*pgconn.PgConn, *pending, error) {
	conn, err := pgx.Connect(ctx, f.cfg.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("userscdc: connect to the source: %w", err)
	}
	defer conn.Close(context.Background())
	var level string
	if err := conn.QueryRow(ctx, `SHOW wal_level`).Scan(&level); err != nil {
		return nil, nil, fmt.Errorf("userscdc: source: %w", err)
	}
	if level != "logical" {
		return nil, nil, fmt.Errorf("%w: it is %q; set wal_level = logical (and max_replication_slots, max_wal_senders) in postgresql.conf and restart the server (scripts/postgres.sh does)", ErrWALLevel, level)
	}
	marker, err := f.v.snapshotting()
	if err != nil {
		return nil, nil, fmt.Errorf("userscdc: view: %w", err)
	}
	pos := f.v.Position()
	fresh := pos == 0 || marker != ""

	var pubs int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_publication WHERE pubname = $1`, f.cfg.Publication).Scan(&pubs); err != nil {
		return nil, nil, fmt.Errorf("userscdc: source: %w", err)
	}
	if pubs == 0 {
		if !fresh {
			return nil, nil, fmt.Errorf("%w: %q, which the view at %s followed; create it again (FOR TABLE %s, %s, %s) and restart, or remove the view to take a new snapshot",
				ErrPublicationMissing, f.cfg.Publication, pos, f.table(tableUsers), f.table(tableSettings), f.table(tableDevices))
		}
		_, err := conn.Exec(ctx, fmt.Sprintf(`CREATE PUBLICATION %s FOR TABLE %s, %s, %s`, f.cfg.Publication,
			f.table(tableUsers), f.table(tableSettings), f.table(tableDevices)))
		if err != nil {
			return nil, nil, fmt.Errorf("userscdc: create publication %s: %w", f.cfg.Publication, err)
		}
	}

	var slots int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND database = current_database()`, f.cfg.Slot).Scan(&slots); err != nil {
		return nil, nil, fmt.Errorf("userscdc: source: %w", err)
	}
	switch {
	case fresh && slots > 0 && marker != f.cfg.Slot:
		return nil, nil, fmt.Errorf("%w: %q exists, and this view never took its snapshot; drop it (SELECT pg_drop_replication_slot('%s')) if nothing uses it, or choose another slot",
			ErrSlotTaken, f.cfg.Slot, f.cfg.Slot)
	case fresh && slots > 0:
		// Ours: the snapshot copy it exported was interrupted. Start again.
		if err := f.dropSlot(ctx, conn); err != nil {
			return nil, nil, err
		}
	case !fresh && slots == 0 && !f.cfg.Resnapshot:
		return nil, nil, fmt.Errorf("%w: %q, which the view at %s followed; changes made since may be lost: remove the view to take a new snapshot (or set Resnapshot)",
			ErrSlotMissing, f.cfg.Slot, pos)
	case !fresh && slots == 0:
		f.log.Warn("userscdc: replication slot gone, taking a new snapshot", "slot", f.cfg.Slot, "view_position", pos.String())
		fresh = true
	}
	if fresh {
		p, err := f.snapshot(ctx)
		return nil, p, err
	}
	repl, err := f.connect(ctx, true)
	return repl, nil, err
}

// dropSlot drops the slot, waiting while a walsender of a killed
// predecessor still holds it.
func (f *Follower) dropSlot(ctx context.Context, conn *pgx.Conn) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, f.cfg.Slot)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("userscdc: drop slot %s: %w", f.cfg.Slot, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (f *Follower) replicationConn(ctx context.Context) (*pgconn.PgConn, error) {
	pc, err := pgconn.ParseConfig(f.cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("userscdc: source URL: %w", err)
	}
	pc.RuntimeParams["replication"] = "database"
	// The session that creates the slot holds the exported snapshot in a
	// transaction until its next command, which comes after the copy:
	// a server's or role's idle_in_transaction_session_timeout must not
	// end it meanwhile (a setting in the startup packet wins over one in
	// the URL's options).
	pc.RuntimeParams["idle_in_transaction_session_timeout"] = "0"
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("userscdc: replication connection: %w", err)
	}
	return conn, nil
}

// snapshot empties the view and creates the slot, which exports the
// snapshot to copy.
func (f *Follower) snapshot(ctx context.Context) (*pending, error) {
	b := f.v.newBatch()
	_ = b.b.DeleteRange([]byte{0x01}, []byte{0xff}, nil)
	_ = b.b.Delete(positionKey, nil)
	_ = b.b.Set(snapshotKey, []byte(f.cfg.Slot), nil)
	if err := b.commit(0, true); err != nil {
		return nil, err
	}
	f.v.reset()

	repl, err := f.replicationConn(ctx)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = repl.Close(context.Background())
		}
	}()
	slot, err := pglogrepl.CreateReplicationSlot(ctx, repl, f.cfg.Slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{SnapshotAction: "EXPORT_SNAPSHOT", Mode: pglogrepl.LogicalReplication})
	if err != nil {
		return nil, fmt.Errorf("userscdc: create replication slot %s: %w", f.cfg.Slot, err)
	}
	consistent, err := pglogrepl.ParseLSN(slot.ConsistentPoint)
	if err != nil {
		return nil, fmt.Errorf("userscdc: slot's consistent point: %w", err)
	}
	if strings.ContainsAny(slot.SnapshotName, "'\\") {
		return nil, fmt.Errorf("userscdc: odd snapshot name %q", slot.SnapshotName)
	}
	ok = true
	return &pending{repl: repl, snapshot: slot.SnapshotName, consistent: consistent}, nil
}

// copyIn copies the pending snapshot into the view, which then answers
// from its own rows.
func (f *Follower) copyIn(ctx context.Context, p *pending) error {
	if err := f.copySnapshot(ctx, p.snapshot, p.consistent); err != nil {
		return err
	}
	f.v.copied()
	return nil
}

// prepareKeys makes the keys of every user of the snapshot, in a sealed
// view, before the copy seals their fields: a durable write per 10,000
// users rather than one per user.
func (f *Follower) prepareKeys(ctx context.Context, conn *pgx.Conn) error {
	if f.v.keys == nil {
		return nil
	}
	rows, err := conn.Query(ctx, `SELECT id FROM `+f.table(tableUsers))
	if err != nil {
		return fmt.Errorf("userscdc: snapshot of %s's ids: %w", tableUsers, err)
	}
	defer rows.Close()
	subjects := make([]string, 0, 10_000)
	prepare := func() error {
		err := f.v.keys.Prepare(ctx, subjects)
		subjects = subjects[:0]
		return err
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		if subjects = append(subjects, Subject(id)); len(subjects) == cap(subjects) {
			if err := prepare(); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("userscdc: snapshot of %s's ids: %w", tableUsers, err)
	}
	return prepare()
}

// copySnapshot reads the three tables in the exported snapshot (the
// source as of the slot's consistent point) into the view, one after the
// other on one connection that imports the snapshot, each row written as
// the view's keys straight into plain batches of about MaxBatchBytes.
// The rows go into an emptied view, each once, so nothing needs to be
// read back (what batch.upsert does with copying set, without decoding
// into a row). The last batch sets the position and removes the marker.
//
// The tables are copied in turn, not at once on three connections: on
// two cores that was no faster, and its interleaved batches made every
// flushed table overlap every other, leaving compactions to do after
// the copy that slowed the first requests and the next shutdown.
func (f *Follower) copySnapshot(ctx context.Context, snapshot string, consistent LSN) error {
	conn, err := importSnapshot(ctx, f.cfg.URL, snapshot)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	type copier struct {
		table, query string
		put          func(rows pgx.Rows, b *pebble.Batch) error
	}
	copiers := []copier{
		{tableUsers, `SELECT id, name, language, coalesce(email, ''), opt_out, club_id FROM ` + f.table(tableUsers), func(rows pgx.Rows, b *pebble.Batch) error {
			var id int64
			var u userRow
			var club *int64
			if err := rows.Scan(&id, &u.Name, &u.Language, &u.Email, &u.OptOut, &club); err != nil {
				return err
			}
			if club != nil {
				if err := b.Set(idKey(prefixClubOf, id), binary.BigEndian.AppendUint64(nil, uint64(*club)), nil); err != nil {
					return err
				}
				if err := b.Set(memberKey(*club, id), nil, nil); err != nil {
					return err
				}
			}
			rec, err := f.v.sealUser(ctx, id, u)
			if err != nil {
				return err
			}
			return b.Set(idKey(prefixUser, id), rec, nil)
		}},
		{tableSettings, `SELECT user_id, type, channel, enabled FROM ` + f.table(tableSettings), func(rows pgx.Rows, b *pebble.Batch) error {
			var id int64
			var typ, ch string
			var on bool
			if err := rows.Scan(&id, &typ, &ch, &on); err != nil {
				return err
			}
			val := []byte{0}
			if on {
				val[0] = 1
			}
			return b.Set(settingKey(id, typ, notify.Channel(ch)), val, nil)
		}},
		{tableDevices, `SELECT id, user_id, token FROM ` + f.table(tableDevices), func(rows pgx.Rows, b *pebble.Batch) error {
			var id, user int64
			var token string
			if err := rows.Scan(&id, &user, &token); err != nil {
				return err
			}
			sealed, err := f.v.sealToken(ctx, user, token)
			if err != nil {
				return err
			}
			if err := b.Set(deviceKey(user, id), sealed, nil); err != nil {
				return err
			}
			return b.Set(idKey(prefixDevIdx, id), binary.BigEndian.AppendUint64(nil, uint64(user)), nil)
		}},
	}
	copyTable := func(c copier) error {
		if TestHookCopy != nil {
			TestHookCopy(ctx, c.table)
		}
		rows, err := conn.Query(ctx, c.query)
		if err != nil {
			return fmt.Errorf("userscdc: snapshot of %s: %w", c.table, err)
		}
		defer rows.Close()
		b := f.v.db.NewBatch()
		defer func() { _ = b.Close() }()
		for rows.Next() {
			if err := c.put(rows, b); err != nil {
				return fmt.Errorf("userscdc: snapshot of %s: %w", c.table, err)
			}
			if int(b.Len()) >= f.cfg.MaxBatchBytes {
				if err := b.Commit(pebble.NoSync); err != nil {
					return fmt.Errorf("userscdc: commit view batch: %w", err)
				}
				b.Reset()
				if TestHookCopy != nil {
					TestHookCopy(ctx, c.table)
				}
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("userscdc: snapshot of %s: %w", c.table, err)
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			return fmt.Errorf("userscdc: commit view batch: %w", err)
		}
		return nil
	}
	if err := f.prepareKeys(ctx, conn); err != nil {
		return err
	}
	for _, c := range copiers {
		if err := copyTable(c); err != nil {
			return err
		}
	}
	b := f.v.newBatch()
	if err := b.b.Delete(snapshotKey, nil); err != nil {
		b.close()
		return err
	}
	return b.commit(consistent, true)
}

// connect opens a replication connection and starts streaming from the
// view's position. In setup (patient) it waits out a slot still held by
// a killed predecessor's walsender.
func (f *Follower) connect(ctx context.Context, patient bool) (*pgconn.PgConn, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		repl, err := f.replicationConn(ctx)
		if err != nil {
			return nil, err
		}
		err = f.start(ctx, repl)
		if err == nil {
			return repl, nil
		}
		_ = repl.Close(context.Background())
		var pgErr *pgconn.PgError
		if !patient || !errors.As(err, &pgErr) || pgErr.Code != "55006" || time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// start checks that the slot exists and starts streaming from the view's
// position.
func (f *Follower) start(ctx context.Context, repl *pgconn.PgConn) error {
	res, err := repl.Exec(ctx, `SELECT 1 FROM pg_replication_slots WHERE slot_name = '`+f.cfg.Slot+`'`).ReadAll()
	if err != nil {
		return fmt.Errorf("userscdc: look up slot %s: %w", f.cfg.Slot, err)
	}
	if len(res) != 1 || len(res[0].Rows) == 0 {
		return fmt.Errorf("%w: %q, which the view at %s followed; changes made since may be lost: remove the view to take a new snapshot",
			ErrSlotMissing, f.cfg.Slot, f.v.Position())
	}
	err = pglogrepl.StartReplication(ctx, repl, f.cfg.Slot, f.v.Position(), pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '1'", "publication_names '" + f.cfg.Publication + "'"},
	})
	if err != nil {
		return f.classify(fmt.Errorf("userscdc: start replication from slot %s at %s: %w", f.cfg.Slot, f.v.Position(), err))
	}
	return nil
}

// classify marks the server's errors the follower cannot get past.
func (f *Follower) classify(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		msg := pgErr.Message
		switch {
		case strings.Contains(msg, "publication") && strings.Contains(msg, "does not exist"):
			return fmt.Errorf("%w: %q: %w", ErrPublicationMissing, f.cfg.Publication, err)
		case strings.Contains(msg, "replication slot") && strings.Contains(msg, "does not exist"):
			return fmt.Errorf("%w: %q: %w", ErrSlotMissing, f.cfg.Slot, err)
		}
	}
	return err
}

// fatal reports whether reconnecting cannot help.
func fatal(err error) bool {
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, ErrSlotMissing), errors.Is(err, ErrPublicationMissing), errors.Is(err, errToast), errors.Is(err, errCorrupt):
		return true
	case errors.As(err, &pgErr):
		// Operator intervention (a terminated backend, a shutdown) and
		// connection failures are worth a reconnect; other errors the
		// server sends are not.
		return !strings.HasPrefix(pgErr.Code, "57") && !strings.HasPrefix(pgErr.Code, "08") && pgErr.Code != "55006"
	case errors.As(err, new(applyError)):
		return true
	}
	return false
}

// applyError is a failure to write the view.
type applyError struct{ err error }

func (e applyError) Error() string { return e.err.Error() }
func (e applyError) Unwrap() error { return e.err }

// run copies the pending snapshot, if there is one, then streams until
// closed or a fatal error, reconnecting on others.
func (f *Follower) run(conn *pgconn.PgConn, p *pending) {
	defer close(f.done)
	var err error // why the stream broke
	if p != nil {
		if err := f.copyIn(f.ctx, p); err != nil {
			_ = p.repl.Close(context.Background())
			f.v.copyFailed()
			if f.ctx.Err() != nil {
				f.stop(errStopped, nil)
			} else {
				f.stop(err, err)
			}
			return
		}
		conn = p.repl
		if err = f.start(f.ctx, conn); err != nil {
			_ = conn.Close(context.Background()) // reconnect below, or stop
		}
	}
	backoff := 100 * time.Millisecond
	for {
		if err == nil {
			err = f.stream(conn)
			f.finish(conn)
		}
		if f.ctx.Err() != nil {
			f.stop(errStopped, nil)
			return
		}
		if fatal(err) {
			f.stop(err, err)
			return
		}
		f.log.Warn("userscdc: replication stream broke, reconnecting", "slot", f.cfg.Slot, "err", err)
		for {
			select {
			case <-f.ctx.Done():
				f.stop(errStopped, nil)
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			conn, err = f.connect(f.ctx, false)
			if err == nil {
				backoff = 100 * time.Millisecond
				break
			}
			if f.ctx.Err() != nil {
				f.stop(errStopped, nil)
				return
			}
			if fatal(err) {
				f.stop(err, err)
				return
			}
			f.log.Warn("userscdc: reconnect failed", "slot", f.cfg.Slot, "err", err)
		}
	}
}

// stop records the follower's end: waiters on the view get forWaiters,
// Close and Err return err.
func (f *Follower) stop(forWaiters, err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
	f.v.fail(forWaiters)
	f.v.release()
}

// finish drops the open transaction's batch, reports what is durable and
// closes the connection.
func (f *Follower) finish(conn *pgconn.PgConn) {
	if f.tx != nil {
		f.tx.close()
		f.tx = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !conn.IsClosed() {
		_ = f.status(ctx, conn)
	}
	_ = conn.Close(ctx)
}

// status syncs the view's WAL if it has unsynced commits and reports the
// position reached as written, flushed and applied: PostgreSQL keeps the
// slot's WAL from there.
func (f *Follower) status(ctx context.Context, conn *pgconn.PgConn) error {
	pos := f.v.Position()
	if f.dirty {
		if err := f.v.db.LogData(nil, pebble.Sync); err != nil {
			return applyError{fmt.Errorf("userscdc: sync view: %w", err)}
		}
		f.dirty = false
	}
	f.durable = pos
	err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pos, WALFlushPosition: pos, WALApplyPosition: pos,
	})
	if err != nil {
		return fmt.Errorf("userscdc: send standby status: %w", err)
	}
	return nil
}

// stream reads the replication stream until ctx ends or it fails.
func (f *Follower) stream(conn *pgconn.PgConn) error {
	f.relations = map[uint32]relation{}
	f.tx, f.skip = nil, false
	next := time.Now()
	for {
		if !time.Now().Before(next) {
			if err := f.status(f.ctx, conn); err != nil {
				return err
			}
			next = time.Now().Add(f.cfg.StatusInterval)
		}
		rctx, cancel := context.WithDeadline(f.ctx, next)
		msg, err := conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if f.ctx.Err() != nil {
				return nil
			}
			if pgconn.Timeout(err) {
				continue
			}
			return fmt.Errorf("userscdc: replication stream: %w", err)
		}
		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				continue
			}
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("userscdc: keepalive: %w", err)
				}
				// Between transactions, every commit before the server's
				// WAL end has been sent and applied: the view reflects the
				// source up to there.
				if f.tx == nil && !f.skip {
					f.v.advance(ka.ServerWALEnd)
				}
				if ka.ReplyRequested {
					next = time.Time{}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("userscdc: XLogData: %w", err)
				}
				if err := f.handle(xld.WALData); err != nil {
					return err
				}
			}
		case *pgproto3.ErrorResponse:
			return f.classify(fmt.Errorf("userscdc: replication stream: %w", pgconn.ErrorResponseToPgError(msg)))
		case *pgproto3.CopyDone:
			return errors.New("userscdc: the server ended the replication stream")
		default:
			return fmt.Errorf("userscdc: unexpected message %T in the replication stream", msg)
		}
	}
}

// handle applies one pgoutput message.
func (f *Follower) handle(data []byte) error {
	m, err := pglogrepl.Parse(data)
	if err != nil {
		return fmt.Errorf("userscdc: decode pgoutput: %w", err)
	}
	switch m := m.(type) {
	case *pglogrepl.RelationMessage:
		r := relation{}
		if m.Namespace == f.cfg.Schema {
			switch m.RelationName {
			case tableUsers, tableSettings, tableDevices:
				r.table = m.RelationName
			}
		}
		for _, c := range m.Columns {
			r.cols = append(r.cols, c.Name)
		}
		f.relations[m.RelationID] = r
	case *pglogrepl.BeginMessage:
		// FinalLSN is where the commit record starts: below the view's
		// position, the transaction is in the view already.
		if m.FinalLSN < f.v.Position() {
			f.skip = true
			return nil
		}
		f.tx = f.v.newBatch()
	case *pglogrepl.CommitMessage:
		if f.skip {
			f.skip = false
			return nil
		}
		if f.tx == nil {
			return errors.New("userscdc: commit without begin")
		}
		if testHookCommit != nil {
			if err := testHookCommit(f.tx.b, m.TransactionEndLSN); err != nil {
				return applyError{err}
			}
		}
		err := f.tx.commit(m.TransactionEndLSN, f.cfg.Sync)
		f.tx = nil
		if err != nil {
			return applyError{err}
		}
		f.dirty = f.dirty || !f.cfg.Sync
	case *pglogrepl.InsertMessage:
		return f.change(m.RelationID, func(b *batch, rel relation) error {
			nw, err := f.decode(rel, m.Tuple)
			if err != nil {
				return err
			}
			return b.upsert(rel.table, nil, nw)
		})
	case *pglogrepl.UpdateMessage:
		return f.change(m.RelationID, func(b *batch, rel relation) error {
			nw, err := f.decode(rel, m.NewTuple)
			if err != nil {
				return err
			}
			var old row
			if m.OldTuple != nil { // the key changed ('K'), or replica identity full ('O')
				if old, err = f.decode(rel, m.OldTuple); err != nil {
					return err
				}
			}
			return b.upsert(rel.table, old, nw)
		})
	case *pglogrepl.DeleteMessage:
		return f.change(m.RelationID, func(b *batch, rel relation) error {
			old, err := f.decode(rel, m.OldTuple)
			if err != nil {
				return err
			}
			return b.delete(rel.table, old)
		})
	case *pglogrepl.TruncateMessage:
		for _, id := range m.RelationIDs {
			err := f.change(id, func(b *batch, rel relation) error { return b.truncate(rel.table) })
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// change applies one row change of the open transaction, if the view
// follows its table.
func (f *Follower) change(relID uint32, apply func(*batch, relation) error) error {
	if f.skip {
		return nil
	}
	if f.tx == nil {
		return errors.New("userscdc: a change outside a transaction")
	}
	rel, ok := f.relations[relID]
	if !ok {
		return fmt.Errorf("userscdc: a change of relation %d before its description", relID)
	}
	if rel.table == "" {
		return nil
	}
	if err := apply(f.tx, rel); err != nil {
		return applyError{fmt.Errorf("userscdc: %s: %w", rel.table, err)}
	}
	if f.tx.size() >= f.cfg.MaxBatchBytes {
		// A large transaction goes in parts; the position moves only
		// with its last.
		err := f.tx.commit(0, false)
		f.tx = f.v.newBatch()
		if err != nil {
			return applyError{err}
		}
		f.dirty = true
	}
	return nil
}

func (f *Follower) decode(rel relation, t *pglogrepl.TupleData) (row, error) {
	if t == nil {
		return nil, errors.New("no tuple")
	}
	if len(t.Columns) > len(rel.cols) {
		return nil, fmt.Errorf("a tuple of %d columns for a relation of %d", len(t.Columns), len(rel.cols))
	}
	r := make(row, len(t.Columns))
	for i, c := range t.Columns {
		switch c.DataType {
		case pglogrepl.TupleDataTypeText:
			r[rel.cols[i]] = col{'t', string(c.Data)}
		case pglogrepl.TupleDataTypeToast:
			r[rel.cols[i]] = col{kind: 'u'}
		case pglogrepl.TupleDataTypeNull:
			r[rel.cols[i]] = col{kind: 'n'}
		default:
			return nil, fmt.Errorf("column %s: tuple data type %q", rel.cols[i], c.DataType)
		}
	}
	return r, nil
}

// Done is closed when the follower has stopped.
func (f *Follower) Done() <-chan struct{} { return f.done }

// Err is why the follower stopped by itself (nil while it runs, or after
// Close).
func (f *Follower) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Close stops the stream, having synced the view and reported its
// position, and returns what had stopped the follower before, if
// anything did. It leaves the view open.
func (f *Follower) Close() error {
	f.cancel()
	<-f.done
	return f.Err()
}
