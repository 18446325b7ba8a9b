package kafkabus

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// lockedBuffer is a log destination shared with a supervisor's goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A publisher that fails is started again, after a pause, until the
// context ends; each failure is logged and counted.
func TestSuperviseRestartsAFailedPublisher(t *testing.T) {
	st := openStore(t, t.TempDir())
	var logs lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*restartPause+restartPause/2)
	defer cancel()
	reg := prometheus.NewRegistry()
	// No transactional id: every Run fails at once.
	err := Supervise(ctx, st, SuperviseConfig{PublisherConfig: PublisherConfig{
		Topic: "never-created", Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	}, Registerer: reg})
	if err != context.DeadlineExceeded {
		t.Fatalf("Supervise returned %v, want the context's end", err)
	}
	// Runs start at 0, 1 and 2 pauses; a loaded machine may delay one.
	if n := strings.Count(logs.String(), "Kafka publisher stopped; restarting"); n < 2 || n > 3 {
		t.Fatalf("%d restarts logged in 2.5 pauses, want 3:\n%s", n, logs.String())
	} else if got := gathered(t, reg, "logbook_bus_publisher_restarts_total"); got != float64(n) {
		t.Fatalf("restarts counted %v, logged %d", got, n)
	}
	if got := gathered(t, reg, "logbook_bus_publisher_running"); got != 0 {
		t.Fatalf("publisher running %v after Supervise returned", got)
	}
}

// gathered is the value of the one series of the metric name on reg.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	v, ok := gather(reg, name)
	if !ok {
		t.Fatalf("no single series %s", name)
	}
	return v
}

// gather is the value of the one series of the metric name on reg, if
// there is one.
func gather(reg *prometheus.Registry, name string) (float64, bool) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, false
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// With Exclusive, publishers run only through it: the lock decides.
func TestSuperviseRunsThroughExclusive(t *testing.T) {
	st := openStore(t, t.TempDir())
	calls := 0
	err := Supervise(context.Background(), st, SuperviseConfig{
		PublisherConfig: PublisherConfig{Topic: "t", Logger: slog.New(slog.DiscardHandler)},
		Exclusive: func(ctx context.Context, run func(context.Context) error) error {
			calls++
			return run(ctx) // fails at once: no transactional id
		},
	})
	if calls != 1 || err == nil || !strings.Contains(err.Error(), "transactional id") {
		t.Fatalf("Exclusive called %d times, Supervise returned %v", calls, err)
	}
}

// A Monitor says a publisher failed, with what, and that it is not
// running.
func TestMonitorSaysThePublisherFailed(t *testing.T) {
	st := openStore(t, t.TempDir())
	var mon Monitor
	err := Supervise(context.Background(), st, SuperviseConfig{
		PublisherConfig: PublisherConfig{Topic: "t", Logger: slog.New(slog.DiscardHandler)},
		Exclusive: func(ctx context.Context, run func(context.Context) error) error {
			return run(ctx) // fails at once: no transactional id
		},
		Monitor: &mon,
	})
	s := mon.State()
	if err == nil || s.Topic != "t" || s.Running || s.Restarts != 1 || s.LastError == nil ||
		!strings.Contains(s.LastError.Error(), "transactional id") || time.Since(s.LastAt) > time.Minute {
		t.Fatalf("monitor %+v after a failed publisher", s)
	}
}

// The supervised publishers' events are counted in the metric.
func TestSupervisePublishesAndCounts(t *testing.T) {
	cfg := testConfig(t)
	const partitions = 3
	topic := newTopic(t, cfg, partitions)
	st := openStore(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writeEvents(t, ctx, st, "s", 10, 2, 100)
	h := head(t, st)
	reg := prometheus.NewRegistry()
	var mon Monitor
	done := make(chan error, 1)
	go func() {
		done <- Supervise(ctx, st, SuperviseConfig{PublisherConfig: testPublisher(cfg, topic, uniqueName(t, "tx"), partitions), Registerer: reg, Monitor: &mon})
	}()
	waitFor(t, 20*time.Second, "the metrics to count every event", func() bool {
		events, _ := gather(reg, "logbook_bus_published_events_total")
		position, _ := gather(reg, "logbook_bus_published_position")
		return events == float64(h) && position == float64(h)
	})
	if n := testutil.CollectAndCount(reg, "logbook_bus_published_events_total"); n != 1 {
		t.Fatalf("%d series", n)
	}
	if got := gathered(t, reg, "logbook_bus_publisher_running"); got != 1 {
		t.Fatalf("publisher running %v while it publishes", got)
	}
	if got := gathered(t, reg, "logbook_bus_publisher_restarts_total"); got != 0 {
		t.Fatalf("%v restarts of a publisher that did not fail", got)
	}
	if s := mon.State(); s.Topic != topic || !s.Running || s.Position != h || s.Published != h || s.Restarts != 0 || s.LastError != nil {
		t.Fatalf("monitor %+v, want topic %s running at %d", s, topic, h)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Supervise returned %v after cancel", err)
	}
}
