// Package testenv gives integration tests the real servers that
// scripts/test.sh starts: PostgreSQL (scripts/postgres.sh, named in
// LOGBOOK_TEST_POSTGRES), with a fresh schema per test, a Kafka broker
// (scripts/kafka.sh, LOGBOOK_TEST_KAFKA), a Cassandra node
// (scripts/cassandra.sh, LOGBOOK_TEST_CASSANDRA), Redis (scripts/redis.sh,
// LOGBOOK_TEST_REDIS), etcd (scripts/etcd.sh, LOGBOOK_TEST_ETCD),
// Confluent's Python client (scripts/pyenv.sh, LOGBOOK_TEST_PYTHON) and
// nginx (LOGBOOK_TEST_NGINX, default /usr/sbin/nginx), and the TLS-only
// Kafka broker and PostgreSQL server (scripts/kafka.sh start --tls,
// LOGBOOK_TEST_KAFKA_TLS; scripts/postgres.sh start --tls,
// LOGBOOK_TEST_POSTGRES_TLS).
//
// Every test that needs one of them asks this package for it, and nothing
// else reads those variables. A test whose server is missing skips, with a
// message naming the variable, so that go test ./... on a fresh clone is
// green with no server running. With LOGBOOK_REQUIRE_EXTERNAL=1 a missing
// server fails the test instead: scripts/test.sh sets it after starting the
// servers, so that a suite which silently skipped them cannot pass there.
// LOGBOOK_SKIP_EXTERNAL=1 (the old opt-in to skipping) also skips the
// Python client tests when a virtual environment exists.
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// RequireEnv is the variable that turns a missing server from a skip into
// a failure.
const RequireEnv = "LOGBOOK_REQUIRE_EXTERNAL"

// Required reports whether a missing server fails a test
// (LOGBOOK_REQUIRE_EXTERNAL=1) rather than skipping it.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// missing ends the test for want of what (named by env; how says how to
// provide it): it skips, or fails when Required.
func missing(t testing.TB, env, what, how string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s not set (no %s) and %s=1: run scripts/test.sh, or %s", env, what, RequireEnv, how)
	}
	t.Skipf("%s not set: skipping; set %s=1 to fail instead (no %s: %s)", env, RequireEnv, what, how)
}

// server returns the address in env, or ends the test.
func server(t testing.TB, env, what, script string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		missing(t, env, what, "start it with "+script+" start and export "+env+"=<what it prints>")
	}
	return v
}

// URL returns the test database's URL.
func URL(t testing.TB) string {
	t.Helper()
	return server(t, "LOGBOOK_TEST_POSTGRES", "PostgreSQL", "scripts/postgres.sh")
}

// Cassandra returns the test Cassandra node's contact addresses
// (scripts/cassandra.sh, LOGBOOK_TEST_CASSANDRA: host:port, comma
// separated).
func Cassandra(t testing.TB) []string {
	t.Helper()
	return strings.Split(server(t, "LOGBOOK_TEST_CASSANDRA", "Cassandra", "scripts/cassandra.sh"), ",")
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
	return schemaOn(t, URL(t))
}

// schemaOn returns a fresh schema name, dropped from the database at url
// when the test ends.
func schemaOn(t testing.TB, url string) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "t_" + hex.EncodeToString(b)
	dropAtCleanup(t, url, "schema "+name, `DROP SCHEMA IF EXISTS `+name+` CASCADE`)
	return name
}

// Python returns the python of the virtual environment scripts/pyenv.sh
// makes, with Confluent's confluent-kafka client (or LOGBOOK_TEST_PYTHON),
// or ends the test as a missing server does.
func Python(t testing.TB) string {
	t.Helper()
	const env = "LOGBOOK_TEST_PYTHON"
	if os.Getenv("LOGBOOK_SKIP_EXTERNAL") == "1" && !Required() {
		t.Skip("LOGBOOK_SKIP_EXTERNAL=1: no Python client")
	}
	python := os.Getenv(env)
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
		if _, err := os.Stat(python); err != nil {
			missing(t, env, "Python with confluent-kafka at "+python, "run scripts/pyenv.sh")
		}
	}
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s=%s: %v", env, python, err) // named but absent: a broken setup, not a missing one
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

// EtcdCluster returns the client endpoints of the test's three-member etcd
// cluster (scripts/etcd.sh start --members 3, LOGBOOK_TEST_ETCD_CLUSTER),
// in member order.
func EtcdCluster(t testing.TB) []string {
	t.Helper()
	return strings.Split(server(t, "LOGBOOK_TEST_ETCD_CLUSTER", "three-member etcd cluster", "scripts/etcd.sh --members 3"), ",")
}

// Nginx returns the nginx binary the cluster tests run (LOGBOOK_TEST_NGINX,
// default /usr/sbin/nginx, which scripts/test.sh installs), or ends the
// test as a missing server does.
func Nginx(t testing.TB) string {
	t.Helper()
	const env = "LOGBOOK_TEST_NGINX"
	if v := os.Getenv(env); v != "" {
		return v
	}
	const path = "/usr/sbin/nginx"
	if _, err := os.Stat(path); err != nil {
		missing(t, env, "nginx at "+path, "install nginx")
	}
	return path
}

// Peers returns where scripts/peers.sh installed the event stores `bench
// peers` compares logbook with: Message DB's SQL directory
// (LOGBOOK_MESSAGE_DB) and a python with the eventsourcing library
// (LOGBOOK_PEERS_PYTHON); or it ends the test as a missing server does.
func Peers(t testing.TB) (messageDB, python string) {
	t.Helper()
	if os.Getenv("LOGBOOK_SKIP_EXTERNAL") == "1" && !Required() {
		t.Skip("LOGBOOK_SKIP_EXTERNAL=1: no peer event stores")
	}
	messageDB, python = os.Getenv("LOGBOOK_MESSAGE_DB"), os.Getenv("LOGBOOK_PEERS_PYTHON")
	if messageDB == "" || python == "" {
		missing(t, "LOGBOOK_MESSAGE_DB and LOGBOOK_PEERS_PYTHON", "the peer event stores", `eval "$(scripts/peers.sh)"`)
	}
	return messageDB, python
}

// KafkaTLSBroker is the TLS-only test broker scripts/kafka.sh start --tls
// runs: the JSON it prints, which LOGBOOK_TEST_KAFKA_TLS holds.
type KafkaTLSBroker struct {
	// SSL is the listener that requires a client certificate (Cert,
	// Key) signed by CA; SASLSSL the one that authenticates User by
	// SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN with the password in
	// PasswordFile. Both present a certificate for 127.0.0.1 and
	// localhost signed by CA.
	SSL          string `json:"ssl"`
	SASLSSL      string `json:"sasl_ssl"`
	CA           string `json:"ca"`
	Cert         string `json:"cert"`
	Key          string `json:"key"`
	User         string `json:"user"`
	PasswordFile string `json:"password_file"`
}

// KafkaTLS returns the TLS-only test broker, or ends the test as a
// missing server does.
func KafkaTLS(t testing.TB) KafkaTLSBroker {
	t.Helper()
	const env = "LOGBOOK_TEST_KAFKA_TLS"
	v := os.Getenv(env)
	if v == "" {
		missing(t, env, "TLS Kafka broker", "start it with scripts/kafka.sh start --tls and export "+env+"=<what it prints>")
	}
	var b KafkaTLSBroker
	if err := json.Unmarshal([]byte(v), &b); err != nil || b.SSL == "" || b.SASLSSL == "" || b.CA == "" {
		t.Fatalf("%s=%q: want the JSON scripts/kafka.sh start --tls prints (%v)", env, v, err)
	}
	return b
}

// PostgresTLS returns the URL of the TLS-only test PostgreSQL server
// (scripts/postgres.sh start --tls, LOGBOOK_TEST_POSTGRES_TLS), with
// sslmode=verify-full and its CA as sslrootcert, or ends the test as a
// missing server does. The server refuses connections without TLS, and
// listens on 127.0.0.2 too, a name its certificate does not carry.
func PostgresTLS(t testing.TB) string {
	t.Helper()
	const env = "LOGBOOK_TEST_POSTGRES_TLS"
	v := os.Getenv(env)
	if v == "" {
		missing(t, env, "TLS PostgreSQL", "start it with scripts/postgres.sh start --tls and export "+env+"=<what it prints>")
	}
	return v
}

// PostgresTLSSchemaURL is PostgresTLS with a fresh schema as its
// search_path, dropped when the test ends (the schema itself is not
// created).
func PostgresTLSSchemaURL(t testing.TB) (url, schema string) {
	t.Helper()
	url = PostgresTLS(t)
	schema = schemaOn(t, url)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "search_path=" + schema, schema
}
