package kafkabus

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/registry"
)

// EventSchema is the Avro schema of the record values a Publisher with
// PublisherConfig.Schemas writes, registered under the subject
// "<topic>-value" (Confluent's TopicNameStrategy). The record is named
// logbook.Event whatever the topic: one schema describes every logbook
// topic, and consumers of several topics share a generated class. The
// event's own payload is the bytes field data, as the store holds it —
// itself in the registry's wire format when the aggregate uses
// registry.AvroCodec, so a consumer resolves it with the registry again.
const EventSchema = `{"type":"record","name":"Event","namespace":"logbook","doc":"An event of a logbook log.","fields":[` +
	`{"name":"stream","type":"string"},` +
	`{"name":"seq","type":"long"},` +
	`{"name":"position","type":"long"},` +
	`{"name":"id","type":{"type":"fixed","name":"EventID","size":16}},` +
	`{"name":"type","type":"string"},` +
	`{"name":"version","type":"int"},` +
	`{"name":"tags","type":{"type":"array","items":"string"}},` +
	`{"name":"meta","type":{"type":"map","values":"string"}},` +
	`{"name":"time_unix_nanos","type":"long"},` +
	`{"name":"data","type":"bytes"}]}`

var eventSchema = MustAvroValue[avroEvent](EventSchema)

// AvroValue encodes and decodes record values of one Go type as one Avro
// schema in the schema registry's wire format (Confluent's: a zero byte,
// the schema id in 4 bytes big-endian, the Avro binary encoding). Decoding
// is bounded as the Publisher's values are (avroDecoding). It is safe for
// concurrent use once registered.
type AvroValue[T any] struct {
	text   string
	schema avro.Schema
	id     int
}

// NewAvroValue parses schema (Avro's JSON) for values of T.
func NewAvroValue[T any](schema string) (*AvroValue[T], error) {
	s, err := avro.ParseWithCache(schema, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("kafkabus: Avro schema: %w", err)
	}
	return &AvroValue[T]{text: schema, schema: s}, nil
}

// MustAvroValue is NewAvroValue for a schema known to be valid.
func MustAvroValue[T any](schema string) *AvroValue[T] {
	v, err := NewAvroValue[T](schema)
	if err != nil {
		panic(err)
	}
	return v
}

// Register registers the schema under subject in schemas (for a topic's
// values, Confluent's TopicNameStrategy: "<topic>-value") and keeps the
// id Encode writes. The registry refuses a schema its compatibility level
// refuses: an incompatible change fails at start.
func (a *AvroValue[T]) Register(ctx context.Context, schemas registry.Schemas, subject string) error {
	id, err := schemas.Register(ctx, subject, a.text)
	if err != nil {
		return fmt.Errorf("kafkabus: register the schema of %s: %w", subject, err)
	}
	a.id = id
	return nil
}

// ID is the schema id Register got (0 before).
func (a *AvroValue[T]) ID() int { return a.id }

// Encode appends v's wire-format encoding to b.
func (a *AvroValue[T]) Encode(b []byte, v T) ([]byte, error) {
	body, err := avro.Marshal(a.schema, v)
	if err != nil {
		return nil, err
	}
	return append(registry.AppendWireHeader(b, a.id), body...), nil
}

// Decode reads a wire-format value with the schema (whatever id its
// header names: the writer registered this same schema).
func (a *AvroValue[T]) Decode(data []byte) (T, error) {
	var v T
	_, payload, err := registry.SplitWire(data)
	if err != nil {
		return v, err
	}
	err = avroDecoding.NewDecoder(a.schema, bytes.NewReader(payload)).Decode(&v)
	return v, err
}

// avroDecoding bounds what decoding a record value may allocate: a
// corrupt or foreign value can claim an array of a billion tags, which the
// decoder would allocate before reading one. An event has at most a few
// dozen tags and, in one append, at most 16 MiB of bytes (eventstore's
// default limits; a store configured far beyond them needs these raised).
var avroDecoding = avro.Config{MaxByteSliceSize: 16 << 20, MaxSliceAllocSize: 1 << 16}.Freeze()

type avroEvent struct {
	Stream   string            `avro:"stream"`
	Seq      int64             `avro:"seq"`
	Position int64             `avro:"position"`
	ID       [16]byte          `avro:"id"`
	Type     string            `avro:"type"`
	Version  int32             `avro:"version"`
	Tags     []string          `avro:"tags"`
	Meta     map[string]string `avro:"meta"`
	Time     int64             `avro:"time_unix_nanos"`
	Data     []byte            `avro:"data"`
}

// encodeAvroValue encodes ev as EventSchema in the registry's wire format
// under schema id.
func encodeAvroValue(id int, ev eventstore.Event) ([]byte, error) {
	enc := AvroValue[avroEvent]{schema: eventSchema.schema, id: id}
	out, err := enc.Encode(nil, avroEvent{
		Stream: ev.Stream, Seq: int64(ev.Seq), Position: int64(ev.Position), ID: ev.ID,
		Type: ev.Type, Version: int32(ev.Version), Tags: ev.Tags, Meta: ev.Meta,
		Time: ev.Time.UnixNano(), Data: ev.Data,
	})
	if err != nil {
		return nil, fmt.Errorf("kafkabus: encode position %d in Avro: %w", ev.Position, err)
	}
	return out, nil
}

// decodeAvroValue is the inverse of encodeAvroValue. It reads every value
// with EventSchema, whatever id the header names: this package registers no
// other schema under a topic's subject.
func decodeAvroValue(v []byte) (eventstore.Event, error) {
	a, err := eventSchema.Decode(v)
	if err != nil {
		return eventstore.Event{}, err
	}
	ev := eventstore.Event{
		Stream: a.Stream, Seq: uint64(a.Seq), Position: uint64(a.Position), ID: a.ID,
		Type: a.Type, Version: int(a.Version), Time: time.Unix(0, a.Time).UTC(), Data: a.Data,
	}
	if len(a.Tags) > 0 {
		ev.Tags = a.Tags
	}
	if len(a.Meta) > 0 {
		ev.Meta = a.Meta
	}
	if ev.Data == nil {
		ev.Data = []byte{}
	}
	return ev, nil
}
