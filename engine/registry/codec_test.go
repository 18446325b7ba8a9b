package registry

import (
	"context"
	"errors"
	"testing"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/eventstore"
)

var _ aggregate.EventCodec[any] = (*AvroCodec[any])(nil)

// Deposited, as version 1 of the code writes it.
type depositedV1 struct {
	Amount int32  `avro:"amount"`
	Memo   string `avro:"memo"`
}

const depositedV1Schema = `{"type":"record","name":"Deposited","namespace":"bank","fields":[
	{"name":"amount","type":"int"},{"name":"memo","type":"string"}]}`

// Deposited in version 2: amount renamed to cents (by alias) and promoted
// to long, a currency added with a default. Compatible backward, so no
// upcaster.
type depositedV2 struct {
	Cents    int64  `avro:"cents"`
	Memo     string `avro:"memo"`
	Currency string `avro:"currency"`
}

const depositedV2Schema = `{"type":"record","name":"Deposited","namespace":"bank","fields":[
	{"name":"cents","type":"long","aliases":["amount"]},{"name":"memo","type":"string"},
	{"name":"currency","type":"string","default":"EUR"}]}`

// A JSON event from before the switch to Avro.
type depositedJSON struct {
	Amount int64 `json:"amount"`
}

func bankDefinition(codec aggregate.EventCodec[any]) aggregate.Definition[int64, int64, any] {
	return aggregate.Definition[int64, int64, any]{
		Kind:    "bank",
		Initial: func(string) int64 { return 0 },
		Decide: func(_ int64, n int64) ([]any, error) {
			return []any{depositedV1{Amount: int32(n), Memo: "m"}}, nil
		},
		Evolve: func(total int64, ev any) int64 {
			switch e := ev.(type) {
			case depositedV1:
				return total + int64(e.Amount)
			case depositedV2:
				return total + e.Cents
			case depositedJSON:
				return total + e.Amount
			}
			panic("unexpected event")
		},
		Events: codec,
	}
}

// TestAvroCodecThroughTheWriteModel: events written in Avro by version 1
// of an aggregate are read by version 2 — a different Go type and schema —
// through schema resolution; JSON events from before go to the fallback;
// an incompatible schema is refused at registration.
func TestAvroCodecThroughTheWriteModel(t *testing.T) {
	ctx := context.Background()
	store := openPebble(t, t.TempDir())
	defer store.Close()
	reg := openRegistry(t, store)

	// Before Avro: a JSON event.
	if _, err := store.Append(ctx, "bank-a", eventstore.NoStream, []eventstore.NewEvent{{Type: "bank.Deposited", Version: 1, Data: []byte(`{"amount":1000}`)}}); err != nil {
		t.Fatal(err)
	}
	v1 := NewAvroCodec[any](reg)
	v1.Fallback = aggregate.NewJSONCodec[any]().Register("bank.Deposited", 1, depositedJSON{})
	if err := v1.Register(ctx, "bank.Deposited", depositedV1{}, depositedV1Schema); err != nil {
		t.Fatal(err)
	}
	rt, err := aggregate.New(store, bankDefinition(v1), aggregate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{5, 7} {
		if _, err := rt.Execute(ctx, "a", n); err != nil {
			t.Fatal(err)
		}
	}
	if total, _, err := rt.State(ctx, "a"); err != nil || total != 1012 {
		t.Fatalf("v1 state %d, %v", total, err)
	}
	rt.Close()

	evs, err := store.ReadStream(ctx, "bank-a", 2, 10)
	if err != nil || len(evs) != 2 {
		t.Fatal(len(evs), err)
	}
	id, payload, err := SplitWire(evs[0].Data)
	if err != nil || id != 1 || evs[0].Version != 1 || len(payload) != 3 { // zigzag 5, length 1, "m"
		t.Fatalf("stored % x: id %d version %d %v", evs[0].Data, id, evs[0].Version, err)
	}

	// Version 2 of the code: a new runtime replays everything.
	v2 := NewAvroCodec[any](reg)
	v2.Fallback = aggregate.NewJSONCodec[any]().Register("bank.Deposited", 1, depositedJSON{})
	if err := v2.Register(ctx, "bank.Deposited", depositedV2{}, depositedV2Schema); err != nil {
		t.Fatal(err)
	}
	ev, err := v2.Decode(evs[1].Type, evs[1].Version, evs[1].Data)
	if err != nil || ev != (depositedV2{Cents: 7, Memo: "m", Currency: "EUR"}) {
		t.Fatalf("v1 event read as v2: %+v, %v", ev, err)
	}
	rt2, err := aggregate.New(store, bankDefinition(v2), aggregate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	if total, _, err := rt2.State(ctx, "a"); err != nil || total != 1012 {
		t.Fatalf("v2 replay %d, %v", total, err)
	}

	// An incompatible change is refused when the codec registers it.
	v3 := NewAvroCodec[any](reg)
	err = v3.Register(ctx, "bank.Deposited", depositedV2{}, `{"type":"record","name":"Deposited","namespace":"bank","fields":[{"name":"cents","type":"string"}]}`)
	var re *Error
	if !errors.As(err, &re) || re.Code != codeIncompatible {
		t.Fatalf("incompatible schema registered: %v", err)
	}
	// Without a fallback, data not in the wire format is an error.
	if _, err := NewAvroCodec[any](reg).Decode("bank.Deposited", 1, []byte(`{}`)); !errors.Is(err, ErrNotWireFormat) {
		t.Fatalf("JSON without fallback: %v", err)
	}
}
