package kafkabus_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/kafkabus"
)

// A primary publishes its log to a Kafka topic, and a read replica follows
// the log from the topic. The example needs a broker, so it is not run by
// go test; TestExample runs the same code when LOGBOOK_TEST_KAFKA names
// one.
func Example() {
	dir, err := os.MkdirTemp("", "logbook-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// The form of logbook's --bus flag: brokers, then the topic.
	if err := publishAndFollow(context.Background(), "kafka://localhost:9092/orders", dir, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func publishAndFollow(ctx context.Context, busURL, dir string, w io.Writer) error {
	cfg, topic, err := kafkabus.ParseURL(busURL)
	if err != nil {
		return err
	}
	store, err := pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		return err
	}
	defer store.Close()

	// The publisher copies every committed event to the topic, exactly
	// once, in transactions; it creates the topic if it is missing. Every
	// node that may publish this topic uses the same transactional id.
	pub := kafkabus.NewPublisher(store, kafkabus.PublisherConfig{
		Config: cfg, Topic: topic, TransactionalID: topic + "-publisher", Partitions: 3,
	})
	pubCtx, stopPub := context.WithCancel(ctx)
	pubDone := make(chan error, 1)
	go func() { pubDone <- pub.Run(pubCtx) }()
	defer func() { stopPub(); <-pubDone }()

	var last uint64
	for i, stream := range []string{"order-1", "order-2", "order-1"} {
		res, err := store.Append(ctx, stream, eventstore.Any, []eventstore.NewEvent{
			{Type: "OrderChanged", Data: fmt.Appendf(nil, `{"step":%d}`, i+1)},
		})
		if err != nil {
			return err
		}
		last = res.LastPosition
	}
	for pub.LastPosition() < last { // until Kafka holds the whole log
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	fmt.Fprintf(w, "published up to position %d\n", pub.LastPosition())

	// A replica reads the live log from the topic, every partition merged
	// back into log order, and anything Kafka no longer holds from its
	// fallback: the primary's store (here the same one; in a replica
	// process, PostgreSQL or an HTTP-following store).
	replica := kafkabus.NewReplicaStore(cfg, topic, store)
	sub, err := replica.Subscribe(ctx, eventstore.All(), 1)
	if err != nil {
		return err
	}
	defer sub.Close()
	for seen := uint64(0); seen < last; {
		events, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		for _, ev := range events {
			fmt.Fprintf(w, "%d %s #%d %s\n", ev.Position, ev.Stream, ev.Seq, ev.Data)
			seen++
		}
	}
	return nil
}
