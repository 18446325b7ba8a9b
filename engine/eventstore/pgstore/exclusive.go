package pgstore

import (
	"context"
	"hash/fnv"
	"time"
)

// Exclusive runs fn while this process holds the lock called name among
// all the processes sharing the store, and runs it again, after a pause,
// whenever it returns, until ctx ends: one of several write nodes
// publishes the log to Kafka this way, and another takes over within
// seconds when it dies. The lock is a session advisory lock; if its
// session breaks, fn's context is cancelled, because another process may
// hold the lock by then.
func (s *Store) Exclusive(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	h := fnv.New64a()
	h.Write([]byte("logbook exclusive " + s.schema + " " + name))
	key := int64(h.Sum64() >> 1)
	for {
		err := s.holdAndRun(ctx, key, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		_ = err // fn failed or the session broke: try again after a pause
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (s *Store) holdAndRun(ctx context.Context, key int64, fn func(ctx context.Context) error) error {
	conn, err := s.dedicated(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var held bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&held); err != nil || !held {
		return err
	}
	fctx, cancel := context.WithCancel(ctx)
	pinged := make(chan struct{})
	// The session is closed (deferred above) only after the pinger is
	// done with it: a pgx connection is not safe for concurrent use.
	defer func() { cancel(); <-pinged }()
	go func() {
		defer close(pinged)
		// Only this goroutine uses the session from here on.
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-fctx.Done():
				return
			case <-t.C:
				pctx, pcancel := context.WithTimeout(fctx, 5*time.Second)
				err := conn.Ping(pctx)
				pcancel()
				if err != nil && fctx.Err() == nil {
					cancel()
					return
				}
			}
		}
	}()
	return fn(fctx)
}

// LoadProgress returns the position saved under name, 0 if none.
func (s *Store) LoadProgress(ctx context.Context, name string) (uint64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	var pos int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT position FROM progress WHERE name = $1), 0)`, name).Scan(&pos)
	if err != nil {
		return 0, s.fail("load progress "+name, err)
	}
	return uint64(pos), nil
}

// SaveProgress saves pos under name; a smaller one than saved is ignored.
func (s *Store) SaveProgress(ctx context.Context, name string, pos uint64) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	_, err := s.pool.Exec(ctx, `INSERT INTO progress AS p VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET position = greatest(p.position, excluded.position)`, name, int64(pos))
	return s.fail("save progress "+name, err)
}

// Progress is a position kept in the store under a name: LoadProgress and
// SaveProgress as a value, for a component that keeps its progress
// outside what it writes to (a Kafka publisher's lower bound of what
// Kafka holds).
type Progress struct {
	s    *Store
	name string
}

// Progress returns the position kept under name.
func (s *Store) Progress(name string) Progress { return Progress{s, name} }

// Load returns the saved position, 0 if none.
func (p Progress) Load(ctx context.Context) (uint64, error) { return p.s.LoadProgress(ctx, p.name) }

// Save saves pos; a smaller one than saved is ignored.
func (p Progress) Save(ctx context.Context, pos uint64) error {
	return p.s.SaveProgress(ctx, p.name, pos)
}
