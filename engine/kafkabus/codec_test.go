package kafkabus

import (
	"reflect"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
)

// Runs without a broker: both value encodings — logbook's and Avro in the
// registry's wire format — round-trip every field, the payload byte for
// byte, and refuse what they did not write.
func TestCodecRoundTrip(t *testing.T) {
	events := []eventstore.Event{
		{Stream: "s", Seq: 1, Position: 1, ID: eventstore.NewID(), Type: "t", Data: []byte{}, Time: time.Unix(0, 1_700_000_000_123_456_789).UTC()},
		{Stream: "flight/LH-400 ü", Seq: 1 << 40, Position: 1<<63 + 5, ID: eventstore.NewID(), Type: "leg.added", Version: -3,
			Tags: []string{"a", "", "c"}, Meta: map[string]string{"k": "v", "": "empty key"},
			Data: []byte{0, 1, 2, 0xff, 0, '\n'}, Time: time.Unix(1, 0).UTC()},
	}
	for _, id := range []int{0, 7} {
		for _, ev := range events {
			roundTrip(t, ev, id)
		}
	}
}

func roundTrip(t *testing.T, ev eventstore.Event, id int) {
	t.Helper()
	rec, err := encodeRecord("topic", ev, id)
	if err != nil {
		t.Fatal(err)
	}
	if id != 0 && (rec.Value[0] != 0 || rec.Value[4] != byte(id)) {
		t.Errorf("not in the wire format: % x", rec.Value[:5])
	}
	if !rec.Timestamp.Equal(ev.Time) || string(rec.Key) != ev.Stream {
		t.Errorf("record key %q time %v", rec.Key, rec.Timestamp)
	}
	got, err := decodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ev) {
		t.Errorf("round trip (schema id %d):\n got %+v\nwant %+v", id, got, ev)
	}
	for cut := 0; cut < len(rec.Value)-len(ev.Data); cut++ {
		if _, err := decodeValue(rec.Value[:cut]); err == nil {
			t.Errorf("value cut to %d bytes decoded without error (schema id %d)", cut, id)
		}
	}
}
