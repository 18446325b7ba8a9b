package registry

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/hamba/avro/v2"

	"github.com/logbook/logbook/engine/aggregate"
)

// The registry's wire format, Confluent's: a zero magic byte, the writer's
// schema id as 4 bytes big-endian, then the Avro binary encoding.
const (
	wireMagic  = 0
	wireHeader = 5
)

// AppendWireHeader appends the wire format's header for schema id to b.
func AppendWireHeader(b []byte, id int) []byte {
	return binary.BigEndian.AppendUint32(append(b, wireMagic), uint32(id))
}

// ErrNotWireFormat is returned for data that does not start with the wire
// format's header.
var ErrNotWireFormat = errors.New("registry: not in the schema registry's wire format")

// SplitWire returns the schema id and the Avro payload of data in the wire
// format.
func SplitWire(data []byte) (id int, payload []byte, err error) {
	if len(data) < wireHeader || data[0] != wireMagic {
		return 0, nil, ErrNotWireFormat
	}
	return int(binary.BigEndian.Uint32(data[1:wireHeader])), data[wireHeader:], nil
}

// Schemas is where an Avro codec registers its schemas and finds the
// schemas data was written with. *Registry is one.
type Schemas interface {
	Register(ctx context.Context, subject, schema string) (int, error)
	SchemaByID(ctx context.Context, id int) (string, error)
}

// AvroCodec is an aggregate.EventCodec that stores events in Avro, in the
// registry's wire format. Each event type is registered with its current
// schema (the reader's), under a subject named after the type: Register
// refuses a schema the subject's compatibility level refuses, so an
// incompatible change fails at start-up instead of on a replay.
//
// Data written with an earlier schema of the type is decoded by Avro schema
// resolution into the current one (added fields take their defaults,
// removed ones are skipped, promotions and aliases apply) — no upcaster is
// needed for a compatible change. Data that is not in the wire format (events
// written before the switch to Avro) goes to Fallback, a JSONCodec with
// its upcasters, say.
//
// The version Encode returns is the schema id. Register every type before
// use; registering is not safe concurrently with encoding.
type AvroCodec[E any] struct {
	schemas  Schemas
	byName   map[string]*avroType
	byType   map[reflect.Type]*avroType
	resolved sync.Map // resolvedKey → avro.Schema
	// Fallback decodes data not in the wire format; nil refuses it.
	Fallback aggregate.EventCodec[E]
}

type avroType struct {
	name   string
	typ    reflect.Type
	id     int
	schema avro.Schema
}

type resolvedKey struct {
	name string
	id   int
}

// NewAvroCodec returns a codec that registers and looks up schemas in
// schemas.
func NewAvroCodec[E any](schemas Schemas) *AvroCodec[E] {
	return &AvroCodec[E]{schemas: schemas, byName: map[string]*avroType{}, byType: map[reflect.Type]*avroType{}}
}

// Register maps the Go type of sample (a value of the event's concrete
// type, whose fields carry `avro:"name"` tags) to the event type name and
// registers schema as the current schema of subject name.
func (c *AvroCodec[E]) Register(ctx context.Context, name string, sample E, schema string) error {
	t := reflect.TypeOf(sample)
	if t == nil {
		return errors.New("registry: AvroCodec.Register with a nil sample")
	}
	if _, dup := c.byName[name]; dup {
		return fmt.Errorf("registry: event type %q registered twice", name)
	}
	p, err := parseSchema(schema)
	if err != nil {
		return fmt.Errorf("registry: event type %s: %w", name, err)
	}
	id, err := c.schemas.Register(ctx, name, p.text)
	if err != nil {
		return fmt.Errorf("registry: event type %s: %w", name, err)
	}
	at := &avroType{name: name, typ: t, id: id, schema: p.schema}
	c.byName[name], c.byType[t] = at, at
	return nil
}

// Encode implements aggregate.EventCodec.
func (c *AvroCodec[E]) Encode(ev E) (string, int, []byte, error) {
	at, ok := c.byType[reflect.TypeOf(ev)]
	if !ok {
		return "", 0, nil, fmt.Errorf("registry: event type %T is not registered", ev)
	}
	body, err := avro.Marshal(at.schema, ev)
	if err != nil {
		return "", 0, nil, fmt.Errorf("registry: encode %s: %w", at.name, err)
	}
	data := make([]byte, 0, wireHeader+len(body))
	data = append(AppendWireHeader(data, at.id), body...)
	return at.name, at.id, data, nil
}

// Decode implements aggregate.EventCodec.
func (c *AvroCodec[E]) Decode(typ string, version int, data []byte) (E, error) {
	var zero E
	id, payload, err := SplitWire(data)
	if err != nil {
		if c.Fallback != nil {
			return c.Fallback.Decode(typ, version, data)
		}
		return zero, fmt.Errorf("registry: event %s: %w", typ, err)
	}
	at, ok := c.byName[typ]
	if !ok {
		return zero, fmt.Errorf("registry: unknown event type %q", typ)
	}
	schema := at.schema
	if id != at.id {
		if schema, err = c.resolve(at, id); err != nil {
			return zero, err
		}
	}
	ptr := reflect.New(at.typ)
	if err := avro.Unmarshal(schema, payload, ptr.Interface()); err != nil {
		return zero, fmt.Errorf("registry: decode %s (schema id %d): %w", typ, id, err)
	}
	ev, ok := ptr.Elem().Interface().(E)
	if !ok {
		return zero, fmt.Errorf("registry: event type %q does not implement the aggregate's event type", typ)
	}
	return ev, nil
}

// resolve returns the schema that reads data written with schema id into
// at's current schema: hamba/avro's resolution of the two, kept per
// (type, id).
func (c *AvroCodec[E]) resolve(at *avroType, id int) (avro.Schema, error) {
	key := resolvedKey{at.name, id}
	if s, ok := c.resolved.Load(key); ok {
		return s.(avro.Schema), nil
	}
	text, err := c.schemas.SchemaByID(context.Background(), id)
	if err != nil {
		return nil, fmt.Errorf("registry: event %s written with schema id %d: %w", at.name, id, err)
	}
	writer, err := parseSchema(text)
	if err != nil {
		return nil, fmt.Errorf("registry: schema id %d: %w", id, err)
	}
	s, err := avro.NewSchemaCompatibility().Resolve(at.schema, writer.schema)
	if err != nil {
		return nil, fmt.Errorf("registry: event %s: schema id %d cannot be read as the current schema (id %d): %w", at.name, id, at.id, err)
	}
	c.resolved.Store(key, s)
	return s, nil
}
