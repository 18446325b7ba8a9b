package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/internal/testenv"
)

// kafkaBus names a fresh topic on the test broker.
func kafkaBus(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "kafka://" + strings.Join(testenv.Kafka(t), ",") + "/cluster-" + hex.EncodeToString(b)
}

// kafkaTLSBus names a fresh topic on the TLS test broker's SASL_SSL
// listener: TLS verified against the broker's CA, SCRAM-SHA-512 with the
// password in a file.
func kafkaTLSBus(t *testing.T) string {
	t.Helper()
	kb := testenv.KafkaTLS(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "kafka://" + kb.SASLSSL + "/cluster-tls-" + hex.EncodeToString(b) + "?" + url.Values{
		"tls_ca": {kb.CA}, "sasl": {kafkabus.ScramSHA512}, "sasl_user": {kb.User}, "sasl_password_file": {kb.PasswordFile}}.Encode()
}

// checkBus checks that the topic holds every event of the log exactly
// once, each stream in one partition in order, and each event as stored.
func checkBus(ctx context.Context, t *testing.T, bus string, log []eventstore.Event) {
	t.Helper()
	b, topic, err := kafkabus.ParseURL(bus)
	if err != nil {
		t.Fatal(err)
	}
	// The publisher may still be a transaction behind the store.
	for {
		last, err := kafkabus.LastPublished(ctx, b, topic)
		if err != nil {
			t.Fatal(err)
		}
		if last >= uint64(len(log)) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	recs, err := kafkabus.ReadTopic(ctx, b, topic)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[uint64]int)
	partitionOf := make(map[string]int32)
	last := make(map[int32]uint64)
	for _, r := range recs {
		ev, p := r.Event, r.Partition
		seen[ev.Position]++
		if ev.Position <= last[p] {
			t.Fatalf("partition %d: position %d after %d", p, ev.Position, last[p])
		}
		last[p] = ev.Position
		if q, ok := partitionOf[ev.Stream]; ok && q != p {
			t.Fatalf("stream %s in partitions %d and %d", ev.Stream, q, p)
		}
		partitionOf[ev.Stream] = p
		if ev.Position == 0 || ev.Position > uint64(len(log)) {
			t.Fatalf("partition %d holds position %d, beyond the log's %d", p, ev.Position, len(log))
		}
		want := log[ev.Position-1]
		if ev.ID != want.ID || ev.Stream != want.Stream || ev.Seq != want.Seq || string(ev.Data) != string(want.Data) {
			t.Fatalf("position %d: Kafka has %s/%d %s, the store %s/%d %s", ev.Position, ev.Stream, ev.Seq, ev.ID, want.Stream, want.Seq, want.ID)
		}
	}
	for pos := uint64(1); pos <= uint64(len(log)); pos++ {
		if seen[pos] != 1 {
			t.Fatalf("position %d is in the topic %d times", pos, seen[pos])
		}
	}
	t.Logf("the topic holds the %d events of the log exactly once, in %d partitions", len(recs), len(last))
}
