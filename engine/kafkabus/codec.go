package kafkabus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logbook/logbook/engine/eventstore"
)

// formatV1 is the first byte of every record value this package writes. A
// reader refuses other versions rather than guess at them.
const formatV1 = 1

var errCorrupt = errors.New("kafkabus: malformed record")

// encodeRecord turns ev into the record that carries it, its value in
// logbook's format, or in Avro under schema id if id is not 0.
func encodeRecord(topic string, ev eventstore.Event, id int) (*kgo.Record, error) {
	r := &kgo.Record{Topic: topic, Key: []byte(ev.Stream), Timestamp: ev.Time}
	if id == 0 {
		r.Value = encodeValue(ev)
		return r, nil
	}
	var err error
	r.Value, err = encodeAvroValue(id, ev)
	return r, err
}

func encodeValue(ev eventstore.Event) []byte {
	n := 1 + 2*binary.MaxVarintLen64 + 16 + 8 + 2*binary.MaxVarintLen64 + len(ev.Type) + len(ev.Data)
	for _, t := range ev.Tags {
		n += binary.MaxVarintLen64 + len(t)
	}
	for k, v := range ev.Meta {
		n += 2*binary.MaxVarintLen64 + len(k) + len(v)
	}
	b := make([]byte, 0, n)
	b = append(b, formatV1)
	b = binary.AppendUvarint(b, ev.Position)
	b = binary.AppendUvarint(b, ev.Seq)
	b = append(b, ev.ID[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(ev.Time.UnixNano()))
	b = appendString(b, ev.Type)
	b = binary.AppendVarint(b, int64(ev.Version))
	b = binary.AppendUvarint(b, uint64(len(ev.Tags)))
	for _, t := range ev.Tags {
		b = appendString(b, t)
	}
	b = binary.AppendUvarint(b, uint64(len(ev.Meta)))
	for k, v := range ev.Meta {
		b = appendString(b, k)
		b = appendString(b, v)
	}
	return append(b, ev.Data...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decodeRecord is the inverse of encodeRecord. It copies what it keeps, so
// the record's buffers may be reused. Empty tags and metadata decode as nil
// and an empty payload as an empty slice, as the embedded store returns
// them, so events compare equal whichever way they travelled.
func decodeRecord(r *kgo.Record) (eventstore.Event, error) {
	ev, err := decodeValue(r.Value)
	if err != nil {
		return ev, fmt.Errorf("%w: %s/%d offset %d: %v", errCorrupt, r.Topic, r.Partition, r.Offset, err)
	}
	ev.Stream = string(r.Key)
	return ev, nil
}

// decodeValue reads a value in either format: logbook's starts with its
// version byte, 1; the registry's wire format with its magic byte, 0.
func decodeValue(v []byte) (eventstore.Event, error) {
	var ev eventstore.Event
	if len(v) > 0 && v[0] == 0 {
		return decodeAvroValue(v)
	}
	if len(v) == 0 || v[0] != formatV1 {
		if len(v) == 0 {
			return ev, errors.New("empty value")
		}
		return ev, fmt.Errorf("unknown format version %d", v[0])
	}
	d := decoder{b: v[1:]}
	ev.Position = d.uvarint()
	ev.Seq = d.uvarint()
	copy(ev.ID[:], d.take(16))
	if t := d.take(8); t != nil {
		ev.Time = time.Unix(0, int64(binary.BigEndian.Uint64(t))).UTC()
	}
	ev.Type = d.string()
	ev.Version = int(d.varint())
	if n := d.count(); n > 0 {
		ev.Tags = make([]string, n)
		for i := range ev.Tags {
			ev.Tags[i] = d.string()
		}
	}
	if n := d.count(); n > 0 {
		ev.Meta = make(map[string]string, n)
		for range n {
			k := d.string()
			ev.Meta[k] = d.string()
		}
	}
	if d.err != nil {
		return ev, d.err
	}
	ev.Data = append([]byte{}, d.b...)
	return ev, nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("truncated at %s", what)
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("a uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("a varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) take(n int) []byte {
	if len(d.b) < n {
		d.fail(fmt.Sprintf("%d bytes", n))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("a string")
		return ""
	}
	return string(d.take(int(n)))
}

// count reads a collection size, refusing one larger than the bytes left
// could hold, so a corrupt value cannot make us allocate without bound.
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("a count")
		return 0
	}
	return int(n)
}
