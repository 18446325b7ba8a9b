package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/logbook/logbook/services/flights"

	"github.com/logbook/logbook/engine/auth"
)

const (
	plannerToken = "planner-token-1"
	viewerToken  = "viewer-token-1"
)

func newAPI(t *testing.T) (*httptest.Server, *flights.Service) {
	t.Helper()
	return newAPIUntil(t, context.Background())
}

// newAPIUntil serves the API until ctx ends (live streams end with it).
func newAPIUntil(t *testing.T, ctx context.Context) (*httptest.Server, *flights.Service) {
	t.Helper()
	svc, _ := newService(t)
	tokens := auth.NewTokens(Roles())
	if err := tokens.Add(plannerToken, Planner); err != nil {
		t.Fatal(err)
	}
	if err := tokens.Add(viewerToken, auth.Viewer); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(ctx, svc, tokens))
	t.Cleanup(srv.Close)
	return srv, svc
}

type apiResp struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func call(t *testing.T, srv *httptest.Server, token, method, path, body string, headers ...string) apiResp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, srv.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	answers.Check(t, method, path, res.StatusCode, res.Header.Get("Content-Type"), raw)
	out := apiResp{status: res.StatusCode, header: res.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &out.body)
	return out
}

func expect(t *testing.T, r apiResp, status int) apiResp {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	if status >= 400 {
		if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("error content type %q, want application/problem+json", ct)
		}
		if r.body["status"] != float64(status) || r.body["title"] == "" || r.body["detail"] == "" {
			t.Fatalf("not a problem document: %s", r.raw)
		}
	}
	return r
}

const legJSON = `{"airline":"LH","number":%d,"origin":"%s","destination":"%s","departure":"2026-03-29T%02d:00:00Z","arrival":"2026-03-29T%02d:00:00Z"}`

func TestAPIRolesAndAuth(t *testing.T) {
	srv, _ := newAPI(t)
	expect(t, call(t, srv, "", "GET", "/api/validity", ""), 401)
	r := expect(t, call(t, srv, "not-a-token", "GET", "/api/validity", ""), 401)
	if !strings.Contains(r.header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatal("no WWW-Authenticate challenge")
	}
	expect(t, call(t, srv, viewerToken, "GET", "/api/validity", ""), 200)
	expect(t, call(t, srv, viewerToken, "POST", "/api/rotations", `{"id":"r1"}`), 403)
	expect(t, call(t, srv, planner(), "POST", "/api/rotations", `{"id":"r1"}`), 201)
	expect(t, call(t, srv, viewerToken, "GET", "/api/rotations/r1", ""), 200)
	expect(t, call(t, srv, viewerToken, "DELETE", "/api/rotations/r1", ""), 403)
	// The OpenAPI document is public.
	r = call(t, srv, "", "GET", "/api/openapi.json", "")
	if r.status != 200 || r.body["openapi"] == nil {
		t.Fatalf("openapi: %d %.200s", r.status, r.raw)
	}
}

func planner() string { return plannerToken }

func TestAPIErrorsAndCommands(t *testing.T) {
	srv, _ := newAPI(t)
	p := planner()
	expect(t, call(t, srv, p, "POST", "/api/rotations", `{"id":"r1"}`), 201)
	// 400: malformed JSON, unknown fields, bad parameters.
	expect(t, call(t, srv, p, "POST", "/api/rotations/r1/legs", `{"airline":`), 400)
	expect(t, call(t, srv, p, "POST", "/api/rotations/r1/legs", `{"airlne":"LH"}`), 400)
	expect(t, call(t, srv, p, "GET", "/api/violations?check=nonsense", ""), 400)
	expect(t, call(t, srv, p, "GET", "/api/violations?limit=0", ""), 400)
	expect(t, call(t, srv, p, "GET", "/api/violations?from=yesterday", ""), 400)
	expect(t, call(t, srv, p, "GET", "/api/violations?cursor=not-a-cursor!", ""), 400)
	expect(t, call(t, srv, p, "PUT", "/api/airports/FRA/min-ground-time", `{}`), 400)
	expect(t, call(t, srv, p, "POST", "/api/rotations/r1/legs", `{"airline":"LH"}`, "If-Match", "abc"), 400)
	// 404: unknown things.
	expect(t, call(t, srv, p, "GET", "/api/rotations/nope", ""), 404)
	expect(t, call(t, srv, p, "POST", "/api/rotations/nope/legs", fmt.Sprintf(legJSON, 1, "FRA", "MUC", 6, 7)), 404)
	expect(t, call(t, srv, p, "DELETE", "/api/rotations/r1/legs/ghost", ""), 404)
	expect(t, call(t, srv, p, "GET", "/api/rotations/nope/violations", ""), 404)
	expect(t, call(t, srv, p, "GET", "/api/checks/other", ""), 404)
	expect(t, call(t, srv, p, "GET", "/api/no/such/route", ""), 404)
	// 422: a rule broken.
	expect(t, call(t, srv, p, "POST", "/api/rotations/r1/legs", fmt.Sprintf(legJSON, 1, "FRA", "MUC", 9, 7)), 422)
	expect(t, call(t, srv, p, "POST", "/api/rotations/r1/legs", fmt.Sprintf(legJSON, 1, "FRANKFURT", "MUC", 6, 7)), 422)
	expect(t, call(t, srv, p, "PUT", "/api/airports/FRA/min-ground-time", `{"minutes":-5}`), 422)
	// Commands.
	r := expect(t, call(t, srv, p, "POST", "/api/rotations/r1/legs", fmt.Sprintf(legJSON, 1, "FRA", "MUC", 6, 7)), 201)
	legID := r.body["leg"].(string)
	if r.body["version"] != float64(2) || r.header.Get("ETag") != `"2"` {
		t.Fatalf("add leg: %s etag %s", r.raw, r.header.Get("ETag"))
	}
	// 409: overlapping leg, stale If-Match, existing rotation.
	expect(t, call(t, srv, p, "POST", "/api/rotations/r1/legs", fmt.Sprintf(legJSON, 2, "MUC", "FRA", 6, 8)), 409)
	r = expect(t, call(t, srv, p, "POST", "/api/rotations/r1/legs", fmt.Sprintf(legJSON, 3, "MUC", "FRA", 8, 9), "If-Match", `"1"`), 409)
	if r.body["actual_version"] != float64(2) {
		t.Fatalf("conflict without actual version: %s", r.raw)
	}
	expect(t, call(t, srv, p, "POST", "/api/rotations", `{"id":"r1"}`), 409)
	// Idempotency-Key: the retry is answered 200 with the original result.
	first := expect(t, call(t, srv, p, "POST", "/api/rotations/r1/legs", fmt.Sprintf(legJSON, 3, "MUC", "FRA", 8, 9), "Idempotency-Key", "k-1"), 201)
	again := expect(t, call(t, srv, p, "POST", "/api/rotations/r1/legs", fmt.Sprintf(legJSON, 3, "MUC", "FRA", 8, 9), "Idempotency-Key", "k-1"), 200)
	if again.body["duplicate"] != true || again.body["version"] != first.body["version"] || again.body["position"] != first.body["position"] {
		t.Fatalf("retry %s, first %s", again.raw, first.raw)
	}
	got := expect(t, call(t, srv, p, "GET", "/api/rotations/r1", ""), 200)
	if legs := got.body["legs"].([]any); len(legs) != 2 {
		t.Fatalf("rotation has %d legs after a retried add, want 2", len(legs))
	}
	// Move and remove.
	expect(t, call(t, srv, p, "PATCH", "/api/rotations/r1/legs/"+legID, `{"departure":"2026-03-29T05:00:00Z","arrival":"2026-03-29T06:00:00Z"}`), 200)
	expect(t, call(t, srv, p, "PATCH", "/api/rotations/r1/legs/"+legID, `{"departure":"2026-03-29T08:30:00Z","arrival":"2026-03-29T09:30:00Z"}`), 409)
	// Airplanes.
	expect(t, call(t, srv, p, "POST", "/api/airplanes", `{"registration":"D-AIZA","type":"A320","min_ground_time":150}`), 201)
	expect(t, call(t, srv, p, "POST", "/api/airplanes", `{"registration":"D-AIZA","type":"A320","min_ground_time":45}`), 409)
	expect(t, call(t, srv, p, "POST", "/api/airplanes", `{"registration":"bad reg!","type":"A320"}`), 400)
	r = expect(t, call(t, srv, p, "PUT", "/api/airplanes/D-AIZA/rotation", `{"rotation":"r1"}`), 200)
	pos := r.body["position"].(float64)
	// Read-your-writes: wait for the view to reach the command's position.
	v := expect(t, call(t, srv, viewerToken, "GET", fmt.Sprintf("/api/rotations/r1/violations?min_position=%.0f", pos), ""), 200)
	// legs: FRA→MUC 05–06 (moved), MUC→FRA 08–09: continuous, but 120
	// minutes on the ground at MUC is less than the airplane's 150.
	if v.body["valid"] != false || len(v.body["violations"].([]any)) != 1 {
		t.Fatalf("rotation violations: %s", v.raw)
	}
	c := expect(t, call(t, srv, viewerToken, "GET", fmt.Sprintf("/api/checks/min_ground_time?min_position=%.0f", pos), ""), 200)
	if c.body["count"] != float64(1) || c.body["valid"] != false {
		t.Fatalf("ground time check: %s", c.raw)
	}
	c = expect(t, call(t, srv, viewerToken, "GET", "/api/checks/continuity", ""), 200)
	if c.body["count"] != float64(0) || c.body["valid"] != true {
		t.Fatalf("continuity check: %s", c.raw)
	}
	r = expect(t, call(t, srv, p, "DELETE", "/api/airplanes/D-AIZA/rotation", ""), 200)
	v = expect(t, call(t, srv, viewerToken, "GET", fmt.Sprintf("/api/rotations/r1/violations?min_position=%.0f", r.body["position"].(float64)), ""), 200)
	if v.body["valid"] != true {
		t.Fatalf("after unassigning the airplane: %s", v.raw)
	}
	expect(t, call(t, srv, p, "DELETE", "/api/airplanes/D-AIZA/rotation", ""), 404)
	expect(t, call(t, srv, p, "PUT", "/api/airplanes/D-AIZA/min-ground-time", `{"minutes":50}`), 200)
	a := expect(t, call(t, srv, p, "GET", "/api/airplanes/D-AIZA", ""), 200)
	if a.body["min_ground_time"] != float64(50) {
		t.Fatalf("airplane: %s", a.raw)
	}
	expect(t, call(t, srv, p, "DELETE", "/api/airplanes/D-AIZA", ""), 200)
	expect(t, call(t, srv, p, "PUT", "/api/airplanes/D-AIZA/min-ground-time", `{"minutes":10}`), 409)
	expect(t, call(t, srv, p, "DELETE", "/api/rotations/r1", ""), 200)
	expect(t, call(t, srv, p, "POST", "/api/rotations/r1/legs", fmt.Sprintf(legJSON, 5, "FRA", "MUC", 12, 13)), 409)
	// A generated id for a rotation created without one.
	r = expect(t, call(t, srv, p, "POST", "/api/rotations", ""), 201)
	if id, _ := r.body["id"].(string); len(id) != 36 || r.header.Get("Location") != "/api/rotations/"+id {
		t.Fatalf("generated rotation: %s %s", r.raw, r.header.Get("Location"))
	}
	// Wrong content type.
	r = call(t, srv, p, "POST", "/api/airplanes", "")
	req, _ := http.NewRequest("POST", srv.URL+"/api/airplanes", strings.NewReader("registration=x"))
	req.Header.Set("Authorization", "Bearer "+p)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 415 {
		t.Fatalf("form body: %v %v", res.StatusCode, err)
	}
	res.Body.Close()
	_ = r
}
