package faultnet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/internal/testenv"
)

// kafkaNodes returns the test broker's plain address and a proxy for each
// node listener it was started with (LOGBOOK_TEST_KAFKA_NODES holds the
// KAFKA_NODE_LISTENERS value scripts/test.sh starts it with).
func kafkaNodes(t *testing.T) (string, map[string]*Proxy) {
	t.Helper()
	direct := testenv.Kafka(t)[0]
	env := os.Getenv("LOGBOOK_TEST_KAFKA_NODES")
	if env == "" {
		msg := "LOGBOOK_TEST_KAFKA_NODES not set: the Kafka broker's node listeners (scripts/kafka.sh, KAFKA_NODE_LISTENERS; scripts/test.sh sets both)"
		if testenv.Required() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	proxies, err := KafkaNodeProxies(env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range proxies {
			p.Close()
		}
	})
	return direct, proxies
}

func appendEvents(t *testing.T, st eventstore.Store, n int) {
	t.Helper()
	for i := range n {
		ev := eventstore.NewEvent{Type: "faultnet.test", Data: fmt.Appendf(nil, "%d", i)}
		if _, err := st.Append(context.Background(), fmt.Sprintf("s-%d", i%7), eventstore.Any, []eventstore.NewEvent{ev}); err != nil {
			t.Fatal(err)
		}
	}
}

func lastPublished(t *testing.T, direct, topic string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	last, err := kafkabus.LastPublished(ctx, kafkabus.Config{Brokers: []string{direct}}, topic)
	if err != nil && !strings.Contains(err.Error(), "UNKNOWN_TOPIC") {
		t.Fatal(err)
	}
	return last
}

func waitPublished(t *testing.T, direct, topic string, want uint64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for lastPublished(t, direct, topic) < want {
		if time.Now().After(deadline) {
			t.Fatalf("topic %s: %d published after 60 s, want %d", topic, lastPublished(t, direct, topic), want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A node's publisher and consumer reach Kafka through the node's own
// listener and proxy: a cut stalls both, and after the heal they resume
// with nothing lost and nothing twice (the topic equals the log).
func TestKafkaNodeCutStallsAndResumes(t *testing.T) {
	direct, proxies := kafkaNodes(t)
	t.Run("quiet", func(t *testing.T) { kafkaCut(t, direct, proxies, 3*time.Second, 0) })
	// Events appended without pause, so that the cut falls inside an open
	// transaction, and a cut longer than the transaction timeout: the
	// broker aborts the transaction while the publisher cannot hear it,
	// and after the heal the publisher must publish those events again.
	t.Run("busy_beyond_the_transaction_timeout", func(t *testing.T) { kafkaCut(t, direct, proxies, 8*time.Second, 3*time.Second) })
}

func kafkaCut(t *testing.T, direct string, proxies map[string]*Proxy, cut, txnTimeout time.Duration) {
	busy := txnTimeout > 0
	var p *Proxy
	for _, p = range proxies {
		break
	}
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	topic := fmt.Sprintf("faultnet-%d", time.Now().UnixNano())
	t.Cleanup(func() { p.Heal() })
	node := kafkabus.Config{Brokers: []string{p.Addr()}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pub := kafkabus.NewPublisher(st, kafkabus.PublisherConfig{
		Config: node, Topic: topic, TransactionalID: topic, Partitions: 3,
		MaxBackoff: 500 * time.Millisecond, TxnTimeout: txnTimeout, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	pubDone := make(chan error, 1)
	go func() { pubDone <- pub.Run(ctx) }()
	defer func() { cancel(); <-pubDone }()

	appendEvents(t, st, 30)
	waitPublished(t, direct, topic, 30)

	// A consumer in a group, also through the node's proxy.
	var handled atomic.Int64
	proc := kafkabus.NewProcessor(node, topic+"-g", topic, st, func(_ context.Context, batch []eventstore.Event) error {
		handled.Add(int64(len(batch)))
		return nil
	})
	procDone := make(chan error, 1)
	go func() { procDone <- proc.Run(ctx) }()
	defer func() { cancel(); <-procDone }()
	started := time.Now()
	waitFor(t, "the consumer to read 30", func() bool { return handled.Load() >= 30 })
	t.Logf("consumer read the first 30 in %v", time.Since(started).Round(time.Millisecond))

	if p.Stats().BytesUp == 0 {
		t.Fatal("no byte went through the node's proxy: the client went around it")
	}
	stopAppending := make(chan struct{})
	appended := make(chan struct{})
	go func() {
		defer close(appended)
		if !busy {
			return
		}
		for {
			select {
			case <-stopAppending:
				return
			case <-time.After(5 * time.Millisecond):
				appendEvents(t, st, 5)
			}
		}
	}()
	if busy {
		time.Sleep(500 * time.Millisecond) // the publisher is in full swing
	}
	p.Cut()
	appendEvents(t, st, 30)
	// What was already on its way when the cut began may still land.
	time.Sleep(time.Second)
	frozenPub, frozenHandled := lastPublished(t, direct, topic), handled.Load()
	time.Sleep(cut - time.Second)
	close(stopAppending)
	<-appended
	if got := lastPublished(t, direct, topic); got != frozenPub {
		t.Fatalf("under a cut the publisher went on: %d published, then %d", frozenPub, got)
	}
	if got := handled.Load(); got != frozenHandled {
		t.Fatalf("under a cut the consumer went on: %d handled, then %d", frozenHandled, got)
	}
	head, err := st.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if frozenPub >= head {
		t.Fatalf("nothing left to publish after the cut (%d of %d)", frozenPub, head)
	}
	p.Heal()
	healed := time.Now()
	waitPublished(t, direct, topic, frozenPub+1)
	resumed := time.Since(healed)
	waitPublished(t, direct, topic, head)
	t.Logf("publisher resumed %v after the heal, caught up after %v (%d of %d events were published when the cut began)",
		resumed.Round(time.Millisecond), time.Since(healed).Round(time.Millisecond), frozenPub, head)
	if at, err := pub.LastError(); err != nil && at.After(healed.Add(-cut)) {
		t.Logf("the publisher's session failed and resumed: %v", err)
	}
	waitFor(t, "the consumer to resume", func() bool { return handled.Load() >= int64(head) })
	t.Logf("consumer resumed %v after the heal", time.Since(healed).Round(time.Millisecond))

	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	recs, err := kafkabus.ReadTopic(rctx, kafkabus.Config{Brokers: []string{direct}}, topic)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]int{}
	for _, r := range recs {
		seen[r.Event.Position]++
	}
	for pos := uint64(1); pos <= head; pos++ {
		if seen[pos] != 1 {
			t.Errorf("position %d is in the topic %d times", pos, seen[pos])
		}
	}
	if uint64(len(recs)) != head {
		t.Errorf("%d records in the topic, want %d", len(recs), head)
	}
	if h := handled.Load(); h != int64(head) {
		t.Errorf("consumer handled %d events, want %d", h, head)
	}
}

// Why the node listeners: a proxy in front of the broker's ordinary
// listener cuts nothing, since the client learns the broker's own address
// from the metadata and connects to it directly.
func TestKafkaProxyOnBootstrapIsGoneAround(t *testing.T) {
	direct := testenv.Kafka(t)[0]
	p, err := Listen(direct)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	topic := fmt.Sprintf("faultnet-around-%d", time.Now().UnixNano())
	ctx, cancel := context.WithCancel(context.Background())
	pub := kafkabus.NewPublisher(st, kafkabus.PublisherConfig{
		Config: kafkabus.Config{Brokers: []string{p.Addr()}}, Topic: topic, TransactionalID: topic, Partitions: 1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	done := make(chan error, 1)
	go func() { done <- pub.Run(ctx) }()
	defer func() { cancel(); <-done }()
	appendEvents(t, st, 5)
	waitPublished(t, direct, topic, 5)
	p.Cut()
	appendEvents(t, st, 5)
	waitPublished(t, direct, topic, 10)
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 60 s for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestKafkaNodeListenerValues(t *testing.T) {
	env, proxies, err := KafkaNodes("w1", "R_2")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, p := range proxies {
			p.Close()
		}
	}()
	entries := strings.Fields(env)
	if len(entries) != 2 || !strings.HasPrefix(entries[0], "W1:") || !strings.HasPrefix(entries[1], "R_2:") {
		t.Fatalf("listeners %q", env)
	}
	for _, e := range entries {
		f := strings.SplitN(e, ":", 3)
		if p := proxies[f[0]]; p == nil || f[2] != p.Addr() || p.Upstream() != "127.0.0.1:"+f[1] {
			t.Fatalf("entry %q does not match its proxy", e)
		}
	}
	for _, bad := range [][]string{{"PLAINTEXT"}, {"a", "A"}, {"no-dash"}, {"1x"}} {
		if _, _, err := KafkaNodes(bad...); err == nil {
			t.Fatalf("names %q accepted", bad)
		}
	}
	for _, bad := range []string{"", "W1:1:h", "W1:x:127.0.0.1:1", "W1:1:127.0.0.1:0 W1:2:127.0.0.1:0"} {
		if ps, err := KafkaNodeProxies(bad); err == nil {
			for _, p := range ps {
				p.Close()
			}
			t.Fatalf("listeners %q accepted", bad)
		}
	}
}
