//go:build unix

package pgsink

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/logbook/logbook/engine/window"
	"github.com/logbook/logbook/internal/testenv"
)

// The sink writes its windows over sslmode=verify-full to the TLS-only
// test server, which takes no other connection.
func TestSinkOverVerifiedTLS(t *testing.T) {
	u, schema := testenv.PostgresTLSSchemaURL(t)
	ctx := context.Background()
	p, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if _, err := p.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	var ssl bool
	if err := p.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil || !ssl {
		t.Fatalf("the pool's connection: ssl %v, %v", ssl, err)
	}
	a, err := window.Open(build(t, rand.New(rand.NewPCG(3, 4)), 500), def(), window.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s, err := New(ctx, p, a, Config{Table: "sink_tls", Unit: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	until, ok, err := s.Progress(ctx)
	if err != nil || !ok {
		t.Fatalf("progress %v %v", ok, err)
	}
	want := expected(t, a, time.Minute, until)
	if len(want) == 0 {
		t.Fatal("nothing to write")
	}
	same(t, "sink_tls", table(t, p, "sink_tls"), want)
}
