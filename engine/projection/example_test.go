package projection_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/projection"
)

// A read model kept up to date from the log: the total spent by each
// customer, in memory. The runner catches the view up from its checkpoint
// and then follows new events; WaitFor lets a caller read its own write.
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

	type order struct {
		Customer string `json:"customer"`
		Cents    int    `json:"cents"`
	}
	place := func(stream string, o order) eventstore.AppendResult {
		data, _ := json.Marshal(o)
		res, err := store.Append(ctx, stream, eventstore.NoStream, []eventstore.NewEvent{
			{Type: "OrderPlaced", Data: data, Tags: []string{"orders"}},
		})
		if err != nil {
			log.Fatal(err)
		}
		return res
	}
	place("order-1", order{Customer: "ada", Cents: 1250})

	// The view: state, and how one event changes it.
	totals := projection.NewMemory(map[string]int{}, func(state *map[string]int, ev eventstore.Event) error {
		var o order
		if err := json.Unmarshal(ev.Data, &o); err != nil {
			return err
		}
		(*state)[o.Customer] += o.Cents
		return nil
	})
	runner := projection.NewRunner(store, totals, projection.Options{Name: "totals", Filter: eventstore.Tagged("orders")})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runner.Run(runCtx) }()

	place("order-2", order{Customer: "bob", Cents: 800})
	last := place("order-3", order{Customer: "ada", Cents: 300})
	if err := runner.WaitFor(ctx, last.LastPosition); err != nil { // read your writes
		log.Fatal(err)
	}
	totals.Read(func(state *map[string]int, pos uint64) {
		fmt.Printf("at position %d: ada %d, bob %d\n", pos, (*state)["ada"], (*state)["bob"])
	})

	stop() // stop the runner before closing the store
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// at position 3: ada 1550, bob 800
}
