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
	// Registerer receives logbook_bus_published_events_total, the events
	// this process has published (nil: no metric).
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
// eventstore.ErrClosed, or the error of registering the metric.
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
	if _, err := metrics.Register(cfg.Registerer, published); err != nil {
		return err
	}
	run := func(ctx context.Context) error {
		p := NewPublisher(store, cfg.PublisherConfig)
		current.Store(p)
		log.Info("publishing the log to Kafka", "topic", cfg.Topic)
		err := p.Run(ctx)
		if err != nil && ctx.Err() == nil {
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
