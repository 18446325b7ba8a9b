package cassandrakv_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
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
	// On a cluster (scripts/cassandra.sh start --nodes 2 or 3) every node
	// holds a replica, so that a write's commit can miss one and a read
	// that skipped Paxos could see it.
	b, err := cassandrakv.Open(t.Context(), hosts, cassandrakv.Options{
		Keyspace:    fmt.Sprintf("logbook_test_rf%d", len(hosts)),
		Partition:   "test-" + hex.EncodeToString(p),
		Replication: len(hosts),
	})
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
