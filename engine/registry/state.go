package registry

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// The registry's events, stored as JSON in one stream. Every decision is
// made on the state at a stream version and appended with that version as
// the expected one, so two nodes deciding at once cannot both succeed: the
// loser reloads and decides again, and ids and versions never collide.
const (
	evRegistered     = "SchemaRegistered" // a subject got a new version
	evVersionDeleted = "VersionDeleted"   // one version, soft or permanently
	evSubjectDeleted = "SubjectDeleted"   // every version of a subject
	evConfigSet      = "ConfigSet"        // a compatibility level, global if Subject is ""
	evConfigDeleted  = "ConfigDeleted"    // back to the default (global) or the global level (subject)
	evModeSet        = "ModeSet"          // the global mode
)

type registered struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
	ID      int    `json:"id"`
	// Schema is the normal-form text, carried by the first registration of
	// an id only; later ones refer to it by id.
	Schema string `json:"schema,omitempty"`
}

type deleted struct {
	Subject   string `json:"subject"`
	Version   int    `json:"version,omitempty"`
	Permanent bool   `json:"permanent,omitempty"`
}

type configSet struct {
	Subject string `json:"subject,omitempty"`
	Level   Level  `json:"level,omitempty"`
}

type modeSet struct {
	Mode string `json:"mode"`
}

// state is what the events add up to. It is changed only by apply.
type state struct {
	schemas  map[int]*schemaEntry
	byText   map[string]int // normal form → id
	maxID    int
	subjects map[string]*subject
	global   Level // "" means DefaultLevel
	mode     string
	bytes    int // the schemas' texts, for the memory bound
}

type schemaEntry struct {
	id     int
	parsed parsed
	refs   []subjectVersion // versions (soft-deleted ones too) that use it
	// answer is the body of GET /schemas/ids/{id}, the registry's hottest
	// read, encoded once.
	answer []byte
}

type subjectVersion struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

type subject struct {
	name     string
	versions []*version // ascending; soft-deleted ones too
	level    Level      // "" means the global level
}

type version struct {
	num     int
	id      int
	deleted bool
}

func newState() *state {
	return &state{schemas: map[int]*schemaEntry{}, byText: map[string]int{}, subjects: map[string]*subject{}, mode: ModeReadWrite}
}

// level is the level that applies to subject.
func (s *state) level(subj string) Level {
	if sub := s.subjects[subj]; sub != nil && sub.level != "" {
		return sub.level
	}
	if s.global != "" {
		return s.global
	}
	return DefaultLevel
}

// live returns the versions of a subject that are not deleted, or with
// deleted also those soft-deleted.
func (sub *subject) live(withDeleted bool) []*version {
	var out []*version
	for _, v := range sub.versions {
		if withDeleted || !v.deleted {
			out = append(out, v)
		}
	}
	return out
}

func (sub *subject) find(num int) *version {
	i, ok := slices.BinarySearchFunc(sub.versions, num, func(v *version, n int) int { return v.num - n })
	if !ok {
		return nil
	}
	return sub.versions[i]
}

// refsOf returns the versions that use schema id, sorted.
func (s *state) refsOf(id int, withDeleted bool) []subjectVersion {
	e := s.schemas[id]
	if e == nil {
		return nil
	}
	var out []subjectVersion
	for _, r := range e.refs {
		v := s.subjects[r.Subject].find(r.Version)
		if withDeleted || !v.deleted {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Subject != out[j].Subject {
			return out[i].Subject < out[j].Subject
		}
		return out[i].Version < out[j].Version
	})
	return out
}

// apply changes the state by one stored event. An event that does not fit
// the state means the stream was written by something else than this
// package's decisions; the registry then refuses to start.
func (s *state) apply(typ string, data []byte) error {
	switch typ {
	case evRegistered:
		var e registered
		if err := json.Unmarshal(data, &e); err != nil {
			return err
		}
		return s.applyRegistered(e)
	case evVersionDeleted, evSubjectDeleted:
		var e deleted
		if err := json.Unmarshal(data, &e); err != nil {
			return err
		}
		sub := s.subjects[e.Subject]
		if sub == nil {
			return fmt.Errorf("delete in unknown subject %q", e.Subject)
		}
		for _, v := range slices.Clone(sub.versions) {
			if typ == evVersionDeleted && v.num != e.Version {
				continue
			}
			if e.Permanent {
				s.removeVersion(sub, v)
			} else {
				v.deleted = true
			}
		}
		if len(sub.versions) == 0 {
			delete(s.subjects, e.Subject)
		}
		return nil
	case evConfigSet:
		var e configSet
		if err := json.Unmarshal(data, &e); err != nil {
			return err
		}
		if e.Subject == "" {
			s.global = e.Level
		} else {
			s.subject(e.Subject).level = e.Level
		}
		return nil
	case evConfigDeleted:
		var e configSet
		if err := json.Unmarshal(data, &e); err != nil {
			return err
		}
		if e.Subject == "" {
			s.global = ""
		} else if sub := s.subjects[e.Subject]; sub != nil {
			sub.level = ""
			if len(sub.versions) == 0 {
				delete(s.subjects, e.Subject)
			}
		}
		return nil
	case evModeSet:
		var e modeSet
		if err := json.Unmarshal(data, &e); err != nil {
			return err
		}
		s.mode = e.Mode
		return nil
	}
	return fmt.Errorf("unknown event type %q", typ)
}

func (s *state) subject(name string) *subject {
	sub := s.subjects[name]
	if sub == nil {
		sub = &subject{name: name}
		s.subjects[name] = sub
	}
	return sub
}

func (s *state) applyRegistered(e registered) error {
	entry := s.schemas[e.ID]
	if entry == nil {
		if e.Schema == "" {
			return fmt.Errorf("schema id %d registered without its schema", e.ID)
		}
		p, err := parseSchema(e.Schema)
		if err != nil {
			return fmt.Errorf("schema id %d: %w", e.ID, err)
		}
		answer, err := json.Marshal(map[string]string{"schema": p.text})
		if err != nil {
			return err
		}
		entry = &schemaEntry{id: e.ID, parsed: p, answer: append(answer, '\n')}
		s.schemas[e.ID] = entry
		s.byText[p.text] = e.ID
		s.bytes += len(p.text) + len(answer)
		s.maxID = max(s.maxID, e.ID)
	}
	sub := s.subject(e.Subject)
	if n := len(sub.versions); n > 0 && sub.versions[n-1].num >= e.Version {
		return fmt.Errorf("subject %q: version %d registered after %d", e.Subject, e.Version, sub.versions[n-1].num)
	}
	sub.versions = append(sub.versions, &version{num: e.Version, id: e.ID})
	entry.refs = append(entry.refs, subjectVersion{e.Subject, e.Version})
	return nil
}

// removeVersion deletes a version permanently. Its schema keeps its id (ids
// are never reused, and registering the schema again gives the same one);
// the schema is no longer served once no version uses it.
func (s *state) removeVersion(sub *subject, v *version) {
	sub.versions = slices.DeleteFunc(sub.versions, func(x *version) bool { return x == v })
	e := s.schemas[v.id]
	e.refs = slices.DeleteFunc(e.refs, func(r subjectVersion) bool { return r.Subject == sub.name && r.Version == v.num })
}
