package accesslog_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/logbook/logbook/engine/accesslog"
)

func TestLogAndMetricsByRoutePattern(t *testing.T) {
	inner := http.NewServeMux()
	inner.HandleFunc("GET /api/items/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "missing" {
			http.Error(w, "no such item", http.StatusNotFound)
			return
		}
		_, _ = io.WriteString(w, "item "+r.PathValue("id"))
	})
	inner.HandleFunc("GET /api/stream", func(w http.ResponseWriter, r *http.Request) {
		f, ok := w.(http.Flusher)
		if !ok {
			t.Error("the access log hides http.Flusher from a streaming handler")
			return
		}
		_, _ = io.WriteString(w, "a")
		f.Flush()
	})
	mux := http.NewServeMux()
	mux.Handle("/api/", inner)

	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	h, err := accesslog.Wrap(mux, accesslog.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, path := range []string{"/api/items/1", "/api/items/2", "/api/items/missing", "/api/stream", "/elsewhere"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}

	// One series per route pattern and status, not per path.
	want := `
# HELP logbook_http_requests_total HTTP requests answered, by route pattern and status code.
# TYPE logbook_http_requests_total counter
logbook_http_requests_total{code="200",route="GET /api/items/{id}"} 2
logbook_http_requests_total{code="200",route="GET /api/stream"} 1
logbook_http_requests_total{code="404",route="GET /api/items/{id}"} 1
logbook_http_requests_total{code="404",route="unmatched"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "logbook_http_requests_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "logbook_http_request_duration_seconds"); n != 4 {
		t.Errorf("%d duration series, want 4", n)
	}

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d log lines, want one per request:\n%s", len(lines), logs.String())
	}
	var first struct {
		Msg, Method, Route, Path string
		Status                   int
		Bytes                    int64
		Duration                 float64
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.Msg != "http request" || first.Method != "GET" || first.Route != "GET /api/items/{id}" ||
		first.Path != "/api/items/1" || first.Status != 200 || first.Bytes != int64(len("item 1")) || first.Duration <= 0 {
		t.Errorf("log line %s", lines[0])
	}
}

func TestRegisteringTwiceSharesTheMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		if _, err := accesslog.Wrap(http.NotFoundHandler(), accesslog.Options{Registerer: reg}); err != nil {
			t.Fatal(err)
		}
	}
}

// A request that fails on the server's side (5xx) is logged at error
// level, so that a log kept at warnings (or one that holds information
// lines back and flushes warnings at once) still shows it; a 4xx, the
// client's failure, stays at information level.
func TestServerFailuresAreLoggedAsErrors(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /fail", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "store down", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("GET /bad", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad", http.StatusBadRequest)
	})
	var logs bytes.Buffer
	h, err := accesslog.Wrap(mux, accesslog.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/fail", "/bad"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	levels := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l struct{ Level, Path string }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		levels[l.Path] = l.Level
	}
	if levels["/fail"] != "ERROR" {
		t.Errorf("a 503 is logged at %q, want ERROR", levels["/fail"])
	}
	if levels["/bad"] != "INFO" {
		t.Errorf("a 400 is logged at %q, want INFO", levels["/bad"])
	}
}
