package pebblestore

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
)

// FuzzDecodeEvent feeds the stored-event decoder arbitrary records, as a
// damaged or foreign data directory could hold. It must not panic or
// allocate beyond the record's size; what it accepts must encode again
// to a record that decodes to the same event, and the event must not
// share memory with the record (Pebble reuses it when the iterator moves).
func FuzzDecodeEvent(f *testing.F) {
	for _, c := range []struct {
		stream string
		ev     eventstore.NewEvent
	}{
		{"s", eventstore.NewEvent{ID: eventstore.NewID(), Type: "t"}},
		{"flight/LH-400 ü", eventstore.NewEvent{Type: "leg.added", Version: 3, Tags: []string{"a", "", "c"},
			Meta: map[string]string{"k": "v", "": "empty key"}, Data: []byte{0, 1, 2, 0xff, 0, '\n'}}},
	} {
		rec := encodeEvent(nil, c.stream, &c.ev)
		patchSeqTime(rec, 7, 1_700_000_000_123_456_789)
		f.Add(rec)
	}
	f.Add([]byte{codecV1})
	f.Add(append(make([]byte, fixedBytes), 0xff, 0xff, 0xff, 0xff, 0x0f))
	f.Fuzz(func(t *testing.T, rec []byte) {
		var in interner
		ev, err := decodeEvent(9, rec, &in)
		if err != nil {
			return
		}
		data := append([]byte(nil), ev.Data...)
		for i := range rec {
			rec[i] ^= 0xff
		}
		if !bytes.Equal(ev.Data, data) {
			t.Fatal("the event's data shares the record's memory")
		}
		ne := eventstore.NewEvent{ID: ev.ID, Type: ev.Type, Version: ev.Version, Tags: ev.Tags, Meta: ev.Meta, Data: ev.Data}
		rec2 := encodeEvent(nil, ev.Stream, &ne)
		patchSeqTime(rec2, ev.Seq, ev.Time.UnixNano())
		again, err := decodeEvent(9, rec2, &interner{})
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, ev) {
			t.Fatalf("round trip\n got %+v\nwant %+v", again, ev)
		}
	})
}
