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
	defer cancel()
	go func() {
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
	err = fn(fctx)
	cancel()
	return err
}
