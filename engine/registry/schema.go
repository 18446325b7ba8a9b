package registry

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/hamba/avro/v2"
)

// Level is a compatibility level, as Confluent's registry names it.
type Level string

// The seven compatibility levels. Non-transitive levels check a new schema
// against the subject's latest version, transitive ones against every
// version that is not deleted.
const (
	Backward           Level = "BACKWARD"
	BackwardTransitive Level = "BACKWARD_TRANSITIVE"
	Forward            Level = "FORWARD"
	ForwardTransitive  Level = "FORWARD_TRANSITIVE"
	Full               Level = "FULL"
	FullTransitive     Level = "FULL_TRANSITIVE"
	None               Level = "NONE"
)

// DefaultLevel is the global level until one is set.
const DefaultLevel = Backward

// Valid reports whether l is one of the seven levels.
func (l Level) Valid() bool {
	switch l {
	case Backward, BackwardTransitive, Forward, ForwardTransitive, Full, FullTransitive, None:
		return true
	}
	return false
}

// backward: the new schema must read data written with the old one.
func (l Level) backward() bool {
	return l == Backward || l == BackwardTransitive || l == Full || l == FullTransitive
}

// forward: the old schema must read data written with the new one.
func (l Level) forward() bool {
	return l == Forward || l == ForwardTransitive || l == Full || l == FullTransitive
}

func (l Level) transitive() bool {
	return l == BackwardTransitive || l == ForwardTransitive || l == FullTransitive
}

// parsed is a schema as the registry keeps it: its text in normal form and
// the parsed schema.
type parsed struct {
	text   string
	schema avro.Schema
}

// parseSchema parses an Avro schema and returns it in the registry's normal
// form. Each parse gets a cache of its own: hamba/avro's default cache is
// global, so named types of one subject would otherwise resolve references
// in another, and the cache would grow with every schema ever sent.
//
// The normal form is the schema re-serialized by hamba/avro: full names,
// a fixed attribute order, no whitespace — the normalizations of Avro's
// parsing canonical form — but keeping what canonical form strips and
// schema resolution needs (field defaults, aliases, enum defaults) and
// doc and custom properties, as Confluent's registry does. Two texts of the
// same schema therefore get the same id, and two schemas that differ only
// in a default do not (they resolve differently).
func parseSchema(text string) (parsed, error) {
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return parsed{}, err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return parsed{}, err
	}
	return parsed{text: string(b), schema: s}, nil
}

// recordFields counts the fields of every record schema declares, each
// named record once.
func recordFields(schema avro.Schema) int {
	seen := map[string]bool{}
	n := 0
	var walk func(avro.Schema)
	walk = func(s avro.Schema) {
		switch s := s.(type) {
		case *avro.RecordSchema:
			if seen[s.FullName()] {
				return
			}
			seen[s.FullName()] = true
			n += len(s.Fields())
			for _, f := range s.Fields() {
				walk(f.Type())
			}
		case *avro.UnionSchema:
			for _, t := range s.Types() {
				walk(t)
			}
		case *avro.ArraySchema:
			walk(s.Items())
		case *avro.MapSchema:
			walk(s.Values())
		}
	}
	walk(schema)
	return n
}

// compatible reports why reader cannot read data written with writer, or
// nil. Each check gets a fresh checker: hamba/avro's SchemaCompatibility
// caches results by the schemas' canonical-form fingerprints, which leave
// out defaults and aliases, so a shared checker would answer for one
// schema with what it found for another that differs only there.
func compatible(reader, writer avro.Schema) error {
	return avro.NewSchemaCompatibility().Compatible(reader, writer)
}

// checkLevel checks candidate against the existing versions (oldest first)
// under level, and returns one message per incompatibility.
func checkLevel(level Level, candidate avro.Schema, existing []versionRef) []string {
	if level == None || len(existing) == 0 {
		return nil
	}
	against := existing
	if !level.transitive() {
		against = existing[len(existing)-1:]
	}
	var msgs []string
	for _, old := range slices.Backward(against) {
		if level.backward() {
			if err := compatible(candidate, old.schema.schema); err != nil {
				msgs = append(msgs, fmt.Sprintf("the new schema cannot read data written with version %d (%s, reading as the new schema): %v", old.version, level, err))
			}
		}
		if level.forward() {
			if err := compatible(old.schema.schema, candidate); err != nil {
				msgs = append(msgs, fmt.Sprintf("version %d cannot read data written with the new schema (%s, reading as version %d): %v", old.version, level, old.version, err))
			}
		}
	}
	return msgs
}

// versionRef is one version of a subject with its schema, as checks see it.
type versionRef struct {
	version int
	schema  *parsed
}
