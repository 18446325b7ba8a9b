package pebblestore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
)

// Open a store, append an event to a new stream, and read it back through
// a subscription. This is the example README.md shows.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "logbook-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	// NoStream: the append fails with a conflict if order-42 has events.
	body := []byte(`{"order":42,"total":"19.90"}`)
	res, err := store.Append(ctx, "order-42", eventstore.NoStream, []eventstore.NewEvent{
		{Type: "OrderPlaced", Data: body, Tags: []string{"orders"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("appended %s seq %d at position %d\n", res.Stream, res.FirstSeq, res.FirstPosition)

	sub, err := store.Subscribe(ctx, eventstore.Tagged("orders"), 1) // catch up from position 1, then live
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	events, err := sub.Next(ctx) // blocks until there is at least one event
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range events {
		fmt.Printf("%d %s #%d %s %s\n", ev.Position, ev.Stream, ev.Seq, ev.Type, ev.Data)
	}
	// Output:
	// appended order-42 seq 1 at position 1
	// 1 order-42 #1 OrderPlaced {"order":42,"total":"19.90"}
}

// A subscription delivers events appended after it started as they commit,
// in log order, without gaps or duplicates.
func ExampleStore_Subscribe() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "logbook-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	// Follow one stream from its first event (for a stream filter, from
	// is a sequence number in the stream).
	sub, err := store.Subscribe(ctx, eventstore.OfStream("cart-7"), 1)
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()

	go func() {
		for _, item := range []string{"apple", "pear", "plum"} {
			_, err := store.Append(ctx, "cart-7", eventstore.Any, []eventstore.NewEvent{
				{Type: "ItemAdded", Data: []byte(item)},
			})
			if err != nil {
				log.Print(err)
				return
			}
		}
	}()

	for seen := 0; seen < 3; {
		events, err := sub.Next(ctx) // a batch of whatever has committed
		if err != nil {
			log.Fatal(err)
		}
		for _, ev := range events {
			fmt.Printf("#%d %s %s\n", ev.Seq, ev.Type, ev.Data)
			seen++
		}
	}
	fmt.Println("next seq:", sub.Cursor())
	// Output:
	// #1 ItemAdded apple
	// #2 ItemAdded pear
	// #3 ItemAdded plum
	// next seq: 4
}
