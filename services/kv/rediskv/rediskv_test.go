package rediskv_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/kvtest"
	"github.com/logbook/logbook/services/kv/rediskv"
)

// open returns a backend on the test server whose keys no other test
// shares.
func open(t *testing.T) kv.Backend {
	addr := testenv.Redis(t)
	p := make([]byte, 6)
	_, _ = rand.Read(p)
	prefix := "test-" + hex.EncodeToString(p) + ":"
	b, err := rediskv.Open(t.Context(), addr, rediskv.Options{Prefix: prefix, PoolSize: 80})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := rediskv.Open(t.Context(), addr, rediskv.Options{})
		if err != nil {
			return
		}
		defer c.Close()
		iter := c.Client().Scan(t.Context(), 0, prefix+"*", 1000).Iterator()
		for iter.Next(t.Context()) {
			c.Client().Del(t.Context(), iter.Val())
		}
	})
	return b
}

func TestConformance(t *testing.T) {
	kvtest.Run(t, open, kvtest.Full(kvtest.Options{}))
}

func TestUnreachable(t *testing.T) {
	if _, err := rediskv.Open(t.Context(), "127.0.0.1:1", rediskv.Options{}); !errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("opening a server that is not there: %v", err)
	}
}
