package kafkabus

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/eventstore/pgstore"
	"github.com/logbook/logbook/internal/testenv"
)

// deleterStore is a store that removes events, as both backends' do.
type deleterStore interface {
	eventstore.Store
	eventstore.Deleter
}

// removalBackends opens a fresh store of each backend, its background
// sweep off (the tests sweep themselves).
var removalBackends = []struct {
	name string
	open func(t *testing.T) deleterStore
}{
	{"pebble", func(t *testing.T) deleterStore {
		st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}},
	{"postgres", func(t *testing.T) deleterStore {
		st, err := pgstore.Open(t.Context(), testenv.URL(t), pgstore.Options{Schema: testenv.Schema(t), SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}},
}

// The publisher runs while writers append to many streams and streams
// are deleted, truncated and expired by a retention rule, on each
// backend. What reaches the topic: every event the log still holds, once,
// equal to the stored event, in its stream's partition, in order; no
// event removed before the publisher reached it; and, of the rest, only
// events removed after they were published (the topic keeps those). A
// removed tail of the log does not stall the publisher.
func TestPublishAcrossRemovalsUnderLoad(t *testing.T) {
	for _, b := range removalBackends {
		t.Run(b.name, func(t *testing.T) {
			cfg := testConfig(t)
			const partitions = 3
			topic := newTopic(t, cfg, partitions)
			st := b.open(t)
			ctx := t.Context()

			// Removed before the publisher starts: never published.
			neverPublished := map[uint64]bool{}
			for i := range 3 {
				res, err := st.Append(ctx, fmt.Sprintf("gone-%d", i), eventstore.NoStream, []eventstore.NewEvent{testEvent("gone", 0), testEvent("gone", 1), testEvent("gone", 2), testEvent("gone", 3), testEvent("gone", 4)})
				if err != nil {
					t.Fatal(err)
				}
				upTo := res.LastPosition
				if i == 2 {
					upTo = res.FirstPosition + 2 // truncated before seq 4
				}
				for p := res.FirstPosition; p <= upTo; p++ {
					neverPublished[p] = true
				}
			}
			writeEvents(t, ctx, st, "kept", 3, 1, 10)
			for _, err := range []error{
				st.DeleteStream(ctx, "gone-0", eventstore.DeleteSoft),
				st.DeleteStream(ctx, "gone-1", eventstore.DeleteHard),
				st.TruncateStream(ctx, "gone-2", 4),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}

			p := NewPublisher(st, testPublisher(cfg, topic, uniqueName(t, "tx"), partitions))
			stop := startPublisher(t, p)
			// The load starts once the publisher runs, so that it publishes
			// events that are removed afterwards as well.
			before := head(t, st)
			waitFor(t, 30*time.Second, "the publisher to start", func() bool { return p.LastPosition() >= before })

			// The load, and the removals beside it.
			const writers, perWriter, streams = 3, 100, 10
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), 3))
					for i := range perWriter {
						stream := fmt.Sprintf("load-%d", rng.IntN(streams))
						batch := make([]eventstore.NewEvent, 1+rng.IntN(3))
						for j := range batch {
							batch[j] = testEvent(stream, i*3+j)
						}
						if _, err := st.Append(ctx, stream, eventstore.Any, batch); err != nil && !errors.Is(err, eventstore.ErrStreamTombstoned) {
							t.Errorf("append: %v", err)
							return
						}
						if i%5 == 4 {
							time.Sleep(time.Millisecond)
						}
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 30 {
					time.Sleep(3 * time.Millisecond)
					var err error
					switch {
					case i == 3:
						err = st.SetRetention(ctx, eventstore.Retention{Prefix: "load-", MaxCount: 8})
					case i == 10:
						err = st.DeleteStream(ctx, "load-0", eventstore.DeleteHard)
					case i%4 == 0:
						err = st.DeleteStream(ctx, "load-1", eventstore.DeleteSoft)
					case i%3 == 0:
						_, err = st.Sweep(ctx)
					default:
						v, verr := st.StreamVersion(ctx, "load-2")
						if err = verr; err == nil {
							err = st.TruncateStream(ctx, "load-2", v/2+1)
						}
					}
					if err != nil {
						t.Errorf("removal step %d: %v", i, err)
						return
					}
				}
			}()
			wg.Wait()
			if t.Failed() {
				return
			}
			// A removed tail of the log.
			if _, err := st.Append(ctx, "tail", eventstore.NoStream, []eventstore.NewEvent{testEvent("tail", 0), testEvent("tail", 1)}); err != nil {
				t.Fatal(err)
			}
			if err := st.DeleteStream(ctx, "tail", eventstore.DeleteSoft); err != nil {
				t.Fatal(err)
			}
			for {
				s, err := st.Sweep(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if s.Pending == 0 {
					break
				}
			}
			visible := readVisible(t, st)
			last := visible[len(visible)-1].Position
			if last >= head(t, st) {
				t.Fatalf("the test wants a removed tail: last event %d, head %d", last, head(t, st))
			}
			waitFor(t, 30*time.Second, "the publisher to publish the last event still in the log", func() bool { return p.LastPosition() >= last })
			// Past the removed tail, the next event is published.
			res, err := st.Append(ctx, "final", eventstore.NoStream, []eventstore.NewEvent{testEvent("final", 0)})
			if err != nil {
				t.Fatal(err)
			}
			visible = append(visible, must(st.ReadStream(ctx, "final", 1, 1))...)
			waitFor(t, 30*time.Second, "the publisher to publish past the removed tail", func() bool { return p.LastPosition() == res.LastPosition })
			if err := stop(); err != nil {
				t.Fatal(err)
			}

			// Where each stream now starts: its first held seq, or past
			// its version if it holds nothing.
			firstHeld := map[string]uint64{}
			startOf := func(stream string) uint64 {
				if f, ok := firstHeld[stream]; ok {
					return f
				}
				evs, err := st.ReadStream(ctx, stream, 1, 1)
				switch {
				case errors.Is(err, eventstore.ErrStreamDeleted) || errors.Is(err, eventstore.ErrStreamTombstoned):
					firstHeld[stream] = ^uint64(0)
				case err != nil:
					t.Fatal(err)
				case len(evs) > 0:
					firstHeld[stream] = evs[0].Seq
				default:
					v, err := st.StreamVersion(ctx, stream)
					if err != nil {
						t.Fatal(err)
					}
					firstHeld[stream] = v + 1
				}
				return firstHeld[stream]
			}

			recs := readTopic(t, cfg, topic)
			if uint64(len(recs)) != p.Published() {
				t.Errorf("%d records in the topic, the publisher committed %d", len(recs), p.Published())
			}
			got := map[uint64]eventstore.Event{}
			lastPos := map[int32]uint64{}
			tp := partitioner(topic)
			removedLater := 0
			for _, r := range recs {
				pos := r.Event.Position
				if _, dup := got[pos]; dup {
					t.Fatalf("position %d published twice", pos)
				}
				got[pos] = r.Event
				if neverPublished[pos] {
					t.Fatalf("position %d (%s seq %d) was removed before the publisher started, and is in the topic", pos, r.Event.Stream, r.Event.Seq)
				}
				if want := partitionOf(tp, r.Event.Stream, partitions); r.Partition != want {
					t.Fatalf("position %d (stream %s) in partition %d, want %d", pos, r.Event.Stream, r.Partition, want)
				}
				if pos <= lastPos[r.Partition] {
					t.Fatalf("partition %d: position %d after %d", r.Partition, pos, lastPos[r.Partition])
				}
				lastPos[r.Partition] = pos
				if r.Event.Seq < startOf(r.Event.Stream) {
					removedLater++
				}
			}
			for _, ev := range visible {
				if !sameEvent(got[ev.Position], ev) {
					t.Fatalf("position %d: the topic has %+v, the log %+v", ev.Position, got[ev.Position], ev)
				}
			}
			if extra := len(recs) - len(visible); extra != removedLater {
				t.Fatalf("the topic holds %d records beyond the %d events still in the log, of which %d were removed after their publication", extra, len(visible), removedLater)
			}
			t.Logf("%d events in the log, %d records in the topic: %d removed after they were published, %d removed before", len(visible), len(recs), removedLater, len(neverPublished))
		})
	}
}

// sameEvent compares an event read back from the topic with the stored
// one: an empty and a nil list or map are the same, and so are two
// times at the same instant (the backends return commit times in
// different locations).
func sameEvent(a, b eventstore.Event) bool {
	if !a.Time.Equal(b.Time) || len(a.Tags) != len(b.Tags) || len(a.Meta) != len(b.Meta) || !bytes.Equal(a.Data, b.Data) {
		return false
	}
	if len(a.Tags) > 0 && !reflect.DeepEqual(a.Tags, b.Tags) || len(a.Meta) > 0 && !reflect.DeepEqual(a.Meta, b.Meta) {
		return false
	}
	a.Time, b.Time, a.Tags, b.Tags, a.Meta, b.Meta, a.Data, b.Data = time.Time{}, time.Time{}, nil, nil, nil, nil, nil, nil
	return reflect.DeepEqual(a, b)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
