// Package accesslog records every request an HTTP server answers: one log
// line (method, route pattern, status, duration, bytes) and Prometheus
// metrics, a counter and a duration histogram of requests by route
// pattern and status.
//
// The route is the net/http ServeMux pattern that matched the request
// (Request.Pattern, e.g. "GET /api/checks/{kind}"), not its path, so that
// the metrics have one series per route rather than one per URL; requests
// no pattern matched are counted under "unmatched". Wrap the outermost
// mux: ServeMux sets Pattern on the request it is given, and nested muxes
// that pass the same request on leave the innermost pattern there.
package accesslog

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/metrics"
)

// Options configures Wrap.
type Options struct {
	// Logger receives one line per request, at Info, or at Error for a
	// 5xx (nil: slog.Default()).
	Logger *slog.Logger
	// Registerer receives logbook_http_requests_total and
	// logbook_http_request_duration_seconds (nil: no metrics).
	Registerer prometheus.Registerer
}

// unmatched is the route of requests no pattern matched.
const unmatched = "unmatched"

// Wrap returns next with every request logged and counted.
func Wrap(next http.Handler, opts Options) (http.Handler, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	requests, err := metrics.Register(opts.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "logbook_http_requests_total",
		Help: "HTTP requests answered, by route pattern and status code.",
	}, []string{"route", "code"}))
	if err != nil {
		return nil, err
	}
	durations, err := metrics.Register(opts.Registerer, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "logbook_http_request_duration_seconds",
		Help:    "Time from a request's headers to the end of its answer, by route pattern and status code.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"route", "code"}))
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		defer func() {
			el := time.Since(start)
			status := rec.status
			if status == 0 {
				status = http.StatusOK // nothing written: net/http answers 200
			}
			route := r.Pattern
			if route == "" {
				route = unmatched
			}
			code := strconv.Itoa(status)
			requests.WithLabelValues(route, code).Inc()
			durations.WithLabelValues(route, code).Observe(el.Seconds())
			// A failure of the server's own (5xx) is an error: a log
			// kept at warnings, or one that holds information back,
			// still shows it at once.
			level := slog.LevelInfo
			if status >= 500 {
				level = slog.LevelError
			}
			log.LogAttrs(r.Context(), level, "http request",
				slog.String("method", r.Method),
				slog.String("route", route),
				slog.String("path", r.URL.Path),
				slog.Int("status", status),
				slog.Duration("duration", el),
				slog.Int64("bytes", rec.bytes))
		}()
		next.ServeHTTP(rec, r)
	}), nil
}

// recorder notes the status and counts the bytes of an answer. It passes
// Flush on (streams need it) and unwraps for http.ResponseController.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Flush sends what is buffered to the client.
func (r *recorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
