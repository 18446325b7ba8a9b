package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/metrics"
)

// value gathers reg and returns the series of name with label=value
// (label "" for an unlabelled metric): a counter's or gauge's value, a
// histogram's sample count.
func value(t *testing.T, reg *prometheus.Registry, name, label, want string) float64 {
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
			match := label == ""
			for _, l := range m.GetLabel() {
				match = match || l.GetName() == label && l.GetValue() == want
			}
			if match {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	t.Fatalf("no series %s{%s=%q}", name, label, want)
	return 0
}

func TestInstrumentStore(t *testing.T) {
	ctx := context.Background()
	raw, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	reg := metrics.NewRegistry()
	st, err := metrics.InstrumentStore(raw, reg)
	if err != nil {
		t.Fatal(err)
	}

	evs := []eventstore.NewEvent{{Type: "a", Data: []byte("1")}, {Type: "a", Data: []byte("2")}}
	if _, err := st.Append(ctx, "s", eventstore.NoStream, evs); err != nil {
		t.Fatal(err)
	}
	if res, err := st.Append(ctx, "s", eventstore.NoStream, evs); err != nil || !res.Duplicate {
		t.Fatalf("retry: %+v, %v", res, err)
	}
	if _, err := st.Append(ctx, "s", eventstore.NoStream, []eventstore.NewEvent{{Type: "b"}}); !errors.Is(err, eventstore.ErrVersionConflict) {
		t.Fatalf("conflict: %v", err)
	}
	if _, err := st.Append(ctx, "", eventstore.Any, evs); err == nil {
		t.Fatal("append to an invalid stream id succeeded")
	}
	if got, err := st.ReadAll(ctx, 1, 0); err != nil || len(got) != 2 {
		t.Fatalf("read all: %d, %v", len(got), err)
	}
	if _, err := st.ReadStream(ctx, "s", 1, 1); err != nil {
		t.Fatal(err)
	}
	sub, err := st.Subscribe(ctx, eventstore.All(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sub.Next(ctx); err != nil || len(got) != 2 {
		t.Fatalf("subscription: %d, %v", len(got), err)
	}
	_ = sub.Close()

	for result, want := range map[string]float64{"ok": 1, "duplicate": 1, "conflict": 1, "error": 1} {
		if got := value(t, reg, "logbook_appends_total", "result", result); got != want {
			t.Errorf("appends{result=%q} = %v, want %v", result, got, want)
		}
	}
	if got := value(t, reg, "logbook_appended_events_total", "", ""); got != 2 {
		t.Errorf("appended events %v, want 2", got)
	}
	if n := value(t, reg, "logbook_append_seconds", "", ""); n != 4 {
		t.Errorf("append latency samples %v, want 4", n)
	}
	for kind, want := range map[string][2]float64{"all": {1, 2}, "stream": {1, 1}, "subscription": {1, 2}} {
		if got := value(t, reg, "logbook_reads_total", "kind", kind); got != want[0] {
			t.Errorf("reads{kind=%q} = %v, want %v", kind, got, want[0])
		}
		if got := value(t, reg, "logbook_read_events_total", "kind", kind); got != want[1] {
			t.Errorf("read events{kind=%q} = %v, want %v", kind, got, want[1])
		}
	}
	if g := value(t, reg, "logbook_head_position", "", ""); g != 2 {
		t.Errorf("head gauge %v, want 2", g)
	}

	// A second store on the same registry shares the metrics.
	if _, err := metrics.InstrumentStore(raw, reg); err != nil {
		t.Fatalf("second instrumented store: %v", err)
	}
	// A nil registerer instruments nothing.
	if s, err := metrics.InstrumentStore(raw, nil); err != nil || s != eventstore.Store(raw) {
		t.Fatalf("nil registerer: %T, %v", s, err)
	}

	// The handler serves it all in the text format.
	rec := httptest.NewRecorder()
	metrics.Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{"logbook_append_seconds_bucket", `logbook_appends_total{result="ok"} 1`, "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestRegisterShares(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "logbook_test_total", Help: "test"}
	a, err := metrics.Register(reg, prometheus.NewCounter(opts))
	if err != nil {
		t.Fatal(err)
	}
	b, err := metrics.Register(reg, prometheus.NewCounter(opts))
	if err != nil || a != b {
		t.Fatalf("second registration: %v, same collector %v", err, a == b)
	}
	// Same name, different type: refused rather than silently split.
	if _, err := metrics.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts(opts))); err == nil {
		t.Fatal("a gauge registered over a counter of the same name")
	}
	if c, err := metrics.Register[prometheus.Counter](nil, prometheus.NewCounter(opts)); err != nil || c == nil {
		t.Fatalf("nil registerer: %v, %v", c, err)
	}
}

// plainStore hides the backend's AppendAsync.
type plainStore struct{ eventstore.Store }

// TestInstrumentStoreAppendAsync: appends through AppendAsync are
// counted as Append's are, whether the store underneath appends
// asynchronously itself (pebblestore) or eventstore.AppendAsync waits on
// a goroutine for its Append.
func TestInstrumentStoreAppendAsync(t *testing.T) {
	for name, wrap := range map[string]func(eventstore.Store) eventstore.Store{
		"async backend": func(s eventstore.Store) eventstore.Store { return s },
		"plain backend": func(s eventstore.Store) eventstore.Store { return plainStore{s} },
	} {
		t.Run(name, func(t *testing.T) {
			raw, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			reg := metrics.NewRegistry()
			st, err := metrics.InstrumentStore(wrap(raw), reg)
			if err != nil {
				t.Fatal(err)
			}
			type outcome struct {
				res eventstore.AppendResult
				err error
			}
			appendAsync := func(expect eventstore.ExpectedVersion, evs []eventstore.NewEvent) outcome {
				out := make(chan outcome, 1)
				eventstore.AppendAsync(st, "s", expect, evs, func(res eventstore.AppendResult, err error) { out <- outcome{res, err} })
				return <-out
			}
			if o := appendAsync(eventstore.NoStream, []eventstore.NewEvent{{Type: "a"}, {Type: "a"}}); o.err != nil || o.res.LastSeq != 2 {
				t.Fatalf("append: %+v, %v", o.res, o.err)
			}
			if o := appendAsync(eventstore.NoStream, []eventstore.NewEvent{{Type: "b"}}); !errors.Is(o.err, eventstore.ErrVersionConflict) {
				t.Fatalf("conflict: %v", o.err)
			}
			for result, want := range map[string]float64{"ok": 1, "conflict": 1} {
				if got := value(t, reg, "logbook_appends_total", "result", result); got != want {
					t.Errorf("appends{result=%q} = %v, want %v", result, got, want)
				}
			}
			if got := value(t, reg, "logbook_appended_events_total", "", ""); got != 2 {
				t.Errorf("appended events %v, want 2", got)
			}
		})
	}
}
