package registry

import (
	"context"
	"testing"

	"github.com/logbook/logbook/engine/aggregate"
)

// BenchmarkEventCodecs compares the Avro codec with the JSON codec on one
// small event, encode and decode, as the write model uses them.
func BenchmarkEventCodecs(b *testing.B) {
	store := openPebble(b, b.TempDir())
	defer store.Close()
	reg := openRegistry(b, store)
	avroCodec := NewAvroCodec[any](reg)
	if err := avroCodec.Register(context.Background(), "bank.Deposited", depositedV2{}, depositedV2Schema); err != nil {
		b.Fatal(err)
	}
	codecs := map[string]aggregate.EventCodec[any]{
		"json": aggregate.NewJSONCodec[any]().Register("bank.Deposited", 1, depositedV2{}),
		"avro": avroCodec,
	}
	ev := depositedV2{Cents: 12345, Memo: "rent", Currency: "EUR"}
	for _, name := range []string{"json", "avro"} {
		c := codecs[name]
		b.Run(name+"/encode", func(b *testing.B) {
			for b.Loop() {
				if _, _, _, err := c.Encode(ev); err != nil {
					b.Fatal(err)
				}
			}
		})
		typ, v, data, _ := c.Encode(ev)
		b.Run(name+"/decode", func(b *testing.B) {
			for b.Loop() {
				if _, err := c.Decode(typ, v, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
