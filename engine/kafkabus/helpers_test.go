package kafkabus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"reflect"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/internal/testenv"
)

// testConfig returns the broker the integration tests run against: a
// real one (testenv).
func testConfig(t testing.TB) Config {
	t.Helper()
	return Config{Brokers: testenv.Kafka(t)}
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// uniqueName derives a topic, group or transactional id from the test's
// name and a random suffix, so that runs and tests never share one.
func uniqueName(t testing.TB, kind string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%s-%s", kind, unsafeName.ReplaceAllString(t.Name(), "_"), hex.EncodeToString(b[:]))
}

// newTopic creates a topic for one test and deletes it afterwards.
func newTopic(t testing.TB, cfg Config, partitions int32) string {
	t.Helper()
	topic := uniqueName(t, "t")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := EnsureTopic(ctx, cfg, topic, partitions, -1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl, err := cfg.client()
		if err != nil {
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteTopic(ctx, topic)
	})
	return topic
}

func openStore(t testing.TB, dir string) *pebblestore.Store {
	t.Helper()
	st, err := pebblestore.Open(dir, pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	// A cleanup, not a defer: it then runs after the cleanups that stop
	// what reads the store, which are registered later.
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// testEvent is event i of a test's stream: tags, metadata and a binary
// payload (not JSON, with a zero byte) so the encoding is exercised whole.
func testEvent(stream string, i int) eventstore.NewEvent {
	ev := eventstore.NewEvent{
		Type:    "test.event",
		Version: i % 3,
		Data:    []byte(fmt.Sprintf("%s\x00#%d\xff", stream, i)),
	}
	if i%2 == 0 {
		ev.Tags = []string{"even", "t" + fmt.Sprint(i%5)}
		ev.Meta = map[string]string{"i": fmt.Sprint(i), "stream": stream}
	}
	if i%7 == 0 {
		ev.Data = nil
	}
	return ev
}

// writeEvents appends n events over streams from writers goroutines, 1-3
// events per append, and returns once all are written.
func writeEvents(t testing.TB, ctx context.Context, st eventstore.Store, prefix string, streams, writers, n int) {
	t.Helper()
	if err := tryWriteEvents(ctx, st, prefix, streams, writers, n); err != nil {
		t.Fatal(err)
	}
}

// tryWriteEvents is writeEvents for goroutines other than the test's. It
// stops without error when ctx ends.
func tryWriteEvents(ctx context.Context, st eventstore.Store, prefix string, streams, writers, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	per := n / writers
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			written := 0
			for i := 0; written < per; i++ {
				k := min(1+i%3, per-written)
				stream := fmt.Sprintf("%s-%d", prefix, (w*7919+i)%streams)
				batch := make([]eventstore.NewEvent, k)
				for j := range batch {
					batch[j] = testEvent(stream, written+j)
				}
				if _, err := st.Append(ctx, stream, eventstore.Any, batch); err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				written += k
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func readLog(t testing.TB, st eventstore.Store) []eventstore.Event {
	t.Helper()
	var all []eventstore.Event
	for {
		evs, err := st.ReadAll(context.Background(), uint64(len(all))+1, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return all
		}
		all = append(all, evs...)
	}
}

// readTopic reads everything committed in topic.
func readTopic(t testing.TB, cfg Config, topic string) []Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := ReadTopic(ctx, cfg, topic)
	if err != nil {
		t.Fatalf("reading topic %s: %v", topic, err)
	}
	return recs
}

// checkTopic checks that topic holds the store's log exactly: every
// position once, each record equal to the stored event, in its stream's
// partition, stamped with its commit time, and each partition in position
// (hence per-stream) order.
func checkTopic(t testing.TB, cfg Config, topic string, log []eventstore.Event, partitions int) {
	t.Helper()
	recs := readTopic(t, cfg, topic)
	seen := make(map[uint64]int, len(recs))
	lastPos := map[int32]uint64{}
	tp := partitioner(topic)
	for _, r := range recs {
		p := r.Event.Position
		seen[p]++
		if seen[p] > 1 {
			t.Errorf("position %d published %d times", p, seen[p])
			continue
		}
		if p == 0 || p > uint64(len(log)) {
			t.Errorf("position %d not in the log (head %d)", p, len(log))
			continue
		}
		want := log[p-1]
		if !reflect.DeepEqual(r.Event, want) {
			t.Errorf("position %d differs:\n got %+v\nwant %+v", p, r.Event, want)
		}
		if r.Partition != partitionOf(tp, want.Stream, partitions) {
			t.Errorf("position %d (stream %s) in partition %d, want %d", p, want.Stream, r.Partition, partitionOf(tp, want.Stream, partitions))
		}
		if r.Timestamp.UnixMilli() != want.Time.UnixMilli() {
			t.Errorf("position %d: record time %v, commit time %v", p, r.Timestamp, want.Time)
		}
		if p <= lastPos[r.Partition] {
			t.Errorf("partition %d: position %d after %d", r.Partition, p, lastPos[r.Partition])
		}
		lastPos[r.Partition] = p
	}
	missing := 0
	for p := uint64(1); p <= uint64(len(log)); p++ {
		if seen[p] == 0 {
			if missing < 10 {
				t.Errorf("position %d missing from the topic", p)
			}
			missing++
		}
	}
	if missing > 0 || t.Failed() {
		t.Fatalf("topic %s: %d records for %d events, %d missing", topic, len(recs), len(log), missing)
	}
}

// waitFor polls cond every 20ms until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startPublisher runs a publisher in the background; the returned stop
// cancels it and returns what Run returned.
func startPublisher(t testing.TB, p *Publisher) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				err = fmt.Errorf("publisher did not stop in 30s")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func head(t testing.TB, st eventstore.Store) uint64 {
	h, err := st.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h
}
