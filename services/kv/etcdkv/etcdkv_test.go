package etcdkv_test

import (
	"crypto/rand"
	"encoding/hex"
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
