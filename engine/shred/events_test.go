package shred_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/eventstore/pgstore"
	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/engine/projection"
	"github.com/logbook/logbook/engine/shred"
	"github.com/logbook/logbook/internal/testenv"
)

// The domain of the test: customers whose name and delivery addresses are
// personal data, sealed under the customer's key in the events and in
// the aggregate's state (and so in its snapshots).
type customer struct {
	Name   shred.Sealed `json:"name"`
	ShipTo shred.Sealed `json:"ship_to"`
	Orders int          `json:"orders"`
}

type custCmd interface{ isCmd() }
type register struct{ Name shred.Sealed }
type order struct {
	Item   string
	ShipTo shred.Sealed
}

func (register) isCmd() {}
func (order) isCmd()    {}

type custEvent interface{ isEvent() }
type registered struct {
	Name shred.Sealed `json:"name"`
	Note string       `json:"note"` // not personal: kept in clear
}
type ordered struct {
	Item   string       `json:"item"`
	ShipTo shred.Sealed `json:"ship_to"`
	Note   string       `json:"note"`
}

func (registered) isEvent() {}
func (ordered) isEvent()    {}

// customers is the aggregate: Decide and Evolve stay pure, since the
// application seals the personal fields before the command is decided.
func customers(store eventstore.Store) (*aggregate.Runtime[customer, custCmd, custEvent], error) {
	return aggregate.New(store, aggregate.Definition[customer, custCmd, custEvent]{
		Kind:    "customer",
		Initial: func(string) customer { return customer{} },
		Decide: func(c customer, cmd custCmd) ([]custEvent, error) {
			switch cmd := cmd.(type) {
			case register:
				return []custEvent{registered{Name: cmd.Name, Note: "registered"}}, nil
			case order:
				return []custEvent{ordered{Item: cmd.Item, ShipTo: cmd.ShipTo, Note: cmd.Item}}, nil
			}
			return nil, fmt.Errorf("unknown command %T", cmd)
		},
		Evolve: func(c customer, ev custEvent) customer {
			switch ev := ev.(type) {
			case registered:
				c.Name = ev.Name
			case ordered:
				c.Orders++
				c.ShipTo = ev.ShipTo
			}
			return c
		},
		Events: aggregate.NewJSONCodec[custEvent]().
			Register("Registered", 1, registered{}).
			Register("Ordered", 1, ordered{}),
		Snapshots:     aggregate.JSONSnapshots[customer]{Version: 1},
		SnapshotEvery: 2,
	}, aggregate.Options{})
}

// person is a data subject of the test and the personal data it puts in
// the log, distinct per run so that no earlier run's bytes are found.
type person struct {
	id, subject  string
	name, street string
	note         string // a clear string of theirs: the scans' control
}

func newPerson(label string) person {
	r := randHex(6)
	return person{
		id:      label + r,
		subject: "customer/" + label + r,
		name:    "Name-of-" + label + "-" + randHex(8),
		street:  "Street-of-" + label + "-" + randHex(8),
		note:    "clear-item-of-" + label + "-" + randHex(8),
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// secrets are the person's personal data, which must be found nowhere.
func (p person) secrets() []string { return []string{p.name, p.street} }

// backend is a store under test and a raw reader of everything it keeps.
type backend struct {
	store eventstore.Store
	keys  *shred.Keyring
	raw   func(t *testing.T) []byte // every byte the store (and keyring) keep on disk or in rows
}

var master = func() shred.MasterKey {
	k, err := shred.ParseMasterKey("1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100")
	if err != nil {
		panic(err)
	}
	return k
}()

func pebbleBackend(t *testing.T) backend {
	dir, keysDir := t.TempDir(), t.TempDir()
	st, err := pebblestore.Open(dir, pebblestore.Options{}) // synced: the raw scan reads what an append wrote
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	keys, err := shred.OpenDir(context.Background(), keysDir, master, shred.DirOptions{Options: shred.Options{Audit: st}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = keys.Close() })
	return backend{store: st, keys: keys, raw: func(t *testing.T) []byte { return readTree(t, dir, keysDir) }}
}

// readTree is every file under the directories, read raw.
func readTree(t *testing.T, dirs ...string) []byte {
	var all bytes.Buffer
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if errors.Is(err, fs.ErrNotExist) { // removed by a compaction meanwhile
				return nil
			}
			all.Write(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return all.Bytes()
}

func postgresBackend(t *testing.T) backend {
	url, schema := testenv.SchemaURL(t)
	ctx := context.Background()
	st, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	keys, err := shred.OpenPostgres(ctx, pool, master, shred.PostgresOptions{Table: schema + ".subject_keys", Options: shred.Options{Audit: st}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = keys.Close() })
	// Every row of every table of the schema, as text (bytea as hex).
	raw := func(t *testing.T) []byte {
		rows, err := pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1`, schema)
		if err != nil {
			t.Fatal(err)
		}
		tables, err := pgxCollectStrings(rows)
		if err != nil {
			t.Fatal(err)
		}
		if len(tables) < 2 {
			t.Fatalf("schema %s has tables %v", schema, tables)
		}
		var all bytes.Buffer
		for _, tbl := range tables {
			var text *string
			if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT string_agg(t::text, E'\n') FROM %s.%q t`, schema, tbl)).Scan(&text); err != nil {
				t.Fatal(err)
			}
			if text != nil {
				all.WriteString(*text)
			}
		}
		return all.Bytes()
	}
	return backend{store: st, keys: keys, raw: raw}
}

func pgxCollectStrings(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close()
}) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// contains reports whether raw holds s, as is or in hexadecimal (how
// PostgreSQL prints a bytea).
func contains(raw []byte, s string) bool {
	return bytes.Contains(raw, []byte(s)) || bytes.Contains(raw, []byte(hex.EncodeToString([]byte(s))))
}

// A view of the customers' names and last addresses, opening the sealed
// fields as it applies the events: what a read model that serves
// personal data does.
type directory struct {
	names, streets map[string]string // by customer id
}

func directoryView(keys *shred.Keyring) func(context.Context) (*projection.Memory[directory], error) {
	return func(context.Context) (*projection.Memory[directory], error) {
		return projection.NewMemory(directory{names: map[string]string{}, streets: map[string]string{}}, func(d *directory, ev eventstore.Event) error {
			id := strings.TrimPrefix(ev.Stream, "customer-")
			ctx := context.Background()
			switch ev.Type {
			case "Registered":
				var e registered
				if err := json.Unmarshal(ev.Data, &e); err != nil {
					return err
				}
				name, err := e.Name.Show(ctx, keys)
				d.names[id] = name
				return err
			case "Ordered":
				var e ordered
				if err := json.Unmarshal(ev.Data, &e); err != nil {
					return err
				}
				street, err := e.ShipTo.Show(ctx, keys)
				d.streets[id] = street
				return err
			}
			return nil
		}), nil
	}
}

// TestSealedEventFieldsForgottenEverywhere puts personal fields of two
// customers, A and B, sealed under their keys, into events; the events go
// into the store, an aggregate's snapshots, a view and a Kafka topic.
// Forgetting A leaves every event where it was, in its order, byte for
// byte, but none of A's fields opens any more — from the store's events,
// from the snapshot, from the view rebuilt from the log, from the topic —
// and A's personal data is in none of their raw bytes; B's fields still
// open; the audit event names A by keyed hash only.
func TestSealedEventFieldsForgottenEverywhere(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(*testing.T) backend
	}{{"pebble", pebbleBackend}, {"postgres", postgresBackend}} {
		t.Run(b.name, func(t *testing.T) { forgetEverywhere(t, b.open(t)) })
	}
}

func forgetEverywhere(t *testing.T, be backend) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, keys := be.store, be.keys
	a, b := newPerson("a"), newPerson("b")
	people := []person{a, b}

	// The application seals the personal fields, then the aggregate
	// decides on commands that carry them sealed.
	rt, err := customers(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range people {
		name, err := keys.SealField(ctx, p.subject, "name", p.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.Execute(ctx, p.id, register{Name: name}); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			street, err := keys.SealField(ctx, p.subject, "ship_to", p.street)
			if err != nil {
				t.Fatal(err)
			}
			item := fmt.Sprintf("item-%d", i)
			if i == 2 {
				item = p.note
			}
			if _, err := rt.Execute(ctx, p.id, order{Item: item, ShipTo: street}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rt.Close()
	// Snapshots are saved off the command's path: wait for the one at 4.
	for _, p := range people {
		deadline := time.Now().Add(10 * time.Second)
		for {
			s, ok, err := st.LoadSnapshot(ctx, "customer-"+p.id)
			if err != nil {
				t.Fatal(err)
			}
			if ok && s.Seq == 4 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no snapshot of %s at 4: %+v, %v", p.id, s, ok)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// The view, live, holds both names.
	live, err := projection.StartLive(ctx, st, directoryView(keys), projection.Options{Name: "directory", Filter: eventstore.Tagged("customer")})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := live.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	live.Current().Read(func(d *directory, _ uint64) {
		for _, p := range people {
			if d.names[p.id] != p.name || d.streets[p.id] != p.street {
				t.Fatalf("view before forgetting: %q %q, want %q %q", d.names[p.id], d.streets[p.id], p.name, p.street)
			}
		}
	})

	// The topic gets the log.
	kcfg := kafkabus.Config{Brokers: testenv.Kafka(t)}
	topic := "t-shred-" + randHex(6)
	if err := kafkabus.EnsureTopic(ctx, kcfg, topic, 3, -1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl, err := kafkabus.NewClient(kcfg)
		if err != nil {
			return
		}
		defer cl.Close()
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		_, _ = kadm.NewClient(cl).DeleteTopic(dctx, topic)
	})
	pub := kafkabus.NewPublisher(st, kafkabus.PublisherConfig{Config: kcfg, Topic: topic, TransactionalID: "tx-" + topic, Partitions: 3, MaxBackoff: 500 * time.Millisecond})
	head, err := st.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = pub.Run(pctx) }()
	for deadline := time.Now().Add(30 * time.Second); pub.LastPosition() < head; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("publisher at %d, head %d", pub.LastPosition(), head)
		}
	}
	pcancel()
	wg.Wait()

	before := readAll(ctx, t, st)
	if len(before) != 8 {
		t.Fatalf("%d events in the log, want 8", len(before))
	}
	// The scans' control: the raw bytes show what is in clear, so that
	// not finding the personal data means something.
	raw := be.raw(t)
	for _, p := range people {
		if !contains(raw, p.note) {
			t.Fatalf("the raw scan of the store does not find the clear %q: it reads nothing", p.note)
		}
	}

	// Forget A.
	f, err := keys.Forget(ctx, a.subject, "test")
	if err != nil {
		t.Fatal(err)
	}
	if f.KeyVersion != 1 || f.Position == 0 {
		t.Fatalf("Forget = %+v", f)
	}

	// The log: the same events, byte for byte, at the same positions,
	// then the audit event.
	after := readAll(ctx, t, st)
	if len(after) != len(before)+1 {
		t.Fatalf("%d events after forgetting, %d before: want one more (the audit event)", len(after), len(before))
	}
	for i, ev := range before {
		got := after[i]
		if got.Position != ev.Position || got.Stream != ev.Stream || got.Seq != ev.Seq || got.ID != ev.ID || got.Type != ev.Type || !bytes.Equal(got.Data, ev.Data) {
			t.Fatalf("event %d changed by forgetting: %+v, was %+v", i, got, ev)
		}
	}
	audit := after[len(after)-1]
	if audit.Stream != shred.AuditStream || audit.Type != shred.TypeSubjectForgotten || audit.Position != f.Position {
		t.Fatalf("last event %s %s at %d, want the audit event at %d", audit.Stream, audit.Type, audit.Position, f.Position)
	}
	if !bytes.Contains(audit.Data, []byte(keys.SubjectHash(a.subject))) {
		t.Errorf("audit event %s does not name A's keyed hash", audit.Data)
	}
	for _, s := range append(a.secrets(), a.id, a.note) {
		if bytes.Contains(audit.Data, []byte(s)) {
			t.Errorf("audit event %s holds %q of A's", audit.Data, s)
		}
	}

	// The store's events: A's fields are forgotten, B's open.
	checkEvents(ctx, t, keys, "store", after[:len(before)], a, b)

	// The snapshot: the aggregate's state read back by a fresh runtime
	// (from the snapshot, at version 4), and the snapshot's bytes.
	rt2, err := customers(st)
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	for _, p := range people {
		snap, ok, err := st.LoadSnapshot(ctx, "customer-"+p.id)
		if err != nil || !ok {
			t.Fatalf("snapshot of %s: %v %v", p.id, ok, err)
		}
		for _, s := range p.secrets() {
			if contains(snap.Data, s) {
				t.Errorf("snapshot of %s holds %q in clear", p.id, s)
			}
		}
		var state customer
		if err := json.Unmarshal(snap.Data[bytes.IndexByte(snap.Data, '{'):], &state); err != nil {
			t.Fatalf("snapshot of %s: %v", p.id, err)
		}
		fresh, _, err := rt2.State(ctx, p.id)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []customer{state, fresh} {
			checkField(ctx, t, keys, "snapshot", c.Name, p, p.name, p == a)
			checkField(ctx, t, keys, "snapshot", c.ShipTo, p, p.street, p == a)
		}
	}

	// The view rebuilt from the log: A's fields shown forgotten.
	if err := live.Rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	live.Current().Read(func(d *directory, _ uint64) {
		if d.names[a.id] != shred.ForgottenText || d.streets[a.id] != shred.ForgottenText {
			t.Errorf("rebuilt view shows A as %q %q, want %q", d.names[a.id], d.streets[a.id], shred.ForgottenText)
		}
		if d.names[b.id] != b.name || d.streets[b.id] != b.street {
			t.Errorf("rebuilt view shows B as %q %q", d.names[b.id], d.streets[b.id])
		}
	})

	// The topic: every event there, none of A's fields opens.
	recs, err := kafkabus.ReadTopic(ctx, kcfg, topic)
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]eventstore.Event, len(recs))
	for i, r := range recs {
		evs[i] = r.Event
	}
	if len(evs) != len(before) {
		t.Fatalf("%d events on the topic, want %d", len(evs), len(before))
	}
	checkEvents(ctx, t, keys, "topic", evs, a, b)
	values, err := kafkabus.ReadRecords(ctx, kcfg, topic)
	if err != nil {
		t.Fatal(err)
	}
	var topicRaw bytes.Buffer
	for _, r := range values {
		topicRaw.Write(r.Key)
		topicRaw.Write(r.Value)
	}
	for _, p := range people {
		if !contains(topicRaw.Bytes(), p.note) {
			t.Fatalf("the raw scan of the topic does not find the clear %q", p.note)
		}
		for _, s := range p.secrets() {
			if contains(topicRaw.Bytes(), s) {
				t.Errorf("topic holds %q in clear", s)
			}
		}
	}

	// Everything the store and the keyring keep, read raw.
	raw = be.raw(t)
	for _, p := range people {
		for _, s := range p.secrets() {
			if contains(raw, s) {
				t.Errorf("the store's raw bytes hold %q in clear", s)
			}
		}
	}

	// Nothing new is sealed for A.
	if _, err := keys.SealField(ctx, a.subject, "name", a.name); !errors.Is(err, shred.ErrForgotten) {
		t.Errorf("SealField for A after forgetting: %v, want ErrForgotten", err)
	}
}

func readAll(ctx context.Context, t *testing.T, st eventstore.Store) []eventstore.Event {
	evs, err := st.ReadAll(ctx, 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// checkEvents opens every sealed field of the customers' events.
func checkEvents(ctx context.Context, t *testing.T, keys *shred.Keyring, where string, evs []eventstore.Event, a, b person) {
	t.Helper()
	seen := 0
	for _, ev := range evs {
		p := b
		if ev.Stream == "customer-"+a.id {
			p = a
		}
		switch ev.Type {
		case "Registered":
			var e registered
			if err := json.Unmarshal(ev.Data, &e); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			checkField(ctx, t, keys, where, e.Name, p, p.name, p == a)
		case "Ordered":
			var e ordered
			if err := json.Unmarshal(ev.Data, &e); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			checkField(ctx, t, keys, where, e.ShipTo, p, p.street, p == a)
		default:
			continue
		}
		seen++
		for _, s := range append(a.secrets(), b.secrets()...) {
			if contains(ev.Data, s) {
				t.Errorf("%s: event %d holds %q in clear", where, ev.Position, s)
			}
		}
	}
	if seen != 8 {
		t.Fatalf("%s: %d customer events, want 8", where, seen)
	}
}

// checkField opens a sealed field: forgotten, or the plaintext.
func checkField(ctx context.Context, t *testing.T, keys *shred.Keyring, where string, s shred.Sealed, p person, want string, forgotten bool) {
	t.Helper()
	if s.IsZero() || s.Subject() != p.subject {
		t.Fatalf("%s: field %v, want one of %s", where, s, p.subject)
	}
	got, err := s.Open(ctx, keys)
	switch {
	case forgotten && !errors.Is(err, shred.ErrForgotten):
		t.Errorf("%s: %s of forgotten %s opens: %q, %v", where, s.Field(), p.id, got, err)
	case !forgotten && (err != nil || got != want):
		t.Errorf("%s: %s of %s = %q, %v; want %q", where, s.Field(), p.id, got, err, want)
	}
}
