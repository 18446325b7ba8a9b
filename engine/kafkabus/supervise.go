package kafkabus

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/metrics"
)

// SuperviseConfig configures Supervise.
type SuperviseConfig struct {
	PublisherConfig
	// Registerer receives the publisher's state (nil: no metrics):
	// logbook_bus_published_events_total, the events this process has
	// published; logbook_bus_publisher_running, 1 while a publisher of
	// this process runs (with Exclusive: holds the lock), else 0;
	// logbook_bus_published_position, the last log position known to be
	// in Kafka (0 until a publisher has looked; with
	// logbook_head_position, the publisher's lag); and
	// logbook_bus_publisher_restarts_total, the publishers that stopped
	// with an error (Supervise starts another, unless the store closed).
	Registerer prometheus.Registerer
	// Exclusive, if set, runs each publisher only while this process holds
	// a lock shared by every process that may publish the topic, and runs
	// it again whenever it returns, until ctx ends: one write node at a
	// time publishes, the others wait to take over. pgstore's
	// Store.Exclusive, given a name, does that. Kafka's transactional
	// fencing guards the handover. Without it, a publisher that fails is
	// started again after a second.
	Exclusive func(ctx context.Context, run func(context.Context) error) error
	// Monitor, if set, receives the publisher's state, for an operator's
	// page (Monitor.State).
	Monitor *Monitor
}

// Monitor is a supervised publisher's state as its process knows it:
// give one to Supervise in SuperviseConfig.Monitor, read it with State
// while it runs. The zero value is ready to use.
type Monitor struct {
	current  atomic.Pointer[Publisher]
	running  atomic.Bool
	restarts atomic.Uint64
	topic    atomic.Pointer[string]
	mu       sync.Mutex
	lastErr  error // the last error a publisher stopped with, or a session failed with
	lastAt   time.Time
}

// PublisherState is what a Monitor knows.
type PublisherState struct {
	Topic     string
	Running   bool   // a publisher of this process runs (holds the lock) now
	Position  uint64 // the last log position known to be in Kafka (0 until a publisher has looked)
	Published uint64 // events the current publisher has published
	Restarts  uint64 // publishers that stopped with an error
	LastError error  // the last failure, of a session or a publisher; nil if none
	LastAt    time.Time
}

// State returns the publisher's state now.
func (m *Monitor) State() PublisherState {
	st := PublisherState{Running: m.running.Load(), Restarts: m.restarts.Load()}
	if t := m.topic.Load(); t != nil {
		st.Topic = *t
	}
	m.mu.Lock()
	st.LastError, st.LastAt = m.lastErr, m.lastAt
	m.mu.Unlock()
	if p := m.current.Load(); p != nil {
		st.Position, st.Published = p.LastPosition(), p.Published()
		if at, err := p.LastError(); err != nil && at.After(st.LastAt) {
			st.LastError, st.LastAt = err, at
		}
	}
	return st
}

func (m *Monitor) failed(err error) {
	m.mu.Lock()
	m.lastErr, m.lastAt = err, time.Now()
	m.mu.Unlock()
}

// restartPause is how long Supervise waits before starting a publisher
// again without Exclusive.
const restartPause = time.Second

// Supervise publishes store's log to cfg.Topic until ctx ends, starting a
// new Publisher whenever one stops with an error: the long-running form
// of a Publisher for a server. It returns ctx's error, the store's
// eventstore.ErrClosed, or the error of registering the metrics.
func Supervise(ctx context.Context, store eventstore.Store, cfg SuperviseConfig) error {
	cfg.PublisherConfig = cfg.PublisherConfig.withDefaults()
	log := cfg.Logger
	mon := cfg.Monitor
	if mon == nil {
		mon = &Monitor{}
	}
	topic := cfg.Topic
	mon.topic.Store(&topic)
	current := &mon.current
	published := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "logbook_bus_published_events_total", Help: "Events this process has published to Kafka.",
	}, func() float64 {
		if p := current.Load(); p != nil {
			return float64(p.Published())
		}
		return 0
	})
	running := &mon.running
	state := []prometheus.Collector{
		published,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "logbook_bus_publisher_running", Help: "1 while a Kafka publisher of this process runs (holds the publishing lock), else 0.",
		}, func() float64 {
			if running.Load() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "logbook_bus_published_position", Help: "The last log position known to be in Kafka, as this process's publisher last saw it.",
		}, func() float64 {
			if p := current.Load(); p != nil {
				return float64(p.LastPosition())
			}
			return 0
		}),
	}
	restarts := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "logbook_bus_publisher_restarts_total", Help: "Kafka publishers of this process that stopped with an error.",
	})
	for _, c := range state {
		if _, err := metrics.Register(cfg.Registerer, c); err != nil {
			return err
		}
	}
	restarts, err := metrics.Register(cfg.Registerer, restarts)
	if err != nil {
		return err
	}
	run := func(ctx context.Context) error {
		p := NewPublisher(store, cfg.PublisherConfig)
		current.Store(p)
		running.Store(true)
		log.Info("publishing the log to Kafka", "topic", cfg.Topic)
		err := p.Run(ctx)
		running.Store(false)
		if err != nil && ctx.Err() == nil {
			restarts.Inc()
			mon.restarts.Add(1)
			mon.failed(err)
			log.Warn("Kafka publisher stopped; restarting", "topic", cfg.Topic, "err", err)
		}
		return err
	}
	if cfg.Exclusive != nil {
		return cfg.Exclusive(ctx, run)
	}
	for ctx.Err() == nil {
		if err := run(ctx); errors.Is(err, eventstore.ErrClosed) {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(restartPause):
		}
	}
	return ctx.Err()
}
