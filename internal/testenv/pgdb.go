package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ScratchDatabase creates an empty database on the PostgreSQL server of
// dbURL (a restore target, say) and returns its URL. It is dropped when
// the test ends, through a connection of its own: one closed before the
// cleanup runs would leave the database behind.
func ScratchDatabase(t testing.TB, dbURL string) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	db := "restore_" + hex.EncodeToString(b)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(t.Context(), `CREATE DATABASE `+db); err != nil {
		t.Fatal(err)
	}
	dropAtCleanup(t, dbURL, "database "+db, `DROP DATABASE IF EXISTS `+db+` WITH (FORCE)`)
	u.Path = "/" + db
	return u.String()
}

// dropAtCleanup runs drop on the server of url when the test ends,
// through a connection of its own (one the test closed before its
// cleanups run would leave what (a schema, a database) behind), and logs
// rather than fails if it cannot.
func dropAtCleanup(t testing.TB, url, what, drop string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Logf("testenv: drop %s: %v", what, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, drop); err != nil {
			t.Logf("testenv: drop %s: %v", what, err)
		}
	})
}
