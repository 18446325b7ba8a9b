package aggregate_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
)

// The domain of a wallet: state, commands, events, and a rule.
type wallet struct {
	Balance int `json:"balance"`
}

type command interface{ isCommand() }
type topUp struct{ Amount int }
type spend struct{ Amount int }

func (topUp) isCommand() {}
func (spend) isCommand() {}

type event interface{ isEvent() }
type toppedUp struct {
	Amount int `json:"amount"`
}
type spent struct {
	Amount int `json:"amount"`
}

func (toppedUp) isEvent() {}
func (spent) isEvent()    {}

var errNotEnough = errors.New("not enough money")

// decideWallet checks a command against the state and says what happened. It
// changes nothing: the runtime appends the events and then evolves.
func decideWallet(a wallet, cmd command) ([]event, error) {
	switch c := cmd.(type) {
	case topUp:
		return []event{toppedUp{Amount: c.Amount}}, nil
	case spend:
		if c.Amount > a.Balance {
			return nil, errNotEnough
		}
		return []event{spent{Amount: c.Amount}}, nil
	}
	return nil, fmt.Errorf("unknown command %T", cmd)
}

// evolveWallet applies one event to the state. loading a wallet replays its
// events through it.
func evolveWallet(a wallet, ev event) wallet {
	switch e := ev.(type) {
	case toppedUp:
		a.Balance += e.Amount
	case spent:
		a.Balance -= e.Amount
	}
	return a
}

// An event-sourced aggregate: the domain gives decideWallet and evolveWallet and a
// codec for its events; the runtime loads the aggregate, decides, appends
// with optimistic concurrency, and keeps the state cached.
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

	wallets, err := aggregate.New(store, aggregate.Definition[wallet, command, event]{
		Kind:    "wallet", // streams are named wallet-<id>
		Initial: func(id string) wallet { return wallet{} },
		Decide:  decideWallet,
		Evolve:  evolveWallet,
		Events: aggregate.NewJSONCodec[event]().
			Register("ToppedUp", 1, toppedUp{}).
			Register("Spent", 1, spent{}),
	}, aggregate.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer wallets.Close()

	res, err := wallets.Execute(ctx, "alice", topUp{Amount: 100})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %T, version %d\n", wallets.Stream(res.ID), res.Events[0], res.Version)

	if _, err := wallets.Execute(ctx, "alice", spend{Amount: 150}); errors.Is(err, errNotEnough) {
		fmt.Println("spend 150:", err) // a domain error comes back as is; nothing is written
	}
	if _, err := wallets.Execute(ctx, "alice", spend{Amount: 30}); err != nil {
		log.Fatal(err)
	}

	state, version, err := wallets.State(ctx, "alice")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("balance %d at version %d\n", state.Balance, version)
	// Output:
	// wallet-alice: aggregate_test.toppedUp, version 1
	// spend 150: not enough money
	// balance 70 at version 2
}
