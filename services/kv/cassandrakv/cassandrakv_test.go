package cassandrakv_test

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/cassandrakv"
	"github.com/logbook/logbook/services/kv/kvtest"
)

// open returns a backend on the test node whose partition no other test
// shares.
func open(t *testing.T) kv.Backend {
	hosts := testenv.Cassandra(t)
	p := make([]byte, 6)
	_, _ = rand.Read(p)
	b, err := cassandrakv.Open(t.Context(), hosts, cassandrakv.Options{Keyspace: "logbook_test", Partition: "test-" + hex.EncodeToString(p)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every write is a Paxos round on one partition of one node of a loaded
// machine: the concurrent tests are kept small so that they take seconds,
// and the contenders few enough that Paxos contention stays within
// cas_contention_timeout.
func TestConformance(t *testing.T) {
	kvtest.Run(t, open, kvtest.Full(kvtest.Options{Contenders: 8, ContendedUpdates: 20, LinearClients: 8, LinearOps: 50}))
}
