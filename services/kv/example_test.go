package kv_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/pebblekv"
)

type cart struct {
	Items []string `json:"items"`
}

// A repository of whole aggregates on the embedded backend: add a value,
// update it with compare-and-set on its version, lose a race with a stale
// version, and delete a key with everything under it.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "logbook-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	backend, err := pebblekv.Open(dir, pebblekv.Options{})
	if err != nil {
		log.Fatal(err)
	}
	repo := kv.New(backend, kv.Limits{}) // zero Limits: kv.DefaultLimits
	defer repo.Close()
	carts := kv.Typed[cart]{R: repo, Codec: kv.JSON[cart]{}}

	if err := carts.Add(ctx, "user/7/cart", cart{Items: []string{"tea"}}); err != nil {
		log.Fatal(err)
	}
	if err := carts.Add(ctx, "user/7/cart", cart{}); errors.Is(err, kv.ErrExists) {
		fmt.Println("add again:", err)
	}

	c, _, err := carts.Get(ctx, "user/7/cart")
	if err != nil {
		log.Fatal(err)
	}
	c.Value.Items = append(c.Value.Items, "milk")
	v, err := carts.Update(ctx, "user/7/cart", c.Version, c.Value) // only if still at c.Version
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("updated to version", v)

	// A writer still holding version 1 loses: the error says what won.
	var stale *kv.StaleError
	if _, err := carts.Update(ctx, "user/7/cart", 1, cart{}); errors.As(err, &stale) {
		fmt.Printf("stale: expected %d, current %d\n", stale.Expected, stale.Current)
	}

	got, _, err := carts.Get(ctx, "user/7/cart")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(got.Version, got.Value.Items)

	// Ids are paths: deleting user/7 deletes user/7/cart too.
	if err := repo.Add(ctx, "user/7", []byte("{}")); err != nil {
		log.Fatal(err)
	}
	if err := repo.Delete(ctx, "user/7", 1); err != nil {
		log.Fatal(err)
	}
	ok, err := repo.Exist(ctx, "user/7/cart")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("cart exists after deleting user/7:", ok)
	// Output:
	// add again: kv: key exists: "user/7/cart"
	// updated to version 2
	// stale: expected 1, current 2
	// 2 [tea milk]
	// cart exists after deleting user/7: false
}
