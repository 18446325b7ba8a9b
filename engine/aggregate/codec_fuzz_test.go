package aggregate

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecodeEnvelope feeds the snapshot-envelope decoder arbitrary bytes,
// as a damaged or foreign snapshot could hold. It must not panic or
// allocate beyond the input's size; what it accepts must encode again to
// an envelope with the same keys and state.
func FuzzDecodeEnvelope(f *testing.F) {
	var k keyRing
	k.put("key-1", keyResult{first: 1, last: 3, pos: 17, fingerprint: "f1"}, 8)
	k.put("key-2", keyResult{first: 4, last: 4, pos: 20}, 8)
	f.Add(encodeEnvelope(k, []byte(`{"balance":3}`)))
	f.Add(encodeEnvelope(keyRing{}, nil))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{2, 1, 'a', 1, 1, 1, 1, 'a', 1, 1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, state, err := decodeEnvelope(b)
		if err != nil {
			return
		}
		if len(keys.order) != len(keys.byKey) {
			t.Fatalf("%d keys in order, %d by key", len(keys.order), len(keys.byKey))
		}
		keys2, state2, err := decodeEnvelope(encodeEnvelope(keys, state))
		if err != nil {
			t.Fatalf("re-encoded envelope does not decode: %v", err)
		}
		if len(keys.order) == 0 {
			keys, keys2 = keyRing{}, keyRing{} // nil and empty are alike
		}
		if !reflect.DeepEqual(keys2, keys) || string(state2) != string(state) {
			t.Fatalf("round trip\n got %+v %q\nwant %+v %q", keys2, state2, keys, state)
		}
	})
}

type fuzzOpened struct{ Owner string }
type fuzzDeposited struct {
	Cents    int64
	Currency string
}

// fuzzCodec is a codec with a chain of two upcasters: Deposited v1
// {"amount": units} became v2 {"Cents": …}, then v3 added a currency.
func fuzzCodec() *JSONCodec[any] {
	return NewJSONCodec[any]().
		Register("Opened", 1, fuzzOpened{}).
		Register("Deposited", 3, fuzzDeposited{}).
		Upcast("Deposited", 1, func(data []byte) ([]byte, error) {
			var v1 struct {
				Amount int64 `json:"amount"`
			}
			if err := json.Unmarshal(data, &v1); err != nil {
				return nil, err
			}
			return json.Marshal(map[string]int64{"Cents": v1.Amount * 100})
		}).
		Upcast("Deposited", 2, func(data []byte) ([]byte, error) {
			var v2 map[string]any
			if err := json.Unmarshal(data, &v2); err != nil {
				return nil, err
			}
			if v2 == nil {
				v2 = map[string]any{}
			}
			v2["Currency"] = "EUR"
			return json.Marshal(v2)
		})
}

// FuzzJSONCodec feeds JSONCodec.Decode stored events of any type, version
// and data, as a log written by another build could hold. It must not
// panic; an event it decodes must be of its registered type and survive
// encoding and decoding at the current version unchanged.
func FuzzJSONCodec(f *testing.F) {
	f.Add("Deposited", 1, []byte(`{"amount":12}`))
	f.Add("Deposited", 2, []byte(`{"Cents":1200}`))
	f.Add("Deposited", 3, []byte(`{"Cents":1200,"Currency":"CHF"}`))
	f.Add("Deposited", 4, []byte(`{}`))
	f.Add("Deposited", -1, []byte(`{}`))
	f.Add("Opened", 1, []byte(`{"Owner":"u"}`))
	f.Add("Opened", 1, []byte(`null`))
	f.Add("Unknown", 1, []byte(`{}`))
	c := fuzzCodec()
	f.Fuzz(func(t *testing.T, typ string, version int, data []byte) {
		ev, err := c.Decode(typ, version, data)
		if err != nil {
			return
		}
		want := map[string]reflect.Type{"Opened": reflect.TypeOf(fuzzOpened{}), "Deposited": reflect.TypeOf(fuzzDeposited{})}[typ]
		if reflect.TypeOf(ev) != want {
			t.Fatalf("%s decoded as %T", typ, ev)
		}
		typ2, v2, data2, err := c.Encode(ev)
		if err != nil || typ2 != typ {
			t.Fatalf("encode %+v: %q %v", ev, typ2, err)
		}
		again, err := c.Decode(typ2, v2, data2)
		if err != nil || !reflect.DeepEqual(again, ev) {
			t.Fatalf("round trip %+v: %+v %v", ev, again, err)
		}
	})
}
