package etcdkv_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/etcdkv"
	"github.com/logbook/logbook/services/kv/kvtest"
)

// open returns a backend on the test server whose keys no other test
// shares.
func open(t *testing.T) kv.Backend {
	eps := testenv.Etcd(t)
	p := make([]byte, 6)
	_, _ = rand.Read(p)
	prefix := "test-" + hex.EncodeToString(p) + "/"
	b, err := etcdkv.Open(t.Context(), eps, etcdkv.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := etcdkv.Open(t.Context(), eps, etcdkv.Options{})
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Client().Delete(t.Context(), prefix, clientv3.WithPrefix())
	})
	return b
}

// etcd fsyncs every transaction and has one writer: the contended test is
// kept smaller so that it takes seconds.
func TestConformance(t *testing.T) {
	kvtest.Run(t, open, kvtest.Full(kvtest.Options{ContendedUpdates: 40, LinearOps: 100}))
}

// TestValueOverServerLimit: a value the repository allows but the etcd
// server refuses (over its --max-request-bytes, 32 MiB as scripts/etcd.sh
// starts it) is a *kv.TooLargeError, which the HTTP API answers 413, not
// an unavailable backend; one within the client's limit but over the
// repository's own is refused before it is sent.
func TestValueOverServerLimit(t *testing.T) {
	b := open(t)
	max, _ := kv.BackendValueLimit(b)
	r := kv.New(b, kv.Limits{MaxValueBytes: 1 << 30})
	defer r.Close()
	if got := r.Limits().MaxValueBytes; int64(got) != max {
		t.Fatalf("MaxValueBytes %d, want it lowered to the client's limit %d", got, max)
	}
	var tl *kv.TooLargeError
	err := r.Add(t.Context(), "big", make([]byte, 40<<20))
	if !errors.As(err, &tl) || tl.Size != 40<<20 {
		t.Fatalf("a 40 MiB value into etcd: %v", err)
	}
	err = r.Add(t.Context(), "huge", make([]byte, max+1))
	if !errors.As(err, &tl) || tl.Max != max {
		t.Fatalf("a value over the client's limit: %v", err)
	}
	if _, ok, err := r.Get(t.Context(), "big"); ok || err != nil {
		t.Fatalf("the refused value is there: %v %v", ok, err)
	}
}
