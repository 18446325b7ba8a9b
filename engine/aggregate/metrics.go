package aggregate

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type outcome string

const (
	outcomeOK        outcome = "ok"
	outcomeRejected  outcome = "rejected" // a domain error or an expected-version mismatch
	outcomeConflict  outcome = "conflict" // retries exhausted
	outcomeDuplicate outcome = "duplicate"
	outcomeError     outcome = "error"
)

// metrics are the runtime's Prometheus series; all methods are no-ops on
// a nil *metrics (no Registerer given).
type metrics struct {
	commands  *prometheus.CounterVec
	latency   prometheus.Observer
	cacheHits prometheus.Counter
	cacheMiss prometheus.Counter
	liveAggs  prometheus.Gauge
	events    prometheus.Counter
	badSnaps  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, kind string) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	labels := prometheus.Labels{"kind": kind}
	m := &metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logbook_commands_total", Help: "Commands handled, by outcome.", ConstLabels: labels,
		}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "logbook_command_seconds", Help: "Time from a command's arrival to its answer.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "logbook_aggregate_cache_hits_total", Help: "Commands that found their aggregate in memory.", ConstLabels: labels,
		}),
		cacheMiss: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "logbook_aggregate_cache_misses_total", Help: "Commands that loaded their aggregate from the store.", ConstLabels: labels,
		}),
		liveAggs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "logbook_aggregates_live", Help: "Aggregates held in memory.", ConstLabels: labels,
		}),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "logbook_aggregate_events_total", Help: "Events written by commands.", ConstLabels: labels,
		}),
		badSnaps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "logbook_snapshots_unreadable_total", Help: "Snapshots ignored because they could not be decoded.", ConstLabels: labels,
		}),
	}
	for _, c := range []prometheus.Collector{m.commands, m.latency.(prometheus.Collector), m.cacheHits, m.cacheMiss, m.liveAggs, m.events, m.badSnaps} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) command(start time.Time, o outcome) {
	if m == nil {
		return
	}
	m.commands.WithLabelValues(string(o)).Inc()
	m.latency.Observe(time.Since(start).Seconds())
}

func (m *metrics) cache(hit bool) {
	if m == nil {
		return
	}
	if hit {
		m.cacheHits.Inc()
	} else {
		m.cacheMiss.Inc()
	}
}

func (m *metrics) live(d float64) {
	if m != nil {
		m.liveAggs.Add(d)
	}
}

func (m *metrics) appended(n int) {
	if m != nil {
		m.events.Add(float64(n))
	}
}

func (m *metrics) snapshotUnreadable() {
	if m != nil {
		m.badSnaps.Inc()
	}
}
