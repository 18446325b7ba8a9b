package faultnet

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/logbook/logbook/internal/testenv"
)

// pgThrough returns the test PostgreSQL's URL with its host replaced by a
// proxy's, and the proxy.
func pgThrough(t *testing.T) (string, *Proxy) {
	t.Helper()
	raw := testenv.URL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	p := proxy(t, u.Host)
	u.Host = p.Addr()
	return u.String(), p
}

func TestPostgresCut(t *testing.T) {
	dsn, p := pgThrough(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
		t.Fatal(err)
	}

	p.Cut()
	// A query sent under the cut hangs; nothing is lost, so after Heal it
	// completes with the right answer on the same connection.
	done := make(chan error, 1)
	go func() {
		var got int
		err := conn.QueryRow(ctx, "SELECT 41 + 1").Scan(&got)
		if err == nil && got != 42 {
			err = errTest("wrong answer after the cut")
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("query returned under a cut: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	// A new connection with a connect timeout fails.
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	if c2, err := pgx.Connect(cctx, dsn); err == nil {
		c2.Close(ctx)
		t.Fatal("connected to PostgreSQL across a cut")
	}
	cancel()
	p.Heal()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("query held by the cut, after heal: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("query still hanging 5 s after heal")
	}
	c3, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect after heal: %v", err)
	}
	c3.Close(ctx)
}

func TestPostgresCutTimeoutThenPoolRecovers(t *testing.T) {
	dsn, p := pgThrough(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	qctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = pool.Exec(qctx, "SELECT 1")
	cancel()
	if err == nil {
		t.Fatal("query with a timeout succeeded across a cut")
	}
	p.Heal()
	if err := eventually(func() error {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := pool.Exec(qctx, "SELECT 1")
		return err
	}); err != nil {
		t.Fatalf("pool after heal: %v", err)
	}
}

func TestPostgresResetPoolReconnects(t *testing.T) {
	dsn, p := pgThrough(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// A connection checked out before the reset breaks.
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	created := pool.Stat().NewConnsCount()
	p.Reset()
	time.Sleep(50 * time.Millisecond)
	if _, err := c.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("query on a reset connection succeeded")
	}
	c.Release()
	// The pool drops it and connects again.
	if err := eventually(func() error {
		_, err := pool.Exec(ctx, "SELECT 1")
		return err
	}); err != nil {
		t.Fatalf("pool after reset: %v", err)
	}
	if got := pool.Stat().NewConnsCount(); got <= created {
		t.Fatalf("pool made %d connections after the reset, %d before", got, created)
	}
	if s := p.Stats(); s.Resets == 0 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestPostgresLatency(t *testing.T) {
	const d = 100 * time.Millisecond
	dsn, p := pgThrough(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	p.Latency(d)
	for range 3 {
		start := time.Now()
		if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < d {
			t.Fatalf("query under %v latency took %v", d, took)
		}
	}
	p.Heal()
	// Best of a few: the machine is shared, but an unslowed round trip on
	// loopback is far below 100 ms.
	best := time.Hour
	for range 5 {
		start := time.Now()
		if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(start))
	}
	if best >= d {
		t.Fatalf("query after heal took %v", best)
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }

func eventually(f func() error) error {
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err = f(); err == nil {
			return nil
		}
	}
	return err
}
