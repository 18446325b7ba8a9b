//go:build unix

package kafkabus

// The crash test: a child process — this test binary, re-executed by the
// crashtest harness to run TestPublisherCrashChild — appends to the store and publishes
// it, and is killed with SIGKILL at a random moment, round after round, on
// one data directory and one topic. Each kill lands between appends'
// commits and their publication, often in the middle of a Kafka
// transaction. After every kill the topic must hold exactly a prefix of
// the log; at the end, a last publisher completes it.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/internal/crashtest"
)

const (
	crashEnvDir   = "LOGBOOK_KAFKABUS_CRASH_DIR"
	crashEnvTopic = "LOGBOOK_KAFKABUS_CRASH_TOPIC"
	crashEnvTx    = "LOGBOOK_KAFKABUS_CRASH_TX"
)

// TestPublisherCrashChild is not a test: it is the process
// TestPublisherCrash starts and kills. Run directly, it skips.
func TestPublisherCrashChild(t *testing.T) {
	out := crashtest.Child(t)
	fail := out.Fail
	dir := os.Getenv(crashEnvDir)
	cfg := testConfig(t)
	// Production settings, fsync on: the publisher sees only what the
	// store made durable. Without fsync, Pebble acknowledges appends a
	// kill can take back, and Kafka would then hold events the store lost.
	st, err := pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		fail("open: %v", err)
	}
	pcfg := testPublisher(cfg, os.Getenv(crashEnvTopic), os.Getenv(crashEnvTx), 4)
	pcfg.MaxTxnEvents = 100
	p := NewPublisher(st, pcfg)
	ctx := context.Background()
	go func() {
		if err := p.Run(ctx); err != nil {
			fail("publisher: %v", err)
		}
	}()
	go func() {
		for i := 0; ; i++ {
			if err := tryWriteEvents(ctx, st, fmt.Sprintf("c%d", i%3), 25, 4, 40); err != nil {
				fail("append: %v", err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	out.Printf("READY")
	select {}
}

func TestPublisherCrash(t *testing.T) {
	cfg := testConfig(t)
	const partitions = 4
	topic := newTopic(t, cfg, partitions)
	txid := uniqueName(t, "tx")
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))

	for round := range 5 {
		child := crashtest.Start(t, crashtest.Spec{
			Test: "TestPublisherCrashChild",
			Env:  []string{crashEnvDir + "=" + dir, crashEnvTopic + "=" + topic, crashEnvTx + "=" + txid},
		})
		if child.WaitFor("READY", 30*time.Second) {
			time.Sleep(time.Duration(200+rng.IntN(600)) * time.Millisecond)
		}
		child.Kill()
		if t.Failed() {
			t.Fatalf("round %d: the child failed", round)
		}

		// The topic holds exactly positions 1..k of the log, k <= head.
		st := openStore(t, dir)
		log := readLog(t, st)
		k, err := LastPublished(context.Background(), cfg, topic)
		if err != nil {
			t.Fatal(err)
		}
		if k > uint64(len(log)) {
			t.Fatalf("round %d: Kafka holds position %d, the log ends at %d", round, k, len(log))
		}
		checkTopic(t, cfg, topic, log[:k], partitions)
		t.Logf("round %d: killed with %d events in the log, %d published", round, len(log), k)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}

	st := openStore(t, dir)
	p := NewPublisher(st, testPublisher(cfg, topic, txid, partitions))
	stop := startPublisher(t, p)
	waitFor(t, 30*time.Second, "the last publisher to reach the head", func() bool { return p.LastPosition() == head(t, st) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkTopic(t, cfg, topic, readLog(t, st), partitions)
}
