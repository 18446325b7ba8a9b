package aggregate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
)

// A bank account: enough domain to have a rule (no overdraft), a create
// command and more than one event type.

type account struct {
	Owner   string `json:"owner"`
	Balance int    `json:"balance"`
	Opened  bool   `json:"opened"`
}

type (
	open     struct{ Owner string }
	deposit  struct{ Amount int }
	withdraw struct{ Amount int }
	nothing  struct{}
)

type (
	opened    struct{ Owner string }
	deposited struct{ Amount int }
	withdrew  struct{ Amount int }
)

var errOverdraft = errors.New("insufficient funds")

func decide(s account, cmd any) ([]any, error) {
	switch c := cmd.(type) {
	case open:
		if s.Opened {
			return nil, errors.New("already open")
		}
		return []any{opened{Owner: c.Owner}}, nil
	case deposit:
		if !s.Opened {
			return nil, errors.New("not open")
		}
		return []any{deposited{Amount: c.Amount}}, nil
	case withdraw:
		if s.Balance < c.Amount {
			return nil, errOverdraft
		}
		return []any{withdrew{Amount: c.Amount}}, nil
	case nothing:
		return nil, nil
	}
	return nil, fmt.Errorf("unknown command %T", cmd)
}

func evolve(s account, ev any) account {
	switch e := ev.(type) {
	case opened:
		s.Opened, s.Owner = true, e.Owner
	case deposited:
		s.Balance += e.Amount
	case withdrew:
		s.Balance -= e.Amount
	}
	return s
}

func codec() *aggregate.JSONCodec[any] {
	return aggregate.NewJSONCodec[any]().
		Register("AccountOpened", 1, opened{}).
		Register("Deposited", 1, deposited{}).
		Register("Withdrew", 1, withdrew{})
}

func definition() aggregate.Definition[account, any, any] {
	return aggregate.Definition[account, any, any]{
		Kind: "account", Decide: decide, Evolve: evolve, Events: codec(),
	}
}

func openStore(t *testing.T) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newRuntime(t *testing.T, store eventstore.Store, def aggregate.Definition[account, any, any], opts aggregate.Options) *aggregate.Runtime[account, any, any] {
	t.Helper()
	rt, err := aggregate.New(store, def, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func mustExec(t *testing.T, rt *aggregate.Runtime[account, any, any], id string, cmd any, opts ...aggregate.Option) aggregate.Result[any] {
	t.Helper()
	r, err := rt.Execute(context.Background(), id, cmd, opts...)
	if err != nil {
		t.Fatalf("execute %T on %s: %v", cmd, id, err)
	}
	return r
}

func TestExecuteDecidesAppendsAndEvolves(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	rt := newRuntime(t, store, definition(), aggregate.Options{})

	created, err := rt.Create(ctx, open{Owner: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventstore.ParseID(created.ID); err != nil || created.Version != 1 || created.FirstSeq != 1 || created.Position == 0 {
		t.Fatalf("create: %+v (id parse: %v)", created, err)
	}
	id := created.ID
	r := mustExec(t, rt, id, deposit{Amount: 70})
	if r.Version != 2 || r.FirstSeq != 2 || len(r.Events) != 1 || r.Events[0] != (deposited{Amount: 70}) {
		t.Fatalf("deposit: %+v", r)
	}
	_, err = rt.Execute(ctx, id, withdraw{Amount: 100})
	if !errors.Is(err, errOverdraft) {
		t.Fatalf("overdraft: got %v, want the domain error unchanged", err)
	}
	if v, _ := store.StreamVersion(ctx, rt.Stream(id)); v != 2 {
		t.Fatalf("a refused command wrote something: stream at %d", v)
	}
	r = mustExec(t, rt, id, nothing{})
	if r.Version != 2 || len(r.Events) != 0 || r.Position != 0 {
		t.Fatalf("no-op: %+v", r)
	}
	st, v, err := rt.State(ctx, id)
	if err != nil || v != 2 || st != (account{Owner: "ada", Balance: 70, Opened: true}) {
		t.Fatalf("state: %+v v%d %v", st, v, err)
	}
	if _, _, err := rt.State(ctx, "nobody"); !errors.Is(err, aggregate.ErrNotFound) {
		t.Fatalf("state of unknown: %v", err)
	}
	evs, _ := store.ReadStream(ctx, rt.Stream(id), 1, 10)
	if len(evs) != 2 || evs[0].Type != "AccountOpened" || evs[1].Type != "Deposited" || evs[1].Tags[0] != "account" {
		t.Fatalf("stored events: %+v", evs)
	}

	// A new runtime (a restart) rebuilds the state from the store.
	rt2 := newRuntime(t, store, definition(), aggregate.Options{})
	st, v, err = rt2.State(ctx, id)
	if err != nil || v != 2 || st.Balance != 70 {
		t.Fatalf("state after restart: %+v v%d %v", st, v, err)
	}
}

func TestExpectedVersion(t *testing.T) {
	rt := newRuntime(t, openStore(t), definition(), aggregate.Options{})
	mustExec(t, rt, "a", open{Owner: "x"})
	mustExec(t, rt, "a", deposit{Amount: 1}, aggregate.WithExpectedVersion(1))
	_, err := rt.Execute(context.Background(), "a", deposit{Amount: 1}, aggregate.WithExpectedVersion(1))
	var ce *eventstore.ConflictError
	if !errors.As(err, &ce) || ce.Actual != 2 {
		t.Fatalf("stale expected version: %v", err)
	}
}

func TestIdempotencyKey(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	def := definition()
	def.Snapshots, def.SnapshotEvery = aggregate.JSONSnapshots[account]{Version: 1}, 3
	rt := newRuntime(t, store, def, aggregate.Options{})

	first, err := rt.Create(ctx, open{Owner: "k"}, aggregate.WithIdempotencyKey("create-1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := rt.Create(ctx, open{Owner: "k"}, aggregate.WithIdempotencyKey("create-1"))
	if err != nil || !again.Duplicate || again.ID != first.ID || again.Version != first.Version || again.Position != first.Position {
		t.Fatalf("retried create: %+v %v; first %+v", again, err, first)
	}
	id := first.ID
	d1 := mustExec(t, rt, id, deposit{Amount: 5}, aggregate.WithIdempotencyKey("d1"))
	mustExec(t, rt, id, deposit{Amount: 1})
	dup := mustExec(t, rt, id, deposit{Amount: 5}, aggregate.WithIdempotencyKey("d1"))
	if !dup.Duplicate || dup.Version != d1.Version || dup.FirstSeq != d1.FirstSeq || dup.Position != d1.Position {
		t.Fatalf("retry: %+v, original %+v", dup, d1)
	}
	for i := range 5 { // past a snapshot
		mustExec(t, rt, id, deposit{Amount: 1}, aggregate.WithIdempotencyKey("more-"+strconv.Itoa(i)))
	}
	// Snapshots are saved off the shard's path: wait for the one at 6.
	waitFor(t, func() bool {
		snap, ok, _ := store.LoadSnapshot(ctx, rt.Stream(id))
		return ok && snap.Seq >= 6
	})
	// Restarted runtimes: one replays from the snapshot, one from events.
	for _, d := range []aggregate.Definition[account, any, any]{def, definition()} {
		rt2 := newRuntime(t, store, d, aggregate.Options{})
		dup = mustExec(t, rt2, id, deposit{Amount: 5}, aggregate.WithIdempotencyKey("d1"))
		if !dup.Duplicate || dup.Version != d1.Version || dup.Position != d1.Position {
			t.Fatalf("retry after restart (snapshots %v): %+v, original %+v", d.Snapshots != nil, dup, d1)
		}
		st, _, _ := rt2.State(ctx, id)
		if st.Balance != 11 {
			t.Fatalf("balance %d, want 11: a retry was applied twice", st.Balance)
		}
	}
}

func TestOneWriterPerAggregate(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	rt := newRuntime(t, store, definition(), aggregate.Options{Shards: 4})
	const accounts, writers, each = 5, 32, 40
	for i := range accounts {
		mustExec(t, rt, "acc-"+strconv.Itoa(i), open{Owner: "o"})
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := rt.Execute(ctx, "acc-"+strconv.Itoa((w+i)%accounts), deposit{Amount: 1}); err != nil {
					failed.Add(1)
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for i := range accounts {
		st, v, err := rt.State(ctx, "acc-"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		total += st.Balance
		evs, _ := store.ReadStream(ctx, rt.Stream("acc-"+strconv.Itoa(i)), 1, 10000)
		if uint64(len(evs)) != v {
			t.Fatalf("stream has %d events, aggregate at version %d", len(evs), v)
		}
	}
	if total != writers*each || failed.Load() != 0 {
		t.Fatalf("total %d, want %d (%d failed)", total, writers*each, failed.Load())
	}
}

// Two runtimes on one store stand for two processes writing the same
// aggregates: optimistic concurrency must keep every stream consistent.
func TestTwoRuntimesNeverCorruptAStream(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	a := newRuntime(t, store, definition(), aggregate.Options{Shards: 2, MaxRetries: 50})
	b := newRuntime(t, store, definition(), aggregate.Options{Shards: 3, MaxRetries: 50})
	mustExec(t, a, "shared", open{Owner: "both"})
	var ok atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		rt := a
		if w%2 == 1 {
			rt = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				_, err := rt.Execute(ctx, "shared", deposit{Amount: 1})
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, eventstore.ErrVersionConflict):
				default:
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	evs, err := store.ReadStream(ctx, a.Stream("shared"), 1, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(evs)) != ok.Load()+1 {
		t.Fatalf("%d events stored, %d commands acknowledged (+1 open)", len(evs), ok.Load())
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("seq %d at index %d", e.Seq, i)
		}
	}
	// Each runtime's cache may lag the other's writes until its next
	// command; a fresh runtime must see exactly the stored sum.
	fresh := newRuntime(t, store, definition(), aggregate.Options{})
	st, v, _ := fresh.State(ctx, "shared")
	if st.Balance != int(ok.Load()) || v != uint64(len(evs)) {
		t.Fatalf("balance %d at v%d, want %d at v%d", st.Balance, v, ok.Load(), len(evs))
	}
	if ok.Load() < 300 {
		t.Fatalf("only %d of 400 commands succeeded with 50 retries", ok.Load())
	}
}

func TestCacheEvictionAndPassivation(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	reg := prometheus.NewRegistry()
	rt := newRuntime(t, store, definition(), aggregate.Options{Shards: 1, CacheSize: 2, IdleTimeout: 40 * time.Millisecond, Registerer: reg})
	for i := range 5 {
		mustExec(t, rt, "c"+strconv.Itoa(i), open{Owner: "o"})
		mustExec(t, rt, "c"+strconv.Itoa(i), deposit{Amount: i})
	}
	live := counterValue(t, reg, "logbook_aggregates_live")
	if live > 2 {
		t.Fatalf("%v aggregates live with a cache of 2", live)
	}
	misses := counterValue(t, reg, "logbook_aggregate_cache_misses_total")
	// c0 was evicted: using it again loads it, with the right state.
	st, v, err := rt.State(ctx, "c0")
	if err != nil || v != 2 || st.Balance != 0 || !st.Opened {
		t.Fatalf("reloaded c0: %+v v%d %v", st, v, err)
	}
	if counterValue(t, reg, "logbook_aggregate_cache_misses_total") != misses+1 {
		t.Fatal("reading an evicted aggregate did not load it")
	}
	deadline := time.Now().Add(5 * time.Second)
	for counterValue(t, reg, "logbook_aggregates_live") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("idle aggregates were not passivated")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := mustExec(t, rt, "c4", deposit{Amount: 1})
	if r.Version != 3 {
		t.Fatalf("after passivation: %+v", r)
	}
	if hits := counterValue(t, reg, "logbook_aggregate_cache_hits_total"); hits == 0 {
		t.Fatal("no cache hits counted")
	}
}

func TestSnapshotsAndUnreadableSnapshot(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	def := definition()
	def.Snapshots, def.SnapshotEvery = aggregate.JSONSnapshots[account]{Version: 1}, 10
	rt := newRuntime(t, store, def, aggregate.Options{})
	mustExec(t, rt, "s", open{Owner: "snap"})
	for range 24 {
		mustExec(t, rt, "s", deposit{Amount: 2})
	}
	var snap eventstore.Snapshot
	waitFor(t, func() bool {
		var ok bool
		snap, ok, _ = store.LoadSnapshot(ctx, rt.Stream("s"))
		return ok && snap.Seq == 20
	})
	counting := &countingStore{Store: store}
	rt2 := newRuntime(t, counting, def, aggregate.Options{})
	st, v, err := rt2.State(ctx, "s")
	if err != nil || v != 25 || st.Balance != 48 {
		t.Fatalf("from snapshot: %+v v%d %v", st, v, err)
	}
	if n := counting.read.Load(); n != 5 {
		t.Fatalf("loading from the snapshot at 20 read %d events, want 5", n)
	}
	// The state's schema moved on: the old snapshot is ignored, and the
	// aggregate is replayed from its first event.
	def.Snapshots = aggregate.JSONSnapshots[account]{Version: 2}
	reg := prometheus.NewRegistry()
	counting = &countingStore{Store: store}
	var logs bytes.Buffer
	rt3 := newRuntime(t, counting, def, aggregate.Options{Registerer: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	st, v, err = rt3.State(ctx, "s")
	if err != nil || v != 25 || st.Balance != 48 {
		t.Fatalf("after unreadable snapshot: %+v v%d %v", st, v, err)
	}
	if n := counting.read.Load(); n != 25 {
		t.Fatalf("full replay read %d events, want 25", n)
	}
	if counterValue(t, reg, "logbook_snapshots_unreadable_total") != 1 {
		t.Fatal("unreadable snapshot not counted")
	}
	// Logged through the runtime's own logger, not slog's default.
	if l := logs.String(); !strings.Contains(l, "ignoring unreadable snapshot") || !strings.Contains(l, "aggregate=account") {
		t.Fatalf("the runtime's logger got %q", l)
	}
}

func TestUpcasting(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	// Version 1 of Deposited carried cents as "amount_cents"; version 2 is
	// the current {"Amount": units}.
	old, _ := json.Marshal(map[string]int{"amount_cents": 1200})
	if _, err := store.Append(ctx, "account-u", eventstore.NoStream, []eventstore.NewEvent{
		{Type: "AccountOpened", Version: 1, Data: []byte(`{"Owner":"u"}`)},
		{Type: "Deposited", Version: 1, Data: old},
	}); err != nil {
		t.Fatal(err)
	}
	c := aggregate.NewJSONCodec[any]().
		Register("AccountOpened", 1, opened{}).
		Register("Deposited", 2, deposited{}).
		Register("Withdrew", 1, withdrew{}).
		Upcast("Deposited", 1, func(data []byte) ([]byte, error) {
			var v1 struct {
				Cents int `json:"amount_cents"`
			}
			if err := json.Unmarshal(data, &v1); err != nil {
				return nil, err
			}
			return json.Marshal(deposited{Amount: v1.Cents / 100})
		})
	def := definition()
	def.Events = c
	rt := newRuntime(t, store, def, aggregate.Options{})
	r := mustExec(t, rt, "u", deposit{Amount: 3})
	st, _, _ := rt.State(ctx, "u")
	if st.Balance != 15 || r.Version != 3 {
		t.Fatalf("upcast balance %d (want 15), version %d", st.Balance, r.Version)
	}
	evs, _ := store.ReadStream(ctx, "account-u", 3, 1)
	if evs[0].Version != 2 {
		t.Fatalf("new events are written at the current version, got %d", evs[0].Version)
	}
}

func TestCloseFinishesAcceptedCommands(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	rt, err := aggregate.New(store, definition(), aggregate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, rt, "z", open{Owner: "z"})
	var wg sync.WaitGroup
	var acked atomic.Int64
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := rt.Execute(ctx, "z", deposit{Amount: 1}); err == nil {
				acked.Add(1)
			} else if !errors.Is(err, aggregate.ErrClosed) {
				t.Error(err)
			}
		}()
	}
	time.Sleep(5 * time.Millisecond)
	rt.Close()
	wg.Wait()
	if _, err := rt.Execute(ctx, "z", deposit{Amount: 1}); !errors.Is(err, aggregate.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	v, _ := store.StreamVersion(ctx, "account-z")
	if int64(v) != acked.Load()+1 {
		t.Fatalf("stream at %d, %d deposits acknowledged", v, acked.Load())
	}
}

func TestDefinitionErrors(t *testing.T) {
	store := openStore(t)
	if _, err := aggregate.New(store, aggregate.Definition[account, any, any]{Kind: "x"}, aggregate.Options{}); err == nil {
		t.Fatal("incomplete definition accepted")
	}
	def := definition()
	def.SnapshotEvery = 5
	if _, err := aggregate.New(store, def, aggregate.Options{}); err == nil {
		t.Fatal("SnapshotEvery without codec accepted")
	}
	rt := newRuntime(t, store, definition(), aggregate.Options{})
	type unregistered struct{}
	bad := definition()
	bad.Kind = "bad"
	bad.Decide = func(account, any) ([]any, error) { return []any{unregistered{}}, nil }
	rtBad := newRuntime(t, store, bad, aggregate.Options{})
	if _, err := rtBad.Execute(context.Background(), "b", open{}); err == nil {
		t.Fatal("unregistered event type accepted")
	}
	if v, _ := store.StreamVersion(context.Background(), "bad-b"); v != 0 {
		t.Fatal("an unencodable command wrote events")
	}
	if _, err := rt.Execute(context.Background(), "", open{}); err == nil {
		t.Fatal("empty id accepted")
	}
}

type countingStore struct {
	eventstore.Store
	read atomic.Int64
}

func (c *countingStore) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]eventstore.Event, error) {
	evs, err := c.Store.ReadStream(ctx, stream, from, max)
	c.read.Add(int64(len(evs)))
	return evs, err
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			sum := 0.0
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
			return sum
		}
	}
	return 0
}

// An idempotency key names one command: the same key with another command
// is refused with ErrKeyReused, not answered as a duplicate of the first
// (whose answer would tell the client its second command took effect) —
// also after a restart, from the events and from a snapshot.
func TestIdempotencyKeyReusedForAnotherCommand(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	def := definition()
	def.Snapshots, def.SnapshotEvery = aggregate.JSONSnapshots[account]{Version: 1}, 2
	rt := newRuntime(t, store, def, aggregate.Options{})
	first, err := rt.Create(ctx, open{Owner: "k"}, aggregate.WithIdempotencyKey("create-1"))
	if err != nil {
		t.Fatal(err)
	}
	id := first.ID
	mustExec(t, rt, id, deposit{Amount: 5}, aggregate.WithIdempotencyKey("d1"))
	check := func(rt *aggregate.Runtime[account, any, any], when string) {
		t.Helper()
		if _, err := rt.Execute(ctx, id, deposit{Amount: 7}, aggregate.WithIdempotencyKey("d1")); !errors.Is(err, aggregate.ErrKeyReused) {
			t.Fatalf("%s: key d1 with another amount: %v, want ErrKeyReused", when, err)
		}
		if dup := mustExec(t, rt, id, deposit{Amount: 5}, aggregate.WithIdempotencyKey("d1")); !dup.Duplicate {
			t.Fatalf("%s: the same command again is not a duplicate: %+v", when, dup)
		}
		if st, _, _ := rt.State(ctx, id); st.Balance != 5 {
			t.Fatalf("%s: balance %d, want 5", when, st.Balance)
		}
	}
	check(rt, "live")
	mustExec(t, rt, id, nothing{})
	mustExec(t, rt, id, deposit{Amount: 0}) // version 3: a snapshot at 2
	waitFor(t, func() bool {
		snap, ok, _ := store.LoadSnapshot(ctx, rt.Stream(id))
		return ok && snap.Seq >= 2
	})
	check(newRuntime(t, store, def, aggregate.Options{}), "reloaded from a snapshot")
	check(newRuntime(t, store, definition(), aggregate.Options{}), "replayed from events")
}

// A Decide or Evolve that panics fails its command (or the aggregate's
// load, for a stored event Evolve cannot take) with ErrPanic; the runtime
// goes on serving other aggregates.
func TestPanicsFailTheCommandNotTheProcess(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	def := definition()
	decideOK, evolveOK := def.Decide, def.Evolve
	def.Decide = func(s account, cmd any) ([]any, error) {
		if d, ok := cmd.(deposit); ok && d.Amount == 13 {
			panic("unlucky")
		}
		return decideOK(s, cmd)
	}
	def.Evolve = func(s account, ev any) account {
		if d, ok := ev.(deposited); ok && d.Amount == 666 {
			panic("poison")
		}
		return evolveOK(s, ev)
	}
	var logs bytes.Buffer
	rt := newRuntime(t, store, def, aggregate.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	mustExec(t, rt, "a", open{Owner: "a"})
	if _, err := rt.Execute(ctx, "a", deposit{Amount: 13}); !errors.Is(err, aggregate.ErrPanic) {
		t.Fatalf("a panicking decide: %v, want ErrPanic", err)
	}
	if l := logs.String(); !strings.Contains(l, "panicked") || !strings.Contains(l, "stream=account-a") || !strings.Contains(l, "unlucky") {
		t.Fatalf("the panic was not logged with its stream: %q", l)
	}
	if _, err := rt.Execute(ctx, "a", deposit{Amount: 666}); !errors.Is(err, aggregate.ErrPanic) {
		t.Fatalf("a panicking evolve: %v, want ErrPanic", err)
	}
	mustExec(t, rt, "a", deposit{Amount: 1}) // the aggregate still serves
	// A poison event in the log (written by an earlier version of the
	// code): loading that aggregate fails, the others load.
	plain := newRuntime(t, store, definition(), aggregate.Options{})
	mustExec(t, plain, "b", open{Owner: "b"})
	mustExec(t, plain, "b", deposit{Amount: 666})
	rt2 := newRuntime(t, store, def, aggregate.Options{})
	if _, err := rt2.Execute(ctx, "b", deposit{Amount: 1}); !errors.Is(err, aggregate.ErrPanic) || !strings.Contains(err.Error(), "seq 2") {
		t.Fatalf("an aggregate with a poison event: %v", err)
	}
	mustExec(t, rt2, "a", deposit{Amount: 1})
}

// A Weight bounds the bytes the cache keeps of aggregates not in use, and
// keeps those in use however much they weigh.
func TestCacheBytesEvictsIdleAggregates(t *testing.T) {
	ctx := context.Background()
	for _, weighed := range []bool{true, false} {
		t.Run(fmt.Sprint("weighed=", weighed), func(t *testing.T) {
			store := openStore(t)
			reg := prometheus.NewRegistry()
			def := definition()
			if weighed {
				def.Weight = func(s account) int { return s.Balance }
			}
			rt := newRuntime(t, store, def, aggregate.Options{Shards: 1, CacheBytes: 100, IdleTimeout: -1, Registerer: reg})
			for _, id := range []string{"a", "b"} {
				mustExec(t, rt, id, open{Owner: "o"})
				mustExec(t, rt, id, deposit{Amount: 60})
			}
			if live := counterValue(t, reg, "logbook_aggregates_live"); live != 2 {
				t.Fatalf("%v aggregates live, want both: they are in use", live)
			}
			time.Sleep(1100 * time.Millisecond) // a is no longer in use
			mustExec(t, rt, "b", deposit{Amount: 1})
			// The shard answers a command before it trims its cache; a
			// request it serves after that is past the trim.
			if _, _, err := rt.State(ctx, "b"); err != nil {
				t.Fatal(err)
			}
			want := 1.0
			if !weighed {
				want = 2
			}
			if live := counterValue(t, reg, "logbook_aggregates_live"); live != want {
				t.Fatalf("%v aggregates live over a budget of 100 bytes, want %v", live, want)
			}
			st, v, err := rt.State(ctx, "a")
			if err != nil || v != 2 || st.Balance != 60 {
				t.Fatalf("a after eviction: %+v v%d %v", st, v, err)
			}
		})
	}
}
