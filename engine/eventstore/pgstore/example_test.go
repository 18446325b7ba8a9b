package pgstore_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pgstore"
)

// Two processes share one log through PostgreSQL: each opens a Store on
// the same database, one appends, the other follows. (Here both are in one
// process, which changes nothing.) The example needs a server, so it is
// not run by go test; TestExample runs the same code when
// LOGBOOK_TEST_POSTGRES names one.
func Example() {
	// The URL's search_path, if given, is the schema that holds the
	// store's tables (default "logbook"); Open creates them if missing.
	url := "postgres://logbook@localhost:5432/logbook?search_path=orders"
	if err := shareLog(context.Background(), url, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func shareLog(ctx context.Context, url string, w io.Writer) error {
	writer, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		return err
	}
	defer writer.Close()
	reader, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		return err
	}
	defer reader.Close()

	// The reader follows the stream from its first event; it is told of
	// new events by LISTEN/NOTIFY.
	sub, err := reader.Subscribe(ctx, eventstore.OfStream("order-42"), 1)
	if err != nil {
		return err
	}
	defer sub.Close()

	// NoStream, then an exact version: optimistic concurrency across
	// processes, checked by the database.
	res, err := writer.Append(ctx, "order-42", eventstore.NoStream, []eventstore.NewEvent{
		{Type: "OrderPlaced", Data: []byte(`{"total":"19.90"}`), Tags: []string{"orders"}},
	})
	if err != nil {
		return err
	}
	if _, err := writer.Append(ctx, "order-42", eventstore.Exactly(res.LastSeq), []eventstore.NewEvent{
		{Type: "OrderPaid", Data: []byte(`{"via":"card"}`), Tags: []string{"orders"}},
	}); err != nil {
		return err
	}
	_, err = writer.Append(ctx, "order-42", eventstore.Exactly(res.LastSeq), []eventstore.NewEvent{{Type: "OrderCancelled"}})
	fmt.Fprintln(w, "append at a stale version:", err)

	for seen := 0; seen < 2; {
		events, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		for _, ev := range events {
			fmt.Fprintf(w, "%s #%d %s %s\n", ev.Stream, ev.Seq, ev.Type, ev.Data)
			seen++
		}
	}
	return nil
}
