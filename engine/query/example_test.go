package query_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/query"
)

// Stream queries over a store: the streams it holds, and the events
// carrying a tag. A current query ends at the head of the log as it stood
// when the query began; its live twin (StreamIDs, EventsByTag, …)
// goes on with new events. The reader throttles every backend read the
// queries make.
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
	for _, a := range []struct{ stream, typ, tag string }{
		{"order-1", "OrderPlaced", "orders"},
		{"invoice-9", "InvoiceSent", "billing"},
		{"order-2", "OrderPlaced", "orders"},
		{"order-1", "OrderShipped", "orders"},
	} {
		ev := eventstore.NewEvent{Type: a.typ, Tags: []string{a.tag}}
		if _, err := store.Append(ctx, a.stream, eventstore.Any, []eventstore.NewEvent{ev}); err != nil {
			log.Fatal(err)
		}
	}

	reader, err := query.New(store, query.Options{MaxBufferSize: 100, MaxConcurrentQueries: 8})
	if err != nil {
		log.Fatal(err)
	}
	defer reader.Close()

	for id, err := range reader.CurrentStreamIDs().All(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("stream", id)
	}
	for ev, err := range reader.CurrentEventsByTag("orders", 0).All(ctx) { // from 0: the beginning
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.Position, ev.Stream, ev.Type)
	}
	// Output:
	// stream invoice-9
	// stream order-1
	// stream order-2
	// 1 order-1 OrderPlaced
	// 3 order-2 OrderPlaced
	// 4 order-1 OrderShipped
}
