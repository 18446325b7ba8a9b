package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// startFollowing starts the follower, once, unless the store is closed.
func (s *Store) startFollowing() {
	s.followOnce.Do(func() {
		if s.enter() != nil {
			close(s.followed)
			return
		}
		defer s.leave()
		s.following.Store(true)
		s.wg.Add(1)
		go func() { defer s.wg.Done(); defer close(s.followed); s.follow(s.bg) }()
	})
}

// follow keeps this process's view of the head current: it LISTENs for
// the sequencer's notifications and polls as a safety net, and for each
// new stretch of the log that another process wrote it wakes the
// subscriptions of the streams and tags in it.
//
// What committed before it first caught up, unheard of (before the first
// wait this process followed nothing but its own appends), it publishes
// as one stretch that wakes every waiter (jump) rather than reading which
// streams the stretches hold, which could take reading much of the log;
// after that, what it missed while reconnecting it reads (publishUpTo), so
// that only the subscriptions of those streams wake.
func (s *Store) follow(ctx context.Context) {
	caughtUp := false
	for ctx.Err() == nil {
		err := s.listen(ctx, &caughtUp)
		if ctx.Err() != nil || schemaGone(err) {
			return
		}
		// The connection broke: reconnect, polling meanwhile.
		if err := s.catchUp(ctx, &caughtUp); schemaGone(err) {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(s.opts.Poll):
		}
	}
}

// catchUp reads the head and publishes everything up to it: at once the
// first time (jump), by stretches after (publishUpTo).
func (s *Store) catchUp(ctx context.Context, caughtUp *bool) error {
	var head int64
	if err := s.pool.QueryRow(ctx, `SELECT position FROM head`).Scan(&head); err != nil {
		return err
	}
	if *caughtUp {
		s.publishUpTo(ctx, uint64(head))
	} else {
		s.jump(uint64(head))
		*caughtUp = true
	}
	return nil
}

func (s *Store) listen(ctx context.Context, caughtUp *bool) error {
	conn, err := s.dedicated(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{s.headCh}.Sanitize()); err != nil {
		return err
	}
	if err := s.catchUp(ctx, caughtUp); schemaGone(err) { // what committed before LISTEN took effect
		return err
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, s.opts.Poll)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && wctx.Err() == nil:
			return err
		case err == nil:
			nt, ok := parseNotice(n.Payload)
			if !ok {
				s.heardForeign()
				break // a payload of another version: read the head
			}
			if nt.sender == s.instance {
				continue // this process's appender publishes what it wrote
			}
			s.heardForeign()
			if nt.head <= s.knownHead() {
				continue
			}
			// Notifications come in commit order: the next stretch,
			// with its streams and tags, is published as it is.
			if s.announceNotice(nt) {
				continue
			}
			s.publishUpTo(ctx, nt.head)
			continue
		}
		if err := s.catchUp(ctx, caughtUp); schemaGone(err) {
			return err
		}
	}
}

// jump publishes everything up to head as one stretch, waking every
// waiter.
func (s *Store) jump(head uint64) {
	for {
		from := s.knownHead()
		if head <= from || s.announced(from, head, nil, nil, true) {
			return
		}
	}
}

func (s *Store) knownHead() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.known
}

// schemaGone reports an error saying the store's tables are gone (its
// schema was dropped under it): the follower stops rather than poll a
// missing table forever.
func schemaGone(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000")
}

// publishUpTo publishes everything up to head, in stretches of at most
// 10,000 positions. The follower and the appenders call it; a stretch is
// published once, by whoever reads it first (announced), so in order.
func (s *Store) publishUpTo(ctx context.Context, head uint64) {
	for ctx.Err() == nil {
		from := s.knownHead()
		if head <= from {
			return
		}
		if err := s.publish(ctx, from, min(head, from+10_000)); err != nil {
			return
		}
	}
}

// dedicated opens a connection outside the pool, for a session that
// LISTENs or holds a lock. Its waits end by deadline rather than by a
// cancel request, which PostgreSQL could deliver to the session's next
// statement instead.
func (s *Store) dedicated(ctx context.Context) (*pgx.Conn, error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// publish announces positions (from, to]: it reads which streams and
// tags the appends there hold and wakes the subscriptions that follow
// them — or, when no one waits for particular streams or tags, wakes
// every waiter without reading. An append that straddles from was published with the stretch
// before; reading it again costs at most a spurious wake-up.
func (s *Store) publish(ctx context.Context, from, to uint64) error {
	if !s.notify.Selective() {
		// No one waits for particular streams or tags: wake every
		// waiter rather than read which ones the stretch holds.
		s.announced(from, to, nil, nil, true)
		return nil
	}
	rows, err := s.pool.Query(ctx, `SELECT stream, tags FROM appends
		WHERE position >= coalesce((SELECT max(position) FROM appends WHERE position <= $1), $1) AND position <= $2
		ORDER BY position`, int64(from), int64(to))
	if err != nil {
		return err
	}
	defer rows.Close()
	var streams []string
	tags := make(map[string]struct{})
	var stream string
	var appTags []string
	for rows.Next() {
		if err := rows.Scan(&stream, &appTags); err != nil {
			return err
		}
		if len(streams) == 0 || streams[len(streams)-1] != stream {
			streams = append(streams, stream)
		}
		for _, t := range appTags {
			tags[t] = struct{}{}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	s.stretchesRead.Add(1)
	s.announced(from, to, streams, tags, false)
	return nil
}

// announceNotice publishes the stretch a notice names if it is the next
// one to publish: to the waiters of its streams and tags, or, when no one
// waits for particular ones (a write node's usual case: only the whole
// log is followed there, if anything), to every waiter without decoding
// the lists. It reports false if the stretch is not the next one or the
// notice lacks the lists someone needs.
func (s *Store) announceNotice(nt notice) bool {
	if !s.notify.Selective() {
		return s.announced(nt.from, nt.head, nil, nil, true)
	}
	streams, tags, ok := nt.streamsAndTags()
	return ok && s.announced(nt.from, nt.head, streams, tags, false)
}

// announced publishes stretch (from, to] of the log, holding those
// streams and tags (or, with all, whatever it holds: every waiter is
// woken), unless someone else has.
func (s *Store) announced(from, to uint64, streams []string, tags map[string]struct{}, all bool) bool {
	s.mu.Lock()
	if s.known != from {
		s.mu.Unlock()
		return false
	}
	s.known = to
	close(s.moved)
	s.moved = make(chan struct{})
	s.mu.Unlock()
	if all {
		s.notify.PublishAll()
	} else {
		s.notify.Publish(streams, tags)
	}
	return true
}

// announce publishes what this process has just committed, (from, to],
// before its appends are answered, so that a subscription of this process
// wakes for it at once. If this process has not yet published the log up
// to from (another process wrote it), it reads what it has not.
//
// The log grown before from is this process's other appender's stretch,
// committed and not yet announced, or another process's: then it counts
// the log as shared (heardForeign) and, unless the follower runs and will
// publish that stretch, publishes it itself. While the other appender has
// a batch out, whose stretch may not be recorded yet, it waits for it
// first (up to announceWait), so that a process alone on the log is not
// taken for shared.
func (s *Store) announce(ctx context.Context, from, to uint64, streams []string, tags map[string]struct{}) {
	s.mu.Lock()
	s.committed[from] = to
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.committed, from)
		s.mu.Unlock()
	}()
	timer := time.NewTimer(announceWait)
	defer timer.Stop()
	for !s.announced(from, to, streams, tags, false) {
		s.mu.Lock()
		known, moved := s.known, s.moved
		ours := s.oursBetween(known, from)
		s.mu.Unlock()
		switch {
		case known == from:
			continue // moved to us between the two locks
		case known >= to:
			return // read past it by the follower, which woke its streams
		case known > from:
			s.publishUpTo(ctx, to)
			return
		case !ours && s.inFlight.Load() <= 1:
			// No other batch of this process is out (this one is
			// counted until it is announced) whose stretch, committed
			// but not yet recorded here, could be the gap: another
			// process wrote it.
			s.heardForeign()
			if !s.following.Load() {
				s.publishUpTo(ctx, to)
				return
			}
		}
		select {
		case <-moved:
		case <-timer.C:
			// Not the other appender's after all, most likely.
			s.waitedOut.Add(1)
			s.heardForeign()
			s.publishUpTo(ctx, to)
			return
		case <-ctx.Done():
			return
		}
	}
}

// oursBetween reports whether (known, from] is stretches this process
// committed and has not announced yet. s.mu is held.
func (s *Store) oursBetween(known, from uint64) bool {
	for known < from {
		next, ok := s.committed[known]
		if !ok {
			return false
		}
		known = next
	}
	return known == from
}

// announceWait is how long an appender whose commit is not the next to
// announce waits for the one before it (this process's other appender,
// most often, or the follower with another process's) before it reads
// the stretch between.
const announceWait = 50 * time.Millisecond

// maxNoticeLists bounds the streams and tags a NOTIFY payload carries
// (PostgreSQL's limit is 8,000 bytes); beyond it, followers read them.
const maxNoticeLists = 7000

// A notice is a NOTIFY payload: "head sender from", then, if they fit,
// " " and the stretch's streams and tags as JSON. A follower that has
// published up to from publishes the stretch from these without a query.
type notice struct {
	head, from uint64
	sender     string
	lists      string // the JSON of noticeJSON, "" if it did not fit
}

type noticeJSON struct {
	Streams []string `json:"s"`
	Tags    []string `json:"t,omitempty"`
}

// noticeLists is the end of a notice: "" or " " and the lists.
func noticeLists(streams []string, tags map[string]struct{}) string {
	j := noticeJSON{Streams: streams}
	for t := range tags {
		j.Tags = append(j.Tags, t)
	}
	b, err := json.Marshal(j)
	if err != nil || len(b) > maxNoticeLists {
		return ""
	}
	return " " + string(b)
}

func parseNotice(payload string) (notice, bool) {
	var n notice
	f := strings.SplitN(payload, " ", 4)
	if len(f) < 3 {
		return n, false
	}
	var err1, err2 error
	n.head, err1 = strconv.ParseUint(f[0], 10, 64)
	n.sender = f[1]
	n.from, err2 = strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil || n.from > n.head {
		return n, false
	}
	if len(f) == 4 {
		n.lists = f[3]
	}
	return n, true
}

// streamsAndTags decodes the notice's lists: decoded only when someone
// waits for particular streams or tags (announceNotice). ok is false if
// the notice has none or they do not parse.
func (n notice) streamsAndTags() (streams []string, tags map[string]struct{}, ok bool) {
	if n.lists == "" {
		return nil, nil, false
	}
	var j noticeJSON
	if json.Unmarshal([]byte(n.lists), &j) != nil {
		return nil, nil, false
	}
	tags = make(map[string]struct{}, len(j.Tags))
	for _, t := range j.Tags {
		tags[t] = struct{}{}
	}
	return j.Streams, tags, true
}
