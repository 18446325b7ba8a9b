package userscdc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/services/notify"
)

// snapshotReader answers the view's reads from the source itself, in the
// snapshot a new slot exported, while that snapshot is being copied into
// the view (Config.ServeDuringCopy). Each of its connections imports the
// snapshot into a read-only repeatable-read transaction, so every read
// sees the source exactly at the slot's consistent point — the state the
// view has when the copy commits. A connection is opened when a read
// needs one (at most maxConns), and one that broke is replaced: the
// exported snapshot stays importable for as long as the replication
// connection that exported it runs no other command, and the follower
// starts streaming on it only after close, which waits for the reads in
// flight.
type snapshotReader struct {
	url, schema, snapshot string

	mu     sync.RWMutex // held for reading by each read; close takes it for writing
	closed bool

	// The connections: slots holds a token for each one open (idle or in
	// use), at most its capacity; idle holds those not in use. A read
	// takes an idle one, or a slot to open one, or waits for either — a
	// connection given back or a slot freed by one dropped or by an
	// import that failed — so no read waits while another could serve it.
	slots chan struct{}
	idle  chan *pgx.Conn
}

// errReaderClosed: the copy committed (or failed) while a read waited;
// the caller reads the view again.
var errReaderClosed = errors.New("userscdc: snapshot reader closed")

// lookupChunk bounds the ids of one lookup query (= ANY($1), one array
// parameter: no limit on parameters, but a bound on each query's size).
const lookupChunk = 10_000

func newSnapshotReader(url, schema, snapshot string, maxConns int) *snapshotReader {
	maxConns = max(1, maxConns)
	return &snapshotReader{url: url, schema: schema, snapshot: snapshot,
		slots: make(chan struct{}, maxConns), idle: make(chan *pgx.Conn, maxConns)}
}

func (r *snapshotReader) table(name string) string { return pgx.Identifier{r.schema, name}.Sanitize() }

// importSnapshot opens a connection whose transaction reads the snapshot.
func importSnapshot(ctx context.Context, url, snapshot string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("userscdc: connect to the source: %w", err)
	}
	// One round trip: the session may idle in its transaction as long as
	// the copy takes.
	_, err = conn.Exec(ctx, `SET idle_in_transaction_session_timeout = 0; BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '`+snapshot+`'`)
	if err != nil {
		_ = conn.Close(context.Background())
		return nil, fmt.Errorf("userscdc: import snapshot %s: %w", snapshot, err)
	}
	return conn, nil
}

// do runs fn on a connection of the snapshot. A connection that fn
// leaves broken (a cancelled query closes it) is dropped.
func (r *snapshotReader) do(ctx context.Context, fn func(conn *pgx.Conn) error) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return errReaderClosed
	}
	conn, err := r.acquire(ctx)
	if err != nil {
		return err
	}
	err = fn(conn)
	if conn.IsClosed() || (err != nil && conn.PgConn().TxStatus() != 'T') {
		_ = conn.Close(context.Background())
		<-r.slots
	} else {
		r.idle <- conn // never blocks: at most cap(slots) connections
	}
	return err
}

func (r *snapshotReader) acquire(ctx context.Context) (*pgx.Conn, error) {
	select {
	case conn := <-r.idle:
		return conn, nil
	default:
	}
	select {
	case conn := <-r.idle:
		return conn, nil
	case r.slots <- struct{}{}:
		conn, err := importSnapshot(ctx, r.url, r.snapshot)
		if err != nil {
			<-r.slots
			return nil, err
		}
		return conn, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// close waits for the reads in flight and closes the connections. Reads
// after it get errReaderClosed.
func (r *snapshotReader) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for {
		select {
		case c := <-r.idle:
			_ = c.Close(context.Background())
			<-r.slots
		default:
			return // no read in flight: every connection was idle
		}
	}
}

// users reads the users among ids as View.Users returns them: the same
// fields, settings switched off only, device tokens by device id.
func (r *snapshotReader) users(ctx context.Context, ids []int64) (map[int64]*notify.User, error) {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	out := make(map[int64]*notify.User, len(sorted))
	for len(sorted) > 0 {
		part := sorted[:min(len(sorted), lookupChunk)]
		sorted = sorted[len(part):]
		if err := r.do(ctx, func(conn *pgx.Conn) error { return querySourceUsers(ctx, conn, r.table, part, out) }); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// all reads every user.
func (r *snapshotReader) all(ctx context.Context) (map[int64]*notify.User, error) {
	out := map[int64]*notify.User{}
	if err := r.do(ctx, func(conn *pgx.Conn) error { return querySourceUsers(ctx, conn, r.table, nil, out) }); err != nil {
		return nil, err
	}
	return out, nil
}

// members lists a club's members, ascending, as View.Members.
func (r *snapshotReader) members(ctx context.Context, club int64, max int) ([]int64, error) {
	var ids []int64
	err := r.do(ctx, func(conn *pgx.Conn) error {
		limit := int64(-1)
		if max > 0 {
			limit = int64(max) + 1
		}
		rows, err := conn.Query(ctx, `SELECT id FROM `+r.table(tableUsers)+` WHERE club_id = $1 ORDER BY id LIMIT nullif($2::bigint, -1)`, club, limit)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	if err != nil {
		return nil, err
	}
	if max > 0 && len(ids) > max {
		return nil, fmt.Errorf("%w: club %d has more than %d members", ErrTooManyMembers, club, max)
	}
	return ids, nil
}

// clubs counts the members of every club, as View.Clubs.
func (r *snapshotReader) clubs(ctx context.Context) ([]Club, error) {
	var out []Club
	err := r.do(ctx, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT club_id, count(*) FROM `+r.table(tableUsers)+` WHERE club_id IS NOT NULL GROUP BY club_id ORDER BY club_id`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Club, error) {
			var c Club
			err := row.Scan(&c.ID, &c.Members)
			return c, err
		})
		return err
	})
	return out, err
}
