package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/metrics"
)

// failedStore is a store whose writes have failed.
type failedStore struct{ eventstore.Store }

func (failedStore) Head(context.Context) (uint64, error) { return 7, nil }
func (failedStore) Healthy() error                       { return errors.New("write failed, store unusable until reopened") }

// /healthz answers 503 when the store has failed a write — also through
// the metrics decorator — so that a load balancer stops sending it work.
func TestHealthzReportsAFailedStore(t *testing.T) {
	inner := failedStore{}
	store, err := metrics.InstrumentStore(inner, metrics.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	var logged bytes.Buffer
	healthHandler(StoreCheck(store), slog.New(slog.NewTextHandler(&logged, nil)))(rec, httptest.NewRequest("GET", "/healthz", nil))
	// /healthz needs no token: it tells that the store failed, not how
	// (the log does).
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "store unavailable") ||
		strings.Contains(rec.Body.String(), "unusable") || !strings.Contains(logged.String(), "unusable") {
		t.Fatalf("healthz of a failed store: %d %q, log %q", rec.Code, rec.Body, logged.String())
	}
}
