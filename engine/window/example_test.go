package window_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/projection"
	"github.com/logbook/logbook/engine/window"
)

// Define an aggregation (payments per currency in one-minute windows, with
// the amount summed and the distinct payers counted), ingest the log into
// it with a projection runner, and ask a pull query: the windows of the
// first minute by currency, then the whole period rolled up.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "logbook-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := pebblestore.Open(filepath.Join(dir, "events"), pebblestore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	def := window.Definition{
		Name:     "payments",
		Window:   window.Tumbling(time.Minute),
		Grace:    30 * time.Second, // a window accepts events until 30 s after its end
		Dims:     []string{"currency"},
		Values:   []string{"amount"},
		Distinct: []string{"payer"},
	}
	// Fields by name from a JSON payload; the time is the payload's "at".
	def.Extract = window.ExtractJSON(def, "at", "PaymentMade")
	agg, err := window.Open(filepath.Join(dir, "payments"), def, window.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer agg.Close()

	// Ingest: the aggregation is a projection view.
	runner := projection.NewRunner(store, agg, projection.Options{Name: def.Name})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runner.Run(runCtx) }()

	var last uint64
	for _, p := range []string{
		`{"at":"2026-01-05T09:00:10Z","currency":"EUR","amount":12.5,"payer":"ada"}`,
		`{"at":"2026-01-05T09:00:40Z","currency":"EUR","amount":7.5,"payer":"bob"}`,
		`{"at":"2026-01-05T09:00:50Z","currency":"USD","amount":20,"payer":"ada"}`,
		`{"at":"2026-01-05T09:01:35Z","currency":"EUR","amount":5,"payer":"ada"}`,
	} {
		res, err := store.Append(ctx, "payments", eventstore.Any, []eventstore.NewEvent{{Type: "PaymentMade", Data: []byte(p)}})
		if err != nil {
			log.Fatal(err)
		}
		last = res.LastPosition
	}
	if err := runner.WaitFor(ctx, last); err != nil {
		log.Fatal(err)
	}

	// Pull queries over a time range, grouped by currency, then over
	// every currency in one ten-minute window. The first minute is closed:
	// the stream time (09:01:35, the latest event's) is past its end and
	// grace.
	from := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	res, err := agg.Query(ctx, window.Query{From: from, To: from.Add(time.Minute), GroupBy: []string{"currency"}})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res.Rows {
		fmt.Printf("%s–%s %s: %d payments, %.2f, %d payers, closed %v\n", r.Start.Format("15:04"), r.End.Format("15:04"),
			r.Dims["currency"], r.Count, r.Values["amount"].Sum, r.Distinct["payer"].Count, r.Closed)
	}
	res, err = agg.Query(ctx, window.Query{From: from, To: from.Add(10 * time.Minute), Unit: 10 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res.Rows {
		fmt.Printf("%s–%s all: %d payments, %d payers\n", r.Start.Format("15:04"), r.End.Format("15:04"), r.Count, r.Distinct["payer"].Count)
	}

	stop() // stop the runner before closing the aggregation
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// 09:00–09:01 EUR: 2 payments, 20.00, 2 payers, closed true
	// 09:00–09:01 USD: 1 payments, 20.00, 1 payers, closed true
	// 09:00–09:10 all: 4 payments, 2 payers
}
