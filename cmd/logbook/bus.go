package main

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pgstore"
	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/engine/metrics"
)

// busFlag is --bus kafka://host:port[,host:port…]/topic.
type busFlag struct {
	cfg   kafkabus.Config
	topic string
}

func parseBus(s string) (*busFlag, error) {
	cfg, topic, err := kafkabus.ParseURL(s)
	if err != nil {
		return nil, usageError{"--bus " + err.Error()}
	}
	return &busFlag{cfg: cfg, topic: topic}, nil
}

// replicaStore feeds a read replica's view from Kafka, falling back to
// the store for what Kafka no longer holds.
func (b *busFlag) replicaStore(ctx context.Context, store eventstore.Store) (eventstore.Store, error) {
	if err := kafkabus.EnsureTopic(ctx, b.cfg, b.topic, 12, -1); err != nil {
		return nil, err
	}
	return kafkabus.NewReplicaStore(b.cfg, b.topic, store), nil
}

// publish runs the publisher of the log to Kafka until ctx ends. With a
// shared store, exclusive makes one write node at a time the publisher
// (the others wait to take over); Kafka's transactional fencing guards
// the handover. A publisher that fails is started again.
func (b *busFlag) publish(ctx context.Context, store eventstore.Store, reg prometheus.Registerer, log *slog.Logger, pg *pgstore.Store) error {
	var current atomic.Pointer[kafkabus.Publisher]
	published := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "logbook_bus_published_events_total", Help: "Events this process has published to Kafka.",
	}, func() float64 {
		if p := current.Load(); p != nil {
			return float64(p.Published())
		}
		return 0
	})
	if _, err := metrics.Register(reg, published); err != nil {
		return err
	}
	run := func(ctx context.Context) error {
		pcfg := kafkabus.PublisherConfig{
			Config: b.cfg, Topic: b.topic, TransactionalID: "logbook-publisher-" + b.topic, Logger: log,
		}
		if pg != nil {
			pcfg.Progress = pgProgress{pg, "kafka publisher " + b.topic}
		}
		p := kafkabus.NewPublisher(store, pcfg)
		current.Store(p)
		log.Info("publishing the log to Kafka", "topic", b.topic)
		err := p.Run(ctx)
		if err != nil && ctx.Err() == nil {
			log.Warn("Kafka publisher stopped; restarting", "err", err)
		}
		return err
	}
	if pg != nil {
		return pg.Exclusive(ctx, "kafka publisher "+b.topic, run)
	}
	for ctx.Err() == nil {
		if err := run(ctx); errors.Is(err, eventstore.ErrClosed) {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return ctx.Err()
}

// pgProgress keeps the publisher's progress in the PostgreSQL store.
type pgProgress struct {
	s    *pgstore.Store
	name string
}

func (p pgProgress) Load(ctx context.Context) (uint64, error) { return p.s.LoadProgress(ctx, p.name) }
func (p pgProgress) Save(ctx context.Context, pos uint64) error {
	return p.s.SaveProgress(ctx, p.name, pos)
}
