package projection_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/projection"
)

// The test views count the events of each stream and sum their values
// (each event's data is a decimal number): double application or a lost
// event shows in both.

type agg struct {
	Count int
	Sum   int64
}

type tally map[string]agg

func (t tally) add(ev eventstore.Event) error {
	v, err := strconv.ParseInt(string(ev.Data), 10, 64)
	if err != nil {
		return fmt.Errorf("event data %q: %w", ev.Data, err)
	}
	a := t[ev.Stream]
	a.Count++
	a.Sum += v
	t[ev.Stream] = a
	return nil
}

func newTallyView() *projection.Memory[tally] {
	return projection.NewMemory(tally{}, func(s *tally, ev eventstore.Event) error { return s.add(ev) })
}

// snapshotOf copies a Memory tally and its position.
func snapshotOf(m *projection.Memory[tally]) (tally, uint64) {
	var out tally
	var at uint64
	m.Read(func(s *tally, pos uint64) { out, at = maps.Clone(*s), pos })
	return out, at
}

// all is the upTo of expected that takes the whole log.
const all = ^uint64(0)

// expected recomputes the tally from the log up to position upTo,
// keeping only events tagged tag if tag is not empty.
func expected(t *testing.T, st eventstore.Store, upTo uint64, tag string) tally {
	t.Helper()
	want := tally{}
	for from := uint64(1); ; {
		page, err := st.ReadAll(context.Background(), from, 0)
		if err != nil {
			t.Fatalf("read all: %v", err)
		}
		if len(page) == 0 {
			return want
		}
		for _, ev := range page {
			if ev.Position > upTo {
				return want
			}
			if tag == "" || hasTag(ev, tag) {
				if err := want.add(ev); err != nil {
					t.Fatal(err)
				}
			}
		}
		from = page[len(page)-1].Position + 1
	}
}

func hasTag(ev eventstore.Event, tag string) bool {
	for _, t := range ev.Tags {
		if t == tag {
			return true
		}
	}
	return false
}

func openStore(t *testing.T) *pebblestore.Store {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// appendValues appends one event per value to stream, with tags.
func appendValues(t *testing.T, st eventstore.Store, stream string, tags []string, vals ...int) eventstore.AppendResult {
	t.Helper()
	evs := make([]eventstore.NewEvent, len(vals))
	for i, v := range vals {
		evs[i] = eventstore.NewEvent{Type: "value", Data: []byte(strconv.Itoa(v)), Tags: tags}
	}
	res, err := st.Append(context.Background(), stream, eventstore.Any, evs)
	if err != nil {
		t.Fatalf("append to %s: %v", stream, err)
	}
	return res
}

// fill appends n events spread over streams, in appends of up to 7.
func fill(t *testing.T, st eventstore.Store, streams, n int, tags []string) eventstore.AppendResult {
	t.Helper()
	var res eventstore.AppendResult
	for i := 0; i < n; {
		k := min(1+i%7, n-i)
		vals := make([]int, k)
		for j := range vals {
			vals[j] = (i+j)*7919%1000 + 1
		}
		res = appendValues(t, st, fmt.Sprintf("s-%d", i%streams), tags, vals...)
		i += k
	}
	return res
}

// running starts r in the background; the returned function stops it and
// returns what Run returned.
func running(t *testing.T, r *projection.Runner) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once bool
	var err error
	stop := func() error {
		if !once {
			once = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func ctxTimeout(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// gauge returns the value of metric name{view=view} in reg, and whether
// it is there.
func gauge(t *testing.T, reg *prometheus.Registry, name, view string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "view" && l.GetValue() == view {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// A durable tally keeps one key per stream: uvarint count, varint sum and
// uvarint seq of the last event applied (the dedup tests use it).

func encodeAgg(a agg, lastSeq uint64) []byte {
	b := binary.AppendUvarint(nil, uint64(a.Count))
	b = binary.AppendVarint(b, a.Sum)
	return binary.AppendUvarint(b, lastSeq)
}

func decodeAggSeq(b []byte) (agg, uint64, error) {
	c, n1 := binary.Uvarint(b)
	if n1 <= 0 {
		return agg{}, 0, errors.New("bad count")
	}
	s, n2 := binary.Varint(b[n1:])
	if n2 <= 0 {
		return agg{}, 0, errors.New("bad sum")
	}
	seq, n3 := binary.Uvarint(b[n1+n2:])
	if n3 <= 0 || n1+n2+n3 != len(b) {
		return agg{}, 0, errors.New("bad seq")
	}
	return agg{Count: int(c), Sum: s}, seq, nil
}

func decodeAgg(b []byte) (agg, error) {
	a, _, err := decodeAggSeq(b)
	return a, err
}

// addToKey adds ev to the aggregate stored at key, reading through rw so
// that an indexed batch sees its own earlier writes.
func addToKey(rw interface {
	Get([]byte) ([]byte, io.Closer, error)
	Set(k, v []byte, o *pebble.WriteOptions) error
}, key string, ev eventstore.Event) error {
	var a agg
	b, closer, err := rw.Get([]byte(key))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return err
	default:
		a, err = decodeAgg(b)
		_ = closer.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	t := tally{ev.Stream: a}
	if err := t.add(ev); err != nil {
		return err
	}
	return rw.Set([]byte(key), encodeAgg(t[ev.Stream], ev.Seq), nil)
}
