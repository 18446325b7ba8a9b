package projection

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/metrics"
)

// lagSource measures one view; position is what it has applied.
type lagSource func(ctx context.Context) (lag Lag, position uint64, err error)

// collector reports the lag of every view on one registry. It is shared
// (metrics.Register hands back the one registered first), because the
// registry refuses two collectors of the same metrics; views come and go
// as sources in it.
type collector struct {
	lagEvents, lagSeconds, position *prometheus.Desc

	mu      sync.Mutex
	sources map[string]lagSource
}

func newCollector() *collector {
	label := []string{"view"}
	return &collector{
		lagEvents: prometheus.NewDesc("logbook_projection_lag_events",
			"Positions between the log's head and the last event the view has applied; 0 when it reflects the head.", label, nil),
		lagSeconds: prometheus.NewDesc("logbook_projection_lag_seconds",
			"Age of the oldest committed event the view has not applied yet; 0 when it lacks none.", label, nil),
		position: prometheus.NewDesc("logbook_projection_position",
			"Position of the last event the view has applied.", label, nil),
		sources: make(map[string]lagSource),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lagEvents
	ch <- c.lagSeconds
	ch <- c.position
}

// scrapeTimeout bounds the store reads of one scrape.
const scrapeTimeout = 5 * time.Second

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	names := make([]string, 0, len(c.sources))
	srcs := make([]lagSource, 0, len(c.sources))
	for name, src := range c.sources {
		names = append(names, name)
		srcs = append(srcs, src)
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	for i, src := range srcs {
		lag, pos, err := src(ctx)
		if err != nil {
			err = fmt.Errorf("projection %s: measuring lag: %w", names[i], err)
			ch <- prometheus.NewInvalidMetric(c.lagEvents, err)
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.lagEvents, prometheus.GaugeValue, float64(lag.Events), names[i])
		ch <- prometheus.MustNewConstMetric(c.lagSeconds, prometheus.GaugeValue, lag.Age.Seconds(), names[i])
		ch <- prometheus.MustNewConstMetric(c.position, prometheus.GaugeValue, float64(pos), names[i])
	}
}

// report makes name's lag visible on reg until the returned function is
// called.
func report(reg prometheus.Registerer, name string, src lagSource) (func(), error) {
	c, err := metrics.Register(reg, newCollector())
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.sources[name]; dup {
		return nil, fmt.Errorf("a view named %q already reports to this registry; give replicas distinct names", name)
	}
	c.sources[name] = src
	return func() {
		c.mu.Lock()
		delete(c.sources, name)
		c.mu.Unlock()
	}, nil
}

// runnerLag is a Runner's lagSource.
func runnerLag(r *Runner) lagSource {
	return func(ctx context.Context) (Lag, uint64, error) {
		lag, err := r.Lag(ctx)
		return lag, r.Position(), err
	}
}
