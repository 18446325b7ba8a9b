package kafkabus

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/projection"
)

// countingStore counts the events its ReadAll returns: what a replica took
// from the fallback rather than from Kafka.
type countingStore struct {
	eventstore.Store
	read atomic.Uint64
}

func (c *countingStore) ReadAll(ctx context.Context, from uint64, max int) ([]eventstore.Event, error) {
	evs, err := c.Store.ReadAll(ctx, from, max)
	c.read.Add(uint64(len(evs)))
	return evs, err
}

// subscribeOnly runs a view on replica's subscription and reads everything
// else (the head, and the hole checks of WaitFor) from the store itself, as
// the replica would: the fallback's counter then counts only what the
// subscription took from it.
type subscribeOnly struct {
	eventstore.Store
	replica *ReplicaStore
}

func (s subscribeOnly) Subscribe(ctx context.Context, f eventstore.Filter, from uint64) (eventstore.Subscription, error) {
	return s.replica.Subscribe(ctx, f, from)
}

type logView = projection.Memory[[]eventstore.Event]

func newLogView() *logView {
	return projection.NewMemory[[]eventstore.Event](nil, func(s *[]eventstore.Event, ev eventstore.Event) error {
		*s = append(*s, ev)
		return nil
	})
}

// runView runs a log-copying view over store until the test ends.
func runView(t *testing.T, store eventstore.Store, name string) (*logView, *projection.Runner) {
	v := newLogView()
	r := projection.NewRunner(store, v, projection.Options{Name: name})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("view %s: %v", name, err)
		}
	})
	return v, r
}

// checkView waits until the view reached the store's head and compares it
// with the log.
func checkView(t *testing.T, st eventstore.Store, v *logView, r *projection.Runner, name string) {
	t.Helper()
	h := head(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.WaitFor(ctx, h); err != nil {
		t.Fatalf("view %s: waiting for %d: %v", name, h, err)
	}
	want := readLog(t, st)
	v.Read(func(got *[]eventstore.Event, pos uint64) {
		if len(*got) != len(want) {
			t.Fatalf("view %s holds %d events at position %d, the log %d", name, len(*got), pos, len(want))
		}
		for i := range want {
			if !reflect.DeepEqual((*got)[i], want[i]) {
				t.Fatalf("view %s, event %d:\n got %+v\nwant %+v", name, i+1, (*got)[i], want[i])
			}
		}
	})
}

// A view fed by the Kafka replica store equals one fed by the store:
// following live from the start, starting late (catch-up from the store,
// then Kafka), and after retention deleted the topic's early records (the
// fallback fills them in).
func TestReplicaStoreViewEqualsStoreView(t *testing.T) {
	cfg := testConfig(t)
	const partitions = 4
	topic := newTopic(t, cfg, partitions)
	st := openStore(t, t.TempDir())
	ctx := context.Background()
	p := NewPublisher(st, testPublisher(cfg, topic, uniqueName(t, "tx"), partitions))
	startPublisher(t, p)
	published := func() {
		t.Helper()
		waitFor(t, 20*time.Second, "the publisher to reach the head", func() bool { return p.LastPosition() == head(t, st) })
	}

	direct, directRunner := runView(t, st, "direct")
	live := &countingStore{Store: st}
	// Nothing is deleted from the topic here, so every position comes:
	// a gap wait far longer than the default 2 s keeps a partition that a
	// loaded machine (CI runs the packages side by side on 2 cores)
	// delivers late from sending its events to the fallback.
	liveView, liveRunner := runView(t, subscribeOnly{st, NewReplicaStore(cfg, topic, live, WithCatchUpWindow(-1), WithGapWait(time.Minute))}, "live")
	writeEvents(t, ctx, st, "a", 30, 4, 1200)
	published()
	checkView(t, st, direct, directRunner, "direct")
	checkView(t, st, liveView, liveRunner, "live")
	if n := live.read.Load(); n != 0 {
		t.Errorf("live replica read %d events from the fallback, want all from Kafka", n)
	}

	late := &countingStore{Store: st}
	lateView, lateRunner := runView(t, subscribeOnly{st, NewReplicaStore(cfg, topic, late)}, "late")
	writeEvents(t, ctx, st, "b", 30, 4, 800)
	published()
	checkView(t, st, lateView, lateRunner, "late")
	t.Logf("late replica: %d of %d events from the fallback", late.read.Load(), head(t, st))
	if n := late.read.Load(); n < 1000 || n >= head(t, st) {
		t.Errorf("late replica read %d events from the fallback; want the catch-up from it and the live ones from Kafka", n)
	}

	// Retention: delete the first half of every partition.
	cl, err := cfg.client()
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	del := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) { del.AddOffset(topic, o.Partition, o.Offset/2, -1) })
	if _, err := adm.DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	trimmed := &countingStore{Store: st}
	trimmedView, trimmedRunner := runView(t, subscribeOnly{st, NewReplicaStore(cfg, topic, trimmed, WithCatchUpWindow(-1), WithGapWait(300*time.Millisecond))}, "trimmed")
	writeEvents(t, ctx, st, "c", 30, 4, 400)
	published()
	checkView(t, st, trimmedView, trimmedRunner, "trimmed")
	t.Logf("trimmed replica: %d of %d events from the fallback", trimmed.read.Load(), head(t, st))
	if n := trimmed.read.Load(); n == 0 || n >= head(t, st)-400 {
		t.Errorf("trimmed replica read %d events from the fallback; want the deleted ones only", n)
	}
	for _, c := range []struct {
		name string
		v    *logView
		r    *projection.Runner
	}{{"direct", direct, directRunner}, {"live", liveView, liveRunner}, {"late", lateView, lateRunner}} {
		checkView(t, st, c.v, c.r, c.name)
	}
}

func TestReplicaStoreRefusesWrites(t *testing.T) {
	s := NewReplicaStore(Config{}, "topic", nil)
	if _, err := s.Append(t.Context(), "s", eventstore.Any, []eventstore.NewEvent{{Type: "T"}}); !errors.Is(err, eventstore.ErrReadOnly) {
		t.Errorf("Append: %v, want ErrReadOnly", err)
	}
	if err := s.SaveSnapshot(t.Context(), eventstore.Snapshot{Stream: "s", Seq: 1}); !errors.Is(err, eventstore.ErrReadOnly) {
		t.Errorf("SaveSnapshot: %v, want ErrReadOnly", err)
	}
}
