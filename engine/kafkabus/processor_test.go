package kafkabus

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/logbook/logbook/engine/eventstore"
)

// member runs one Processor and records what it handled.
type member struct {
	p    *Processor
	mu   sync.Mutex
	evs  []eventstore.Event
	stop func()
}

func startMember(t *testing.T, cfg Config, group, topic string, st eventstore.Store) *member {
	m := &member{}
	m.p = NewProcessor(cfg, group, topic, st, func(_ context.Context, batch []eventstore.Event) error {
		m.mu.Lock()
		m.evs = append(m.evs, batch...)
		m.mu.Unlock()
		return nil
	}, WithMaxBatch(100))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.p.Run(ctx) }()
	var once sync.Once
	m.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("processor: %v", err)
			}
		})
	}
	t.Cleanup(m.stop)
	return m
}

func (m *member) handled() []eventstore.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]eventstore.Event(nil), m.evs...)
}

func (m *member) holds() int {
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	return len(m.p.parts)
}

// checkHandled waits until the members together handled exactly want —
// each event once, by one member, each stream in sequence order without
// gaps — and returns what each handled.
func checkHandled(t *testing.T, want []eventstore.Event, members ...*member) [][]eventstore.Event {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("the processors to handle %d events", len(want)), func() bool {
		n := 0
		for _, m := range members {
			n += len(m.handled())
		}
		return n >= len(want)
	})
	var got [][]eventstore.Event
	for _, m := range members {
		got = append(got, m.handled())
	}
	wanted := map[uint64]eventstore.Event{}
	for _, ev := range want {
		wanted[ev.Position] = ev
	}
	seen := map[uint64]int{}
	for i, evs := range got {
		last := map[string]uint64{}
		for _, ev := range evs {
			if w, ok := wanted[ev.Position]; !ok || w.ID != ev.ID {
				t.Errorf("member %d handled position %d (%s seq %d), not one of the events expected", i, ev.Position, ev.Stream, ev.Seq)
			}
			if seen[ev.Position]++; seen[ev.Position] > 1 {
				t.Errorf("position %d handled twice", ev.Position)
			}
			if l, ok := last[ev.Stream]; ok && ev.Seq != l+1 {
				t.Errorf("member %d: stream %s seq %d after %d", i, ev.Stream, ev.Seq, l)
			}
			last[ev.Stream] = ev.Seq
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d distinct events handled, want %d", len(seen), len(want))
	}
	if t.Failed() {
		t.FailNow()
	}
	return got
}

// deleteRecords removes every partition's records below end minus keep, as
// retention would.
func deleteRecords(t *testing.T, cfg Config, topic string, keep int64) {
	t.Helper()
	ctx := context.Background()
	cl, err := cfg.client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	del := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) { del.AddOffset(topic, o.Partition, max(0, o.Offset-keep), -1) })
	res, err := adm.DeleteRecords(ctx, del)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Two processors in one group share the partitions and together handle
// every event once; restarted after retention deleted records past their
// committed offsets, they read what is gone from the store; a new group
// whose topic lost its early records gets them from the store too.
func TestProcessorsShareAndFillGaps(t *testing.T) {
	cfg := testConfig(t)
	const partitions = 4
	topic := newTopic(t, cfg, partitions)
	st := openStore(t, t.TempDir())
	ctx := context.Background()
	pub := NewPublisher(st, testPublisher(cfg, topic, uniqueName(t, "tx"), partitions))
	startPublisher(t, pub)
	published := func() {
		t.Helper()
		waitFor(t, 20*time.Second, "the publisher to reach the head", func() bool { return pub.LastPosition() == head(t, st) })
	}
	group := uniqueName(t, "g")

	// Both members hold partitions before anything is published, so both
	// get work.
	a, b := startMember(t, cfg, group, topic, st), startMember(t, cfg, group, topic, st)
	waitFor(t, 30*time.Second, "both members to hold partitions", func() bool {
		return a.holds() > 0 && b.holds() > 0 && a.holds()+b.holds() == partitions
	})
	writeEvents(t, ctx, st, "s", 40, 4, 800)
	published()
	phase1 := readLog(t, st)
	got := checkHandled(t, phase1, a, b)
	t.Logf("phase 1: members handled %d and %d events", len(got[0]), len(got[1]))
	if len(got[0]) == 0 || len(got[1]) == 0 {
		t.Fatalf("members handled %d and %d events: the partitions were not shared", len(got[0]), len(got[1]))
	}
	a.stop()
	b.stop()

	// Phase 2: more events, then retention deletes all but the last few
	// records of each partition, past the group's committed offsets.
	writeEvents(t, ctx, st, "s", 40, 4, 800)
	published()
	deleteRecords(t, cfg, topic, 30)
	phase2 := readLog(t, st)[len(phase1):]
	a2, b2 := startMember(t, cfg, group, topic, st), startMember(t, cfg, group, topic, st)
	checkHandled(t, phase2, a2, b2)
	// The counters move just after handle returns.
	waitFor(t, 5*time.Second, "the fill counters", func() bool { return a2.p.Handled()+b2.p.Handled() >= uint64(len(phase2)) })
	filled := a2.p.Filled() + b2.p.Filled()
	t.Logf("phase 2: %d of %d events read from the store", filled, len(phase2))
	if filled == 0 || filled >= uint64(len(phase2)) {
		t.Errorf("%d of %d events read from the store; want the deleted ones", filled, len(phase2))
	}

	// A new group: everything before the log start comes from the store.
	c := startMember(t, cfg, uniqueName(t, "g"), topic, st)
	all := readLog(t, st)
	checkHandled(t, all, c)
	waitFor(t, 5*time.Second, "the fill counters", func() bool { return c.p.Handled() >= uint64(len(all)) })
	if c.p.Filled() == 0 {
		t.Error("the new group read nothing from the store")
	}
	t.Logf("new group: %d of %d events read from the store", c.p.Filled(), head(t, st))
}

// A topic the brokers do not know yet (as just after it was created,
// before every broker's metadata has it) is waited for, not an error:
// a processor started then would otherwise stop at once.
func TestPartitionCountWaitsForANewTopic(t *testing.T) {
	cfg := testConfig(t)
	topic := uniqueName(t, "t")
	cl, err := cfg.client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	created := make(chan error, 1)
	go func() {
		time.Sleep(time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		created <- EnsureTopic(ctx, cfg, topic, 3, -1)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteTopic(ctx, topic)
	})
	n, err := partitionCount(context.Background(), kadm.NewClient(cl), topic)
	if cerr := <-created; cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil || n != 3 {
		t.Fatalf("partitionCount of a topic created a second later: %d, %v; want 3", n, err)
	}
}
