package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/logbook/logbook/engine/eventstore"
)

// Modes. In READONLY (and READONLY_OVERRIDE) schemas can be read but not
// registered or deleted; the mode itself and compatibility levels can still
// be changed.
const (
	ModeReadWrite        = "READWRITE"
	ModeReadOnly         = "READONLY"
	ModeReadOnlyOverride = "READONLY_OVERRIDE"
	modeImport           = "IMPORT"
)

// Options configure a Registry. Zero fields take their defaults.
type Options struct {
	// Stream holds the registry's events; default "logbook-registry".
	Stream string
	// MaxSchemaBytes bounds one schema, as sent and in normal form;
	// default 256 KiB.
	MaxSchemaBytes int
	// MaxSchemas bounds the distinct schemas (ids); default 10,000.
	MaxSchemas int
	// MaxTotalSchemaBytes bounds all schemas' texts together; default 256 MiB.
	MaxTotalSchemaBytes int
	// MaxSubjects bounds the subjects; default 10,000.
	MaxSubjects int
	// MaxVersions bounds the versions of one subject, soft-deleted ones
	// included; default 1,000.
	MaxVersions int
	// MaxParses bounds the schema operations at once (registrations,
	// lookups and compatibility checks, each from its parse to the end
	// of its checks); default twice GOMAXPROCS.
	MaxParses int
	// MaxFieldBytes bounds a schema's record fields (all its records'
	// together) times its size in normal form; default 64 Mi, such as
	// 1,000 fields in 64 KiB. A compatibility check costs about that much
	// memory: hamba/avro's checker fingerprints a record by writing it
	// out, and writes it by appending field after field to one string, so
	// a record of n fields in s bytes allocates about n×s/2 bytes. At the
	// default, at most MaxParses such checks at once bound what the
	// requests can make the server hold.
	MaxFieldBytes int64
	// Poll, if positive, follows the stream by reading it this often
	// rather than by a subscription. On a store shared by several
	// processes (PostgreSQL) a subscription makes the process follow
	// every commit of the whole log, which a process that otherwise only
	// appends, such as a cluster's write node, need not pay for: with
	// Poll, what another process changed in the registry reaches the
	// answers that do not catch up first (the mode, the levels, a schema
	// deleted since) within Poll. Answers that name the latest of
	// something, and lookups that miss, catch up first either way.
	Poll time.Duration
}

func (o Options) withDefaults() Options {
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.Stream == "" {
		o.Stream = "logbook-registry"
	}
	set(&o.MaxSchemaBytes, 256<<10)
	set(&o.MaxSchemas, 10_000)
	set(&o.MaxTotalSchemaBytes, 256<<20)
	set(&o.MaxSubjects, 10_000)
	set(&o.MaxVersions, 1_000)
	set(&o.MaxParses, 2*runtime.GOMAXPROCS(0))
	if o.MaxFieldBytes <= 0 {
		o.MaxFieldBytes = 64 << 20
	}
	return o
}

// maxSubjectBytes bounds a subject's name.
const maxSubjectBytes = 255

// maxWriteAttempts bounds how often a write is decided again after another
// node wrote first.
const maxWriteAttempts = 20

// Registry is a schema registry whose state is a stream of events in a
// logbook store. Reads are answered from memory; a read that finds nothing
// first catches up with the store, so what another node registered is
// found at once. Writes are decided on the state at a stream version and
// appended expecting exactly that version.
type Registry struct {
	store eventstore.Store
	opts  Options

	wmu     sync.Mutex // serializes writes and catch-ups
	mu      sync.RWMutex
	st      *state
	version uint64 // of the stream, applied to st

	cancel context.CancelFunc
	done   chan struct{}

	protected sync.Map // subject → struct{}: in use by the event bus

	parses chan struct{} // a slot per schema parse in flight
}

// Protect marks subj as in use by this process's event bus (the Kafka
// Avro publisher's "<topic>-value"): its schema ids are in published
// messages, which consumers resolve by id, so a permanent delete of the
// subject or of one of its versions is refused (422, 42205). A soft
// delete is allowed: the ids stay readable, and the publisher registers
// the schema again when it next starts. The refusal is the rule rather
// than something a flag overrides: one hard delete makes every message
// published with the id unreadable, and there is no undo; an operator
// who means it serves the registry without the bus and deletes then.
func (r *Registry) Protect(subj string) { r.protected.Store(subj, struct{}{}) }

func (r *Registry) inUse(subj string) error {
	if _, ok := r.protected.Load(subj); ok {
		return errorf(http.StatusUnprocessableEntity, codeNotPermitted, "Operation not permitted: subject '%s' is in use by the event bus (its ids are in published messages, which consumers read by id); it can be soft-deleted, not permanently deleted", subj)
	}
	return nil
}

// Open replays the registry's stream from store and follows it, so that
// writes by other processes sharing the store show up.
func Open(ctx context.Context, store eventstore.Store, opts Options) (*Registry, error) {
	r := &Registry{store: store, opts: opts.withDefaults(), st: newState(), done: make(chan struct{})}
	r.parses = make(chan struct{}, r.opts.MaxParses)
	if err := r.catchUp(ctx); err != nil {
		return nil, err
	}
	fctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.follow(fctx)
	return r, nil
}

// Close stops following the store. It does not close the store.
func (r *Registry) Close() error {
	r.cancel()
	<-r.done
	return nil
}

func (r *Registry) follow(ctx context.Context) {
	defer close(r.done)
	if r.opts.Poll > 0 {
		t := time.NewTicker(r.opts.Poll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = r.catchUp(ctx) // a store error: the next tick tries again
			}
		}
	}
	for ctx.Err() == nil {
		r.wmu.Lock()
		from := r.version + 1
		r.wmu.Unlock()
		sub, err := r.store.Subscribe(ctx, eventstore.OfStream(r.opts.Stream), from)
		if err == nil {
			for {
				if _, err = sub.Next(ctx); err != nil {
					break
				}
				// The events are read again by catchUp, which also serves
				// writers and misses; the subscription only wakes us.
				if err = r.catchUp(ctx); err != nil {
					break
				}
			}
			sub.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(followRetry):
		}
	}
}

// catchUp applies the stream's events past r.version.
func (r *Registry) catchUp(ctx context.Context) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	return r.catchUpLocked(ctx)
}

func (r *Registry) catchUpLocked(ctx context.Context) error {
	for {
		evs, err := r.store.ReadStream(ctx, r.opts.Stream, r.version+1, 1000)
		if err != nil {
			return fmt.Errorf("registry: read %s: %w", r.opts.Stream, err)
		}
		if len(evs) == 0 {
			return nil
		}
		r.mu.Lock()
		for _, ev := range evs {
			if err := r.st.apply(ev.Type, ev.Data); err != nil {
				r.mu.Unlock()
				return fmt.Errorf("registry: stream %s, event %d (%s): %w", r.opts.Stream, ev.Seq, ev.Type, err)
			}
			r.version = ev.Seq
		}
		r.mu.Unlock()
	}
}

// pending is an event a decision produced.
type pending struct {
	typ  string
	data any
}

// write decides on the current state and appends what it decided,
// expecting the stream at the version decided on; after a conflict it
// catches up and decides again. decide must not change the state.
func (r *Registry) write(ctx context.Context, decide func(s *state) ([]pending, error)) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	for attempt := 0; ; attempt++ {
		if err := r.catchUpLocked(ctx); err != nil {
			return storeError(err)
		}
		r.mu.RLock()
		evs, err := decide(r.st)
		r.mu.RUnlock()
		if err != nil || len(evs) == 0 {
			return err
		}
		news := make([]eventstore.NewEvent, len(evs))
		for i, e := range evs {
			data, err := json.Marshal(e.data)
			if err != nil {
				return storeError(err)
			}
			news[i] = eventstore.NewEvent{Type: e.typ, Version: 1, Data: data}
		}
		_, err = r.store.Append(ctx, r.opts.Stream, eventstore.Exactly(r.version), news)
		if errors.Is(err, eventstore.ErrVersionConflict) && attempt < maxWriteAttempts {
			continue
		}
		if err != nil {
			return storeError(err)
		}
		// Read back what was appended rather than applying news directly:
		// one path turns events into state.
		if err := r.catchUpLocked(ctx); err != nil {
			return storeError(err)
		}
		return nil
	}
}

func storeError(err error) error {
	var re *Error
	if errors.As(err, &re) {
		return err
	}
	return &Error{Status: http.StatusInternalServerError, Code: codeStoreError, Message: "Error in the backend data store: " + err.Error()}
}

// readFresh catches up with the store, then runs fn: for answers that
// name the latest of something (a subject's versions, its latest version,
// the subjects), which another node may have changed a moment ago. One
// read of the stream past the version known; answers about what cannot
// change (a schema by id, a numbered version) use read.
func (r *Registry) readFresh(ctx context.Context, fn func(s *state) error) error {
	if err := r.catchUp(ctx); err != nil {
		return storeError(err)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return fn(r.st)
}

// read runs fn on the state; if fn reports that something was not found,
// it catches up with the store and runs fn again.
func (r *Registry) read(ctx context.Context, fn func(s *state) error) error {
	r.mu.RLock()
	err := fn(r.st)
	r.mu.RUnlock()
	var re *Error
	if err == nil || !errors.As(err, &re) || re.Status != http.StatusNotFound {
		return err
	}
	if err := r.catchUp(ctx); err != nil {
		return storeError(err)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return fn(r.st)
}

func validSubject(s string) error {
	ok := s != "" && len(s) <= maxSubjectBytes && utf8.ValidString(s) &&
		!strings.ContainsFunc(s, func(c rune) bool { return c < 0x20 || c == 0x7f })
	if !ok {
		return errorf(http.StatusUnprocessableEntity, codeInvalidSubject, "Invalid subject: 1 to %d bytes of UTF-8 without control characters", maxSubjectBytes)
	}
	return nil
}

// MaxSchemaNesting bounds how deep a schema's JSON nests (objects and
// arrays in one another), and MaxSchemaNodes how many objects and arrays
// it has: the Avro parser's work grows with the square of the depth (it
// copies each level), so a 256 KiB schema of 10,000 nested arrays cost
// seconds of CPU per check — on routes any token may call. A record
// field nests three levels (fields array, field object, type object), so
// 128 is about 40 levels of records in one another.
const (
	MaxSchemaNesting = 128
	MaxSchemaNodes   = 10_000
)

// scanSchema checks a schema's JSON nesting and node count in one pass
// over its bytes, before any parse.
func scanSchema(text string) error {
	depth, nodes, inString, escaped := 0, 0, false, false
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			nodes++
			if depth > MaxSchemaNesting {
				return errInvalidSchema("nested more than %d levels deep (JSON objects and arrays)", MaxSchemaNesting)
			}
			if nodes > MaxSchemaNodes {
				return errInvalidSchema("more than %d JSON objects and arrays", MaxSchemaNodes)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}

// parse checks and parses a schema sent by a client. At most
// Options.MaxParses schema operations run at once; the others wait for a
// turn as long as ctx lets them. The caller holds the turn until it
// calls release, after its checks: a compatibility check costs more
// than the parse.
func (r *Registry) parse(ctx context.Context, text string) (p parsed, release func(), err error) {
	if len(text) > r.opts.MaxSchemaBytes {
		return parsed{}, nil, errInvalidSchema("%d bytes, limit %d", len(text), r.opts.MaxSchemaBytes)
	}
	if err := scanSchema(text); err != nil {
		return parsed{}, nil, err
	}
	select {
	case r.parses <- struct{}{}:
	case <-ctx.Done():
		return parsed{}, nil, errorf(http.StatusServiceUnavailable, codeTimeout, "Operation timed out waiting for a turn to parse the schema (%d parse at once); retry", cap(r.parses))
	}
	free := func() { <-r.parses }
	defer func() {
		if err != nil {
			free()
		}
	}()
	if p, err = parseSchema(text); err != nil {
		return parsed{}, nil, errInvalidSchema("%v", err)
	}
	if len(p.text) > r.opts.MaxSchemaBytes {
		return parsed{}, nil, errInvalidSchema("%d bytes in normal form, limit %d", len(p.text), r.opts.MaxSchemaBytes)
	}
	if n := recordFields(p.schema); int64(n)*int64(len(p.text)) > r.opts.MaxFieldBytes {
		return parsed{}, nil, errInvalidSchema("%d record fields in %d bytes: fields times bytes is limited to %d (a compatibility check costs about that much memory); split the record or shorten the schema", n, len(p.text), r.opts.MaxFieldBytes)
	}
	return p, free, nil
}

func writable(s *state) error {
	if s.mode != ModeReadWrite {
		return errorf(http.StatusUnprocessableEntity, codeNotPermitted, "Subject is in %s mode; operation not permitted", s.mode)
	}
	return nil
}

// Register adds schema to subject and returns its id. A schema already
// registered under the subject (and not deleted) returns its id without a
// new version; one registered under another subject keeps its id.
func (r *Registry) Register(ctx context.Context, subj, schema string) (int, error) {
	if err := validSubject(subj); err != nil {
		return 0, err
	}
	p, release, err := r.parse(ctx, schema)
	if err != nil {
		return 0, err
	}
	defer release()
	var id int
	err = r.write(ctx, func(s *state) ([]pending, error) {
		// A schema registered already returns its id, in any mode: the
		// Kafka Avro publisher registers at each start, and a READONLY
		// registry must not stop it.
		sub := s.subjects[subj]
		var live []*version
		if sub != nil {
			live = sub.live(false)
			for _, v := range live {
				if s.schemas[v.id].parsed.text == p.text {
					id = v.id
					return nil, nil
				}
			}
		}
		if err := writable(s); err != nil {
			return nil, err
		}
		if msgs := checkLevel(s.level(subj), p.schema, s.refs(live)); len(msgs) > 0 {
			return nil, errorf(http.StatusConflict, codeIncompatible, "Schema being registered is incompatible with an earlier schema for subject %q, details: %s", subj, strings.Join(msgs, "; "))
		}
		ev := registered{Subject: subj, Version: 1}
		if sub == nil {
			if len(s.subjects) >= r.opts.MaxSubjects {
				return nil, errorf(http.StatusUnprocessableEntity, codeNotPermitted, "Operation not permitted: the registry holds %d subjects, its limit", len(s.subjects))
			}
		} else if n := len(sub.versions); n > 0 {
			if n >= r.opts.MaxVersions {
				return nil, errorf(http.StatusUnprocessableEntity, codeNotPermitted, "Operation not permitted: subject %q has %d versions, its limit", subj, n)
			}
			ev.Version = sub.versions[n-1].num + 1
		}
		if known, ok := s.byText[p.text]; ok {
			ev.ID = known
		} else {
			// The text is kept twice: as such and in its JSON answer.
			if len(s.schemas) >= r.opts.MaxSchemas || s.bytes+2*len(p.text) > r.opts.MaxTotalSchemaBytes {
				return nil, errorf(http.StatusUnprocessableEntity, codeNotPermitted, "Operation not permitted: the registry holds %d schemas of %d bytes, its limit", len(s.schemas), s.bytes)
			}
			ev.ID, ev.Schema = s.maxID+1, p.text
		}
		id = ev.ID
		return []pending{{evRegistered, ev}}, nil
	})
	return id, err
}

func (s *state) refs(vs []*version) []versionRef {
	out := make([]versionRef, len(vs))
	for i, v := range vs {
		out[i] = versionRef{version: v.num, schema: &s.schemas[v.id].parsed}
	}
	return out
}

// SubjectSchema is one version of a subject.
type SubjectSchema struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
	ID      int    `json:"id"`
	Schema  string `json:"schema"`
}

// Latest is the version number that names a subject's latest version.
const Latest = -1

// resolveVersion finds version num (or Latest) of subj.
func (s *state) resolveVersion(subj string, num int, withDeleted bool) (*subject, *version, error) {
	sub := s.subjects[subj]
	if sub == nil {
		return nil, nil, errSubjectNotFound(subj)
	}
	live := sub.live(withDeleted)
	if len(live) == 0 {
		return nil, nil, errSubjectNotFound(subj)
	}
	if num == Latest {
		return sub, live[len(live)-1], nil
	}
	v := sub.find(num)
	if v == nil || (v.deleted && !withDeleted) {
		return nil, nil, errVersionNotFound(subj, num)
	}
	return sub, v, nil
}

// Version returns version num (or Latest) of subj.
func (r *Registry) Version(ctx context.Context, subj string, num int, withDeleted bool) (SubjectSchema, error) {
	var out SubjectSchema
	read := r.read
	if num == Latest {
		read = r.readFresh
	}
	err := read(ctx, func(s *state) error {
		_, v, err := s.resolveVersion(subj, num, withDeleted)
		if err != nil {
			return err
		}
		out = SubjectSchema{Subject: subj, Version: v.num, ID: v.id, Schema: s.schemas[v.id].parsed.text}
		return nil
	})
	return out, err
}

// Lookup finds schema among the versions of subj.
func (r *Registry) Lookup(ctx context.Context, subj, schema string, withDeleted bool) (SubjectSchema, error) {
	p, release, err := r.parse(ctx, schema)
	if err != nil {
		return SubjectSchema{}, err
	}
	defer release()
	var out SubjectSchema
	err = r.read(ctx, func(s *state) error {
		sub := s.subjects[subj]
		if sub == nil || len(sub.live(withDeleted)) == 0 {
			return errSubjectNotFound(subj)
		}
		for _, v := range slices.Backward(sub.live(withDeleted)) {
			if s.schemas[v.id].parsed.text == p.text {
				out = SubjectSchema{Subject: subj, Version: v.num, ID: v.id, Schema: p.text}
				return nil
			}
		}
		return errSchemaNotFound()
	})
	return out, err
}

// SchemaByID returns the schema with the given id, if some version (soft-
// deleted ones too) still uses it.
func (r *Registry) SchemaByID(ctx context.Context, id int) (string, error) {
	var text string
	err := r.read(ctx, func(s *state) error {
		e := s.schemas[id]
		if e == nil || len(e.refs) == 0 {
			return errSchemaNotFound()
		}
		text = e.parsed.text
		return nil
	})
	return text, err
}

// schemaAnswer returns the JSON answer to GET /schemas/ids/{id}.
func (r *Registry) schemaAnswer(ctx context.Context, id int) ([]byte, error) {
	var answer []byte
	err := r.read(ctx, func(s *state) error {
		e := s.schemas[id]
		if e == nil || len(e.refs) == 0 {
			return errSchemaNotFound()
		}
		answer = e.answer
		return nil
	})
	return answer, err
}

// VersionsOfID returns the subject versions that use schema id.
func (r *Registry) VersionsOfID(ctx context.Context, id int, withDeleted bool) ([]subjectVersion, error) {
	var out []subjectVersion
	err := r.read(ctx, func(s *state) error {
		e := s.schemas[id]
		if e == nil || len(e.refs) == 0 {
			return errSchemaNotFound()
		}
		out = s.refsOf(id, withDeleted)
		return nil
	})
	return out, err
}

// Subjects lists the subjects that have versions (soft-deleted ones only
// with withDeleted) and start with prefix, sorted.
func (r *Registry) Subjects(ctx context.Context, withDeleted bool, prefix string) []string {
	_ = r.catchUp(ctx) // on a store error, answer what is known
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := []string{}
	for name, sub := range r.st.subjects {
		if strings.HasPrefix(name, prefix) && len(sub.live(withDeleted)) > 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Versions lists the version numbers of subj.
func (r *Registry) Versions(ctx context.Context, subj string, withDeleted bool) ([]int, error) {
	var out []int
	err := r.readFresh(ctx, func(s *state) error {
		sub := s.subjects[subj]
		if sub == nil || len(sub.live(withDeleted)) == 0 {
			return errSubjectNotFound(subj)
		}
		for _, v := range sub.live(withDeleted) {
			out = append(out, v.num)
		}
		return nil
	})
	return out, err
}

// Check reports why schema may not be registered as a new version of subj
// under its level: against version num (or Latest) only, or with num 0
// against the versions the level checks. No messages means compatible.
func (r *Registry) Check(ctx context.Context, subj string, num int, schema string) ([]string, error) {
	p, release, err := r.parse(ctx, schema)
	if err != nil {
		return nil, err
	}
	defer release()
	var msgs []string
	err = r.readFresh(ctx, func(s *state) error {
		level := s.level(subj)
		if num == 0 {
			var live []*version
			if sub := s.subjects[subj]; sub != nil {
				live = sub.live(false)
			}
			msgs = checkLevel(level, p.schema, s.refs(live))
			return nil
		}
		_, v, err := s.resolveVersion(subj, num, false)
		if err != nil {
			return err
		}
		// One version: the level's direction, not its transitivity.
		msgs = checkLevel(level, p.schema, s.refs([]*version{v}))
		return nil
	})
	return msgs, err
}

// DeleteSubject deletes every version of subj: softly (they can still be
// read by id and with deleted=true), or permanently, which needs them
// soft-deleted first. It returns the versions deleted.
func (r *Registry) DeleteSubject(ctx context.Context, subj string, permanent bool) ([]int, error) {
	var nums []int
	if permanent {
		if err := r.inUse(subj); err != nil {
			return nil, err
		}
	}
	err := r.write(ctx, func(s *state) ([]pending, error) {
		nums = nil
		if err := writable(s); err != nil {
			return nil, err
		}
		sub := s.subjects[subj]
		if sub == nil || len(sub.versions) == 0 {
			return nil, errSubjectNotFound(subj)
		}
		live := sub.live(false)
		switch {
		case permanent && len(live) > 0:
			return nil, errorf(http.StatusNotFound, codeSubjectNotSoftDeleted, "Subject '%s' was not deleted first before being permanently deleted", subj)
		case !permanent && len(live) == 0:
			return nil, errorf(http.StatusNotFound, codeSubjectSoftDeleted, "Subject '%s' was soft deleted.Set permanent=true to delete permanently", subj)
		}
		vs := live
		if permanent {
			vs = sub.versions
		}
		for _, v := range vs {
			nums = append(nums, v.num)
		}
		return []pending{{evSubjectDeleted, deleted{Subject: subj, Permanent: permanent}}}, nil
	})
	return nums, err
}

// DeleteVersion deletes version num (or Latest) of subj, softly or, once
// soft-deleted, permanently, and returns its number.
func (r *Registry) DeleteVersion(ctx context.Context, subj string, num int, permanent bool) (int, error) {
	var deletedNum int
	if permanent {
		if err := r.inUse(subj); err != nil {
			return 0, err
		}
	}
	err := r.write(ctx, func(s *state) ([]pending, error) {
		if err := writable(s); err != nil {
			return nil, err
		}
		// "latest" is the latest live version for a soft delete, the
		// latest one at all for a permanent one.
		_, v, err := s.resolveVersion(subj, num, permanent || num != Latest)
		if err != nil {
			return nil, err
		}
		switch {
		case permanent && !v.deleted:
			return nil, errorf(http.StatusNotFound, codeVersionNotSoftDeleted, "Subject '%s' Version %d was not deleted first before being permanently deleted", subj, v.num)
		case !permanent && v.deleted:
			return nil, errorf(http.StatusNotFound, codeVersionSoftDeleted, "Subject '%s' Version %d was soft deleted.Set permanent=true to delete permanently", subj, v.num)
		}
		deletedNum = v.num
		return []pending{{evVersionDeleted, deleted{Subject: subj, Version: v.num, Permanent: permanent}}}, nil
	})
	return deletedNum, err
}

func invalidLevel(l Level) error {
	return errorf(http.StatusUnprocessableEntity, codeInvalidLevel, "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive (got %q)", l)
}

// SetLevel sets the compatibility level of subj, or the global one if subj
// is "".
func (r *Registry) SetLevel(ctx context.Context, subj string, l Level) error {
	l = Level(strings.ToUpper(string(l)))
	if !l.Valid() {
		return invalidLevel(l)
	}
	if subj != "" {
		if err := validSubject(subj); err != nil {
			return err
		}
	}
	return r.write(ctx, func(s *state) ([]pending, error) {
		if subj == "" && s.global == l || subj != "" && s.subjects[subj] != nil && s.subjects[subj].level == l {
			return nil, nil
		}
		if subj != "" && s.subjects[subj] == nil && len(s.subjects) >= r.opts.MaxSubjects {
			return nil, errorf(http.StatusUnprocessableEntity, codeNotPermitted, "Operation not permitted: the registry holds %d subjects, its limit", len(s.subjects))
		}
		return []pending{{evConfigSet, configSet{Subject: subj, Level: l}}}, nil
	})
}

// DeleteLevel removes the level of subj (which then follows the global
// one), or resets the global level to DefaultLevel if subj is "", and
// returns the level that was set.
func (r *Registry) DeleteLevel(ctx context.Context, subj string) (Level, error) {
	var old Level
	err := r.write(ctx, func(s *state) ([]pending, error) {
		if subj == "" {
			old = s.level("")
			if s.global == "" {
				return nil, nil
			}
		} else {
			sub := s.subjects[subj]
			if sub == nil {
				return nil, errSubjectNotFound(subj)
			}
			if sub.level == "" {
				return nil, errorf(http.StatusNotFound, codeSubjectLevelNotConfigured, "Subject '%s' does not have subject-level compatibility configured", subj)
			}
			old = sub.level
		}
		return []pending{{evConfigDeleted, configSet{Subject: subj}}}, nil
	})
	return old, err
}

// Level returns the level that applies to subj ("" for the global one).
func (r *Registry) Level(subj string) Level {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.st.level(subj)
}

// SubjectLevel returns the level set on subj itself, if any.
func (r *Registry) SubjectLevel(ctx context.Context, subj string) (Level, bool) {
	var l Level
	_ = r.read(ctx, func(s *state) error {
		if sub := s.subjects[subj]; sub != nil && sub.level != "" {
			l = sub.level
			return nil
		}
		return errSubjectNotFound(subj) // not found: catch up once
	})
	return l, l != ""
}

// Mode returns the registry's mode.
func (r *Registry) Mode() string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.st.mode
}

// SetMode sets the registry's mode. IMPORT (registering with given ids) is
// not supported.
func (r *Registry) SetMode(ctx context.Context, mode string) error {
	switch mode {
	case ModeReadWrite, ModeReadOnly, ModeReadOnlyOverride:
	case modeImport:
		return errorf(http.StatusUnprocessableEntity, codeNotPermitted, "Operation not permitted: IMPORT mode is not supported by this registry")
	default:
		return errorf(http.StatusUnprocessableEntity, codeInvalidMode, "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE (got %q)", mode)
	}
	return r.write(ctx, func(s *state) ([]pending, error) {
		if s.mode == mode {
			return nil, nil
		}
		return []pending{{evModeSet, modeSet{Mode: mode}}}, nil
	})
}

// followRetry is how long the follower waits before subscribing again
// after its subscription failed.
const followRetry = time.Second
