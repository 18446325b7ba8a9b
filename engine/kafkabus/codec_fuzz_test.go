package kafkabus

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

// FuzzDecodeValue feeds the record-value decoder arbitrary bytes, as a
// topic that another writer shares, or a corrupt segment, could. It must
// not panic or allocate beyond the value's size; what it accepts must
// encode again to a value that decodes to the same event, and the event
// must not share memory with the record.
func FuzzDecodeValue(f *testing.F) {
	for _, ev := range []eventstore.Event{
		{Stream: "s", Seq: 1, Position: 1, ID: eventstore.NewID(), Type: "t", Data: []byte{}, Time: time.Unix(0, 1_700_000_000_123_456_789).UTC()},
		{Stream: "x", Seq: 1 << 40, Position: 1<<63 + 5, Type: "leg.added", Version: -3,
			Tags: []string{"a", "", "c"}, Meta: map[string]string{"k": "v", "": "empty key"},
			Data: []byte{0, 1, 2, 0xff, 0, '\n'}, Time: time.Unix(1, 0).UTC()},
	} {
		f.Add(encodeValue(ev))
	}
	f.Add([]byte{})
	f.Add([]byte{2, 1, 1})
	f.Add([]byte{formatV1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, v []byte) {
		ev, err := decodeValue(v)
		if err != nil {
			return
		}
		ev.Stream = "s"
		data := append([]byte(nil), ev.Data...)
		for i := range v {
			v[i] ^= 0xff // the record's buffers are reused by the client
		}
		if !bytes.Equal(ev.Data, data) {
			t.Fatal("the event's data shares the record's memory")
		}
		again, err := decodeValue(encodeValue(ev))
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		again.Stream = "s"
		if !reflect.DeepEqual(again, ev) {
			t.Fatalf("round trip\n got %+v\nwant %+v", again, ev)
		}
	})
}
