package kafkabus_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logbook/logbook/internal/testenv"
)

// TestExample runs Example's code against the test broker, on a topic of
// its own, and checks what it prints.
func TestExample(t *testing.T) {
	brokers := testenv.Kafka(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	topic := "example-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
		if err != nil {
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteTopic(ctx, topic)
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out strings.Builder
	if err := publishAndFollow(ctx, "kafka://"+strings.Join(brokers, ",")+"/"+topic, t.TempDir(), &out); err != nil {
		t.Fatal(err)
	}
	want := `published up to position 3
1 order-1 #1 {"step":1}
2 order-2 #1 {"step":2}
3 order-1 #2 {"step":3}
`
	if out.String() != want {
		t.Errorf("Example printed\n%s\nwant\n%s", out.String(), want)
	}
}
