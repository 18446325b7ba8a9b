// Package pgtest gives tests a PostgreSQL database: the one that
// scripts/test.sh starts (scripts/postgres.sh) and names in
// LOGBOOK_TEST_POSTGRES, with a fresh schema per test.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// URL returns the test database's URL. Without one the test fails, unless
// LOGBOOK_SKIP_EXTERNAL=1 says to skip the tests that need external
// servers: a suite that silently skipped them would hide failures.
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("LOGBOOK_TEST_POSTGRES")
	if url == "" {
		if os.Getenv("LOGBOOK_SKIP_EXTERNAL") == "1" {
			t.Skip("LOGBOOK_SKIP_EXTERNAL=1: no PostgreSQL")
		}
		t.Fatal("LOGBOOK_TEST_POSTGRES is not set: run scripts/test.sh, or start scripts/postgres.sh and export its URL (LOGBOOK_SKIP_EXTERNAL=1 skips)")
	}
	return url
}

// Schema returns a fresh schema name, dropped when the test ends.
func Schema(t testing.TB) string {
	t.Helper()
	url := URL(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "t_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Logf("pgtest: drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+name+` CASCADE`); err != nil {
			t.Logf("pgtest: drop schema %s: %v", name, err)
		}
	})
	return name
}
