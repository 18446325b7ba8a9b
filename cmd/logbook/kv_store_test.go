package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/services/kv"
)

// kv serve --store opens every backend the kv package has: the embedded
// one (no --store), postgres://, redis://, etcd:// and cassandra://. Each is written to
// and read back through the repository.
func TestKVServeStores(t *testing.T) {
	pgURL, _ := testenv.SchemaURL(t)
	stores := map[string]string{
		"embedded":  "",
		"postgres":  pgURL,
		"redis":     "redis://" + testenv.Redis(t),
		"etcd":      "etcd://" + strings.Join(testenv.Etcd(t), ","),
		"cassandra": "cassandra://" + strings.Join(testenv.Cassandra(t), ",") + "/logbook_test",
	}
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			b, where, err := openKVBackend(ctx, t.TempDir(), store)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(where, "pw") {
				t.Errorf("where %q shows a password", where)
			}
			repo := kv.New(b, kv.Limits{})
			defer repo.Close()
			// The /healthz check reads through the backend.
			if err := repo.Healthy(ctx); err != nil {
				t.Fatalf("healthy: %v", err)
			}
			id := fmt.Sprintf("kv-serve-store-%d", time.Now().UnixNano())
			if err := repo.Add(ctx, id, []byte("v1")); err != nil {
				t.Fatal(err)
			}
			e, ok, err := repo.Get(ctx, id)
			if err != nil || !ok || string(e.Value) != "v1" {
				t.Fatalf("get %s: %+v %v %v", id, e, ok, err)
			}
			if err := repo.Delete(ctx, id, e.Version); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestKVServeBadStore(t *testing.T) {
	for _, c := range []struct{ store, want string }{
		{"mysql://u:pw@h/db", "want postgres://…, redis://host:port, etcd://host:port or cassandra://host:port/keyspace"},
		{"redis://u:pw@h:1", "want redis://host:port"},
		{"redis://h:1/3", "want redis://host:port"},
		{"etcd://", "want etcd://host:port"},
		{"etcd://h:1/prefix", "want etcd://host:port"},
		{"cassandra://", "want cassandra://host:port"},
		{"cassandra://u:pw@h:1/ks", "want cassandra://host:port"},
		{"cassandra://h:1/ks/x", "want cassandra://host:port"},
	} {
		_, _, err := openKVBackend(context.Background(), t.TempDir(), c.store)
		if !cliutil.IsUsage(err) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "pw") {
			t.Errorf("--store %s: %v; want bad usage naming %q, no password", c.store, err, c.want)
		}
	}
}

// kv serve --max-value-size: a size that is not one is bad usage, and so
// is one larger than the backend takes (etcd's client sends 64 MiB at
// most), said before anything is served.
func TestKVServeMaxValueSize(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer,writer-token:writer")
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--max-value-size", "lots"}, `--max-value-size "lots": a size from 1 byte to 1 TiB`},
		{[]string{"--max-value-size", "0"}, "a size from 1 byte"},
		{[]string{"--max-value-size", "2TiB"}, "a size from 1 byte"},
		{[]string{"--max-value-size", "100MB", "--store", "etcd://" + strings.Join(testenv.Etcd(t), ",")}, "takes values of at most 66060288 bytes (etcd's client sends messages of at most 64 MiB)"},
	} {
		code, _, errOut := runCLI(t, append([]string{"kv", "serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.msg) {
			t.Errorf("kv serve %v: exit %d, %q; want 2 and %q", c.args, code, errOut, c.msg)
		}
	}
}
