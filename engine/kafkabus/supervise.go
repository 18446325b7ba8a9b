package kafkabus

import (
	"context"
	"errors"
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
	var current atomic.Pointer[Publisher]
	published := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "logbook_bus_published_events_total", Help: "Events this process has published to Kafka.",
	}, func() float64 {
		if p := current.Load(); p != nil {
			return float64(p.Published())
		}
		return 0
	})
	var running atomic.Bool
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
