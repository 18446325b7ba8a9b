// Package testenv gives integration tests the real servers that
// scripts/test.sh starts: PostgreSQL (scripts/postgres.sh, named in
// LOGBOOK_TEST_POSTGRES), with a fresh schema per test, and a Kafka broker
// (scripts/kafka.sh, LOGBOOK_TEST_KAFKA), Redis (scripts/redis.sh,
// LOGBOOK_TEST_REDIS) and etcd (scripts/etcd.sh, LOGBOOK_TEST_ETCD). Without them a test fails,
// unless LOGBOOK_SKIP_EXTERNAL=1 says to skip the tests that need them: a
// suite that silently skipped them would hide failures.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// server returns the address in env, or ends the test.
func server(t testing.TB, env, what, script string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		if os.Getenv("LOGBOOK_SKIP_EXTERNAL") == "1" {
			t.Skip("LOGBOOK_SKIP_EXTERNAL=1: no " + what)
		}
		t.Fatalf("%s is not set: run scripts/test.sh, or start %s and export what it prints (LOGBOOK_SKIP_EXTERNAL=1 skips)", env, script)
	}
	return v
}

// URL returns the test database's URL.
func URL(t testing.TB) string {
	t.Helper()
	return server(t, "LOGBOOK_TEST_POSTGRES", "PostgreSQL", "scripts/postgres.sh")
}

// Kafka returns the test broker's addresses.
func Kafka(t testing.TB) []string {
	t.Helper()
	return strings.Split(server(t, "LOGBOOK_TEST_KAFKA", "Kafka", "scripts/kafka.sh"), ",")
}

// SchemaURL returns the test database's URL with a fresh schema as its
// search_path, which is how a logbook command is pointed at a store.
func SchemaURL(t testing.TB) (url, schema string) {
	t.Helper()
	url, schema = URL(t), Schema(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "search_path=" + schema, schema
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
			t.Logf("testenv: drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+name+` CASCADE`); err != nil {
			t.Logf("testenv: drop schema %s: %v", name, err)
		}
	})
	return name
}

// Python returns the python of the virtual environment scripts/pyenv.sh
// makes, with Confluent's confluent-kafka client (or LOGBOOK_TEST_PYTHON),
// or ends the test: it fails without one unless LOGBOOK_SKIP_EXTERNAL=1.
func Python(t testing.TB) string {
	t.Helper()
	if os.Getenv("LOGBOOK_SKIP_EXTERNAL") == "1" {
		t.Skip("LOGBOOK_SKIP_EXTERNAL=1: no Python client")
	}
	python := os.Getenv("LOGBOOK_TEST_PYTHON")
	if python == "" {
		// The module root: testenv's tests run in a package directory.
		dir, err := os.Getwd()
		for err == nil {
			if _, statErr := os.Stat(filepath.Join(dir, "go.mod")); statErr == nil {
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				err = os.ErrNotExist
			}
			dir = parent
		}
		if err != nil {
			t.Fatalf("testenv: no go.mod above the test's directory: %v", err)
		}
		python = filepath.Join(dir, ".cache", "pyenv", "bin", "python")
	}
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("no Python with confluent-kafka at %s: run scripts/pyenv.sh (LOGBOOK_SKIP_EXTERNAL=1 skips): %v", python, err)
	}
	return python
}

// Redis returns the test Redis server's address (scripts/redis.sh,
// LOGBOOK_TEST_REDIS), host:port.
func Redis(t testing.TB) string {
	t.Helper()
	return server(t, "LOGBOOK_TEST_REDIS", "Redis", "scripts/redis.sh")
}

// Etcd returns the test etcd server's client endpoints (scripts/etcd.sh,
// LOGBOOK_TEST_ETCD), comma-separated host:port.
func Etcd(t testing.TB) []string {
	t.Helper()
	return strings.Split(server(t, "LOGBOOK_TEST_ETCD", "etcd", "scripts/etcd.sh"), ",")
}
