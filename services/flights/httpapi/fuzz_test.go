package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/services/flights"
)

// fuzzServer is the flights API over a real service on a fresh embedded
// store, holding a rotation with two legs, an airplane and an airport.
func fuzzServer(f *testing.F) http.Handler {
	store, err := pebblestore.Open(f.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	svc, err := flights.New(context.Background(), store, flights.Options{})
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(func() {
		cancel()
		svc.Close()
		store.Close()
	})
	tokens := auth.NewTokens(Roles())
	_ = tokens.Add(plannerToken, Planner)
	_ = tokens.Add(viewerToken, auth.Viewer)
	h := New(ctx, svc, tokens)
	for _, c := range [][2]string{
		{"/api/rotations", `{"id":"R1"}`},
		{"/api/rotations/R1/legs", fmt.Sprintf(legJSON, 400, "FRA", "MUC", 6, 7)},
		{"/api/rotations/R1/legs", fmt.Sprintf(legJSON, 401, "MUC", "FRA", 8, 9)},
		{"/api/airplanes", `{"registration":"D-AIZA","type":"A320","min_ground_time":150}`},
	} {
		req := httptest.NewRequest("POST", c[0], strings.NewReader(c[1]))
		req.Header.Set("Authorization", "Bearer "+plannerToken)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 201 {
			f.Fatalf("setup %s: %d %s", c[0], rec.Code, rec.Body)
		}
	}
	return h
}

// FuzzAPI sends the flights API arbitrary requests — method, path, query,
// content type and body, as a planner or a viewer — against a real
// service. Whatever the request: no panic, no 5xx (but a 503 when a
// min_position wait times out, which is the answer for a view that is
// behind), every JSON answer valid JSON, every error a problem document
// with its status, every success as openapi.json describes it.
func FuzzAPI(f *testing.F) {
	h := fuzzServer(f)
	type seed struct {
		method, path, query, ct, body string
		planner                       bool
	}
	leg := fmt.Sprintf(legJSON, 402, "FRA", "CDG", 10, 11)
	for _, s := range []seed{
		{"GET", "/api/validity", "", "", "", false},
		{"GET", "/api/violations", "check=continuity&limit=5&from=2026-03-01&to=2026-04-01", "", "", false},
		{"GET", "/api/violations", "cursor=AAAAAAAAAAAB", "", "", false},
		{"GET", "/api/violations/counts", "min_position=1", "", "", false},
		{"GET", "/api/checks/min_ground_time", "rotation=R1&airline=LH", "", "", false},
		{"GET", "/api/validation/digest", "nonce=1", "", "", false},
		{"GET", "/api/board/lanes", "airline=LH&from=2026-03-29&to=2026-03-30", "", "", false},
		{"GET", "/api/board/legs", "rotations=R1&rotations=R1&from=2026-03-29&to=2026-03-30", "", "", false},
		{"GET", "/api/board/meta", "", "", "", false},
		{"GET", "/api/session", "", "", "", false},
		{"GET", "/api/live", "", "", "", false},
		{"GET", "/api/openapi.json", "", "", "", false},
		{"GET", "/api/rotations/R1", "", "", "", false},
		{"GET", "/api/rotations/R1/violations", "cursor=x", "", "", false},
		{"GET", "/api/rotations/%01", "", "", "", false},
		{"GET", "/api/airplanes/D-AIZA", "", "", "", false},
		{"GET", "/api/airports/FRA", "", "", "", false},
		{"GET", "/api/imports/nope", "", "", "", false},
		{"POST", "/api/rotations", "", "application/json", `{"id":"R2"}`, true},
		{"POST", "/api/rotations", "", "application/json", `{}`, true},
		{"POST", "/api/rotations/R1/legs", "", "application/json", leg, true},
		{"POST", "/api/rotations/R1/legs/bulk", "", "application/json", `{"legs":[` + leg + `]}`, true},
		{"PATCH", "/api/rotations/R1/legs/x", "", "application/json", `{"departure":"2026-03-29T05:00:00Z","arrival":"2026-03-29T06:00:00Z"}`, true},
		{"DELETE", "/api/rotations/R1/legs/x", "", "", "", true},
		{"DELETE", "/api/rotations/R9", "", "", "", true},
		{"POST", "/api/airplanes", "", "application/json", `{"registration":"D-AIZB","type":"A320","min_ground_time":45}`, true},
		{"PUT", "/api/airplanes/D-AIZA/rotation", "", "application/json", `{"rotation":"R1"}`, true},
		{"DELETE", "/api/airplanes/D-AIZA/rotation", "", "", "", true},
		{"PUT", "/api/airplanes/D-AIZA/min-ground-time", "", "application/json", `{"minutes":50}`, true},
		{"PUT", "/api/airports/FRA/min-ground-time", "", "application/json", `{"minutes":-5}`, true},
		{"POST", "/api/imports", "", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"ssim\"; filename=\"a.ssim\"\r\n\r\n1AIRLINE\r\n--b--\r\n", true},
		{"POST", "/api/rotations", "", "text/plain", `{"id":"R3"}`, false},
		{"OPTIONS", "/api/validity", "", "", "", false},
		{"GET", "/api/no/such", "", "", "", true},
	} {
		f.Add(s.method, s.path, s.query, s.ct, []byte(s.body), s.planner)
	}
	f.Fuzz(func(t *testing.T, method, path, query, ct string, body []byte, planner bool) {
		if !strings.HasPrefix(path, "/api/") { // the API serves /api/ only
			path = "/api/" + strings.TrimPrefix(path, "/")
		}
		target := path
		if query != "" {
			target += "?" + query
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, "http://logbook"+target, bytes.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		tok := viewerToken
		if planner {
			tok = plannerToken
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		res := rec.Result()
		raw, _ := io.ReadAll(res.Body)
		ctype := res.Header.Get("Content-Type")
		if res.StatusCode >= 500 && !(res.StatusCode == 503 && strings.Contains(req.URL.RawQuery, "min_position")) {
			t.Fatalf("%s %s: %d %s", method, target, res.StatusCode, raw)
		}
		switch {
		case strings.HasPrefix(ctype, "application/problem+json"):
			var p struct {
				Status int    `json:"status"`
				Title  string `json:"title"`
			}
			if err := json.Unmarshal(raw, &p); err != nil || p.Status != res.StatusCode || p.Title == "" {
				t.Fatalf("%s %s: %d, not a problem document (%v): %s", method, target, res.StatusCode, err, raw)
			}
		case strings.HasPrefix(ctype, "application/json"):
			if !json.Valid(raw) {
				t.Fatalf("%s %s: %d, invalid JSON: %s", method, target, res.StatusCode, raw)
			}
			if res.StatusCode < 300 {
				answers.Check(t, req.Method, req.URL.RequestURI(), res.StatusCode, ctype, raw)
			}
		case res.StatusCode >= 400:
			t.Fatalf("%s %s: error %d as %q: %s", method, target, res.StatusCode, ctype, raw)
		}
	})
}
