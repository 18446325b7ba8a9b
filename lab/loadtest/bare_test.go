package loadtest

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/services/flights"
	"github.com/logbook/logbook/services/flights/httpapi"
)

// answer is what a client sees of one answer, values aside.
type answer struct {
	status  int
	headers []string // names, Date and Content-Length left out
	fields  []string // the JSON body's top-level names
}

// recordAnswers serves h and records every answer's shape, in order.
func recordAnswers(t *testing.T, h http.Handler) (*httptest.Server, func() []answer) {
	var mu sync.Mutex
	var got []answer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		a := answer{status: rec.Code}
		for k := range rec.Header() {
			if k != "Date" && k != "Content-Length" {
				a.headers = append(a.headers, k)
			}
		}
		slices.Sort(a.headers)
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Errorf("%s %s: answer %q is not a JSON object", r.Method, r.URL.Path, rec.Body.Bytes())
		}
		for k := range body {
			a.fields = append(a.fields, k)
		}
		slices.Sort(a.fields)
		if r.URL.Path != "/healthz" && r.URL.Path != "/api/validity" {
			mu.Lock()
			got = append(got, a)
			mu.Unlock()
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	return srv, func() []answer {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// TestBaselineAnswersLikeTheFlightsAPI: one planner's commands get the
// same statuses, header names and body fields from the baseline as from
// the flights API itself, so that the baseline does the API's HTTP work
// and only that.
func TestBaselineAnswersLikeTheFlightsAPI(t *testing.T) {
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	svc, err := flights.New(context.Background(), store, flights.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	tokens := auth.NewTokens(httpapi.Roles())
	if err := tokens.Add("planner-token", httpapi.Planner); err != nil {
		t.Fatal(err)
	}
	apiSrv, apiAnswers := recordAnswers(t, httpapi.New(t.Context(), svc, tokens))
	b, err := StartBaseline()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	baseSrv, baseAnswers := recordAnswers(t, b)

	cfg := WriteConfig{Users: 1, Legs: 3, Waves: 1}
	for _, srv := range []*httptest.Server{apiSrv, baseSrv} {
		c := NewClient(srv.URL, "planner-token", 1, 0)
		res, err := RunWrite(t.Context(), c, cfg)
		c.Close()
		if err != nil || res.Failures != 0 {
			t.Fatalf("%s: %+v, %v", srv.URL, res, err)
		}
	}
	api, base := apiAnswers(), baseAnswers()
	if len(api) != cfg.Legs+3 {
		t.Fatalf("the API answered %d commands, want %d", len(api), cfg.Legs+3)
	}
	if !reflect.DeepEqual(api, base) {
		t.Errorf("answers differ:\nflights API %+v\nbaseline    %+v", api, base)
	}
}

// TestRunBaseline: the baseline run answers the whole workload and its
// ratio is the measured figure over its own.
func TestRunBaseline(t *testing.T) {
	cfg := WriteConfig{Users: 3, Legs: 4, Waves: 1}
	for _, direct := range []bool{false, true} {
		cfg.Direct = direct
		res, err := RunBaseline(t.Context(), cfg, 3, 0, 1234)
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests != 3*(4+3) || res.Failures != 0 || res.CommandsPerSec <= 0 {
			t.Fatalf("direct=%v: %+v", direct, res)
		}
		if want := math.Round(1234/res.CommandsPerSec*1000) / 1000; res.Ratio != want {
			t.Errorf("direct=%v: ratio %v, want %v", direct, res.Ratio, want)
		}
	}
}
