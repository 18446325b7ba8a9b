// Package metrics is where logbook's Prometheus plumbing meets: the
// registry a process serves at /metrics, the helper every component uses
// to register its collectors, and the instrumenting decorator of the event
// store.
//
// There is no global registry. The process makes one with NewRegistry and
// hands it, as a prometheus.Registerer, to each component through the
// component's options; a nil Registerer means the component records no
// metrics. Every metric is named logbook_… (see docs/ARCHITECTURE.md for
// the list). A component registers each of its collectors with Register,
// so that two instances of one component on the same registry (two stores,
// two shards, two replicas) share a metric instead of failing:
//
//	appends, err := metrics.Register(opts.Registerer, prometheus.NewCounterVec(
//		prometheus.CounterOpts{Name: "logbook_…_total", Help: "…"}, []string{"…"}))
package metrics

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry holding the Go runtime's and the
// process's standard collectors, ready for the components' own metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler serves reg in the Prometheus exposition formats. A collector
// that fails is reported in the response and the rest is still served, so
// one broken component does not blind the whole dashboard.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		Registry:      reg, // the handler's own request and error counts
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// Register registers c on reg and returns the collector to use from then
// on: c itself, or the equal collector (same metric names and constant
// labels) registered before, so that several instances of a component
// share their metrics. A nil reg registers nothing and returns c, which
// then still works but is never exported.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
		return c, fmt.Errorf("metrics: a collector of another type (%T) already registered the same metrics as %T", are.ExistingCollector, c)
	}
	return c, fmt.Errorf("metrics: register %T: %w", c, err)
}
