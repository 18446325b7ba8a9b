package aggregate

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// EventCodec turns domain events into stored bytes and back. Decode
// receives the stored schema version and must return the current shape of
// the event: that is where upcasting happens.
type EventCodec[E any] interface {
	Encode(ev E) (typ string, version int, data []byte, err error)
	Decode(typ string, version int, data []byte) (E, error)
}

// Upcaster rewrites the data of an event stored at schema version From
// into version From+1.
type Upcaster func(data []byte) ([]byte, error)

// JSONCodec encodes events as JSON under registered type names, and
// upcasts old versions on read through registered Upcasters. Register
// every event type before use; it is not safe to register concurrently
// with encoding.
type JSONCodec[E any] struct {
	byName map[string]*jsonType
	byType map[reflect.Type]*jsonType
}

type jsonType struct {
	name      string
	typ       reflect.Type
	version   int              // current schema version
	upcasters map[int]Upcaster // from version -> next
}

// NewJSONCodec returns an empty codec.
func NewJSONCodec[E any]() *JSONCodec[E] {
	return &JSONCodec[E]{byName: map[string]*jsonType{}, byType: map[reflect.Type]*jsonType{}}
}

// Register maps the Go type of sample (a value of the event's concrete
// type) to name at schema version version. It panics on a programming
// error (a duplicate name or a type that is not an E), as a registry
// filled at start-up should.
func (c *JSONCodec[E]) Register(name string, version int, sample E) *JSONCodec[E] {
	t := reflect.TypeOf(sample)
	if t == nil {
		panic("aggregate: Register with a nil sample")
	}
	if _, dup := c.byName[name]; dup {
		panic(fmt.Sprintf("aggregate: event type %q registered twice", name))
	}
	jt := &jsonType{name: name, typ: t, version: version, upcasters: map[int]Upcaster{}}
	c.byName[name] = jt
	c.byType[t] = jt
	return c
}

// Upcast registers the step from version from to from+1 of event name.
func (c *JSONCodec[E]) Upcast(name string, from int, up Upcaster) *JSONCodec[E] {
	jt, ok := c.byName[name]
	if !ok {
		panic(fmt.Sprintf("aggregate: upcaster for unregistered event type %q", name))
	}
	jt.upcasters[from] = up
	return c
}

// Encode implements EventCodec.
func (c *JSONCodec[E]) Encode(ev E) (string, int, []byte, error) {
	jt, ok := c.byType[reflect.TypeOf(ev)]
	if !ok {
		return "", 0, nil, fmt.Errorf("aggregate: event type %T is not registered", ev)
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return "", 0, nil, fmt.Errorf("aggregate: encode %s: %w", jt.name, err)
	}
	return jt.name, jt.version, data, nil
}

// Decode implements EventCodec.
func (c *JSONCodec[E]) Decode(typ string, version int, data []byte) (E, error) {
	var zero E
	jt, ok := c.byName[typ]
	if !ok {
		return zero, fmt.Errorf("aggregate: unknown event type %q", typ)
	}
	if version > jt.version {
		return zero, fmt.Errorf("aggregate: event %s has version %d, newer than this build's %d", typ, version, jt.version)
	}
	for v := version; v < jt.version; v++ {
		up, ok := jt.upcasters[v]
		if !ok {
			return zero, fmt.Errorf("aggregate: no upcaster for event %s from version %d", typ, v)
		}
		var err error
		if data, err = up(data); err != nil {
			return zero, fmt.Errorf("aggregate: upcast %s from version %d: %w", typ, v, err)
		}
	}
	ptr := reflect.New(jt.typ)
	if err := json.Unmarshal(data, ptr.Interface()); err != nil {
		return zero, fmt.Errorf("aggregate: decode %s: %w", typ, err)
	}
	ev, ok := ptr.Elem().Interface().(E)
	if !ok {
		return zero, fmt.Errorf("aggregate: event type %q does not implement the aggregate's event type", typ)
	}
	return ev, nil
}

// SnapshotCodec encodes an aggregate's state for snapshots. Decode returns
// an error for a snapshot it cannot read (an old schema, say): the runtime
// then replays the aggregate from its first event.
type SnapshotCodec[S any] interface {
	EncodeState(state S) (version int, data []byte, err error)
	DecodeState(version int, data []byte) (S, error)
}

// JSONSnapshots is a SnapshotCodec that stores the state as JSON and
// accepts only snapshots of its own Version.
type JSONSnapshots[S any] struct{ Version int }

// EncodeState implements SnapshotCodec.
func (j JSONSnapshots[S]) EncodeState(state S) (int, []byte, error) {
	data, err := json.Marshal(state)
	return j.Version, data, err
}

// DecodeState implements SnapshotCodec.
func (j JSONSnapshots[S]) DecodeState(version int, data []byte) (S, error) {
	var s S
	if version != j.Version {
		return s, fmt.Errorf("aggregate: snapshot version %d, want %d", version, j.Version)
	}
	err := json.Unmarshal(data, &s)
	return s, err
}
