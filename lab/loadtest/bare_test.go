package loadtest

import (
	"context"
	"encoding/json"
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
		mu.Lock()
		got = append(got, a)
		mu.Unlock()
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

// TestBareServerAnswersLikeTheFlightsAPI: one planner's commands get the
// same statuses, header names and top-level body fields from the bare
// server as from the flights API itself, so that it answers what the
// API answers and does no more.
func TestBareServerAnswersLikeTheFlightsAPI(t *testing.T) {
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
	b, err := StartBareServer()
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
		t.Errorf("answers differ:\nflights API %+v\nbare server %+v", api, base)
	}
}

// TestRunCeiling: the bare server answers the whole workload, and the
// ratio is the measured figure over its own.
func TestRunCeiling(t *testing.T) {
	cfg := WriteConfig{Users: 3, Legs: 4, Waves: 1}
	for _, direct := range []bool{false, true} {
		cfg.Direct = direct
		c, err := RunCeiling(t.Context(), cfg, 3, 0)
		if err != nil {
			t.Fatal(err)
		}
		if c.Requests != 3*(4+3) || c.Failures != 0 || c.CommandsPerSec <= 0 {
			t.Fatalf("direct=%v: %+v", direct, c)
		}
		r := WriteResult{CommandsPerSec: c.CommandsPerSec / 4}.WithCeiling(c)
		if r.Ceiling == nil || r.Ceiling.Ratio != 0.25 || r.Ceiling.Requests != c.Requests {
			t.Errorf("direct=%v: WithCeiling gave %+v", direct, r.Ceiling)
		}
	}
	if r := (WriteResult{CommandsPerSec: 10}).WithCeiling(CeilingResult{}); r.Ceiling.Ratio != 0 {
		t.Errorf("a ceiling of no commands gave a ratio of %v", r.Ceiling.Ratio)
	}
}
