package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/projection"
)

// A library lends books. A book is an aggregate: its state says who has
// it, and the rule is that a book out on loan cannot be lent again.
type book struct{ Borrower string }

type command interface{ isCommand() }
type lend struct{ Member string }
type giveBack struct{}

func (lend) isCommand()     {}
func (giveBack) isCommand() {}

type event interface{ isEvent() }
type lent struct {
	Member string `json:"member"`
}
type returned struct {
	Member string `json:"member"`
}

func (lent) isEvent()     {}
func (returned) isEvent() {}

var errOnLoan = errors.New("book is on loan")

func decide(b book, cmd command) ([]event, error) {
	switch c := cmd.(type) {
	case lend:
		if b.Borrower != "" {
			return nil, errOnLoan
		}
		return []event{lent{Member: c.Member}}, nil
	case giveBack:
		if b.Borrower == "" {
			return nil, nil // nothing to do: no event
		}
		return []event{returned{Member: b.Borrower}}, nil
	}
	return nil, fmt.Errorf("unknown command %T", cmd)
}

func evolve(b book, ev event) book {
	switch e := ev.(type) {
	case lent:
		b.Borrower = e.Member
	case returned:
		b.Borrower = ""
	}
	return b
}

// loans is the read model: the books each member has, by book id.
type loans map[string]map[string]bool

// The path of a command through the engine: the aggregate runtime decides
// it and appends its events; a projection runner applies them to a view;
// the command's Result.Position tells the caller when the view has caught
// up with it (Runner.WaitFor), so that the query that follows sees the
// command's effect — reading one's own writes on an eventually consistent
// read model.
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

	// The write side: an aggregate kind, its events' codec, a runtime.
	codec := aggregate.NewJSONCodec[event]().
		Register("BookLent", 1, lent{}).
		Register("BookReturned", 1, returned{})
	books, err := aggregate.New(store, aggregate.Definition[book, command, event]{
		Kind:    "book", // streams book-<id>, events tagged "book"
		Initial: func(string) book { return book{} },
		Decide:  decide,
		Evolve:  evolve,
		Events:  codec,
	}, aggregate.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer books.Close()

	// The read side: a view in memory, built from the events tagged
	// "book", decoded with the same codec.
	view := projection.NewMemory(loans{}, func(l *loans, ev eventstore.Event) error {
		e, err := codec.Decode(ev.Type, ev.Version, ev.Data)
		if err != nil {
			return err
		}
		id := strings.TrimPrefix(ev.Stream, "book-")
		switch e := e.(type) {
		case lent:
			if (*l)[e.Member] == nil {
				(*l)[e.Member] = map[string]bool{}
			}
			(*l)[e.Member][id] = true
		case returned:
			delete((*l)[e.Member], id)
		}
		return nil
	})
	runner := projection.NewRunner(store, view, projection.Options{Name: "loans", Filter: eventstore.Tagged("book")})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runner.Run(runCtx) }()

	// Commands. A domain error comes back as is, and nothing is written.
	var last aggregate.Result[event]
	for _, c := range []struct {
		book string
		cmd  command
	}{
		{"dune", lend{Member: "ada"}},
		{"emma", lend{Member: "ada"}},
		{"dune", lend{Member: "bob"}}, // refused: ada has it
		{"dune", giveBack{}},
		{"dune", lend{Member: "bob"}},
	} {
		res, err := books.Execute(ctx, c.book, c.cmd)
		if errors.Is(err, errOnLoan) {
			fmt.Printf("%s %T: %v\n", c.book, c.cmd, err)
			continue
		} else if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %T: version %d, position %d\n", c.book, c.cmd, res.Version, res.Position)
		last = res
	}

	// Read your writes: wait until the view has applied the last
	// command's events, then query it.
	if err := runner.WaitFor(ctx, last.Position); err != nil {
		log.Fatal(err)
	}
	view.Read(func(l *loans, pos uint64) {
		for _, member := range []string{"ada", "bob"} {
			var ids []string
			for id := range (*l)[member] {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			fmt.Printf("at position %d %s has %v\n", pos, member, ids)
		}
	})

	stop() // stop the runner before closing the runtime and the store
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// dune engine_test.lend: version 1, position 1
	// emma engine_test.lend: version 1, position 2
	// dune engine_test.lend: book is on loan
	// dune engine_test.giveBack: version 2, position 3
	// dune engine_test.lend: version 3, position 4
	// at position 4 ada has [emma]
	// at position 4 bob has [dune]
}
