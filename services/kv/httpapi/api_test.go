package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/engine/httpkit/openapitest"
	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/pebblekv"
)

const (
	writer = "writer-token-0123456789"
	viewer = "viewer-token-0123456789"
)

func server(t *testing.T) *httptest.Server {
	b, err := pebblekv.Open(t.TempDir(), pebblekv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	repo := kv.New(b, kv.Limits{MaxValueBytes: 1000})
	tokens, err := auth.ParseEnv(writer+":"+string(Writer)+","+viewer+":viewer", Roles())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(repo, tokens))
	t.Cleanup(func() { srv.Close(); repo.Close() })
	return srv
}

type resp struct {
	status  int
	etag    string
	body    string
	problem map[string]any
}

func do(t *testing.T, srv *httptest.Server, token, method, path, body string, hdr ...string) resp {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	out := resp{status: res.StatusCode, etag: res.Header.Get("ETag"), body: string(b)}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") {
		if err := json.Unmarshal(b, &out.problem); err != nil {
			t.Fatalf("problem body %q: %v", b, err)
		}
	}
	return out
}

func want(t *testing.T, r resp, status int, typ string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d (%s)", r.status, status, r.body)
	}
	if typ != "" && (r.problem == nil || r.problem["type"] != typ) {
		t.Fatalf("problem %v, want type %s", r.problem, typ)
	}
}

func TestConditionalRequests(t *testing.T) {
	srv := server(t)
	want(t, do(t, srv, viewer, "GET", "/api/kv/a/b", ""), 404, "urn:logbook:problem:not-found")
	// A write needs a precondition.
	want(t, do(t, srv, writer, "PUT", "/api/kv/a/b", "x"), 428, TypePreconditionRequired)
	want(t, do(t, srv, writer, "DELETE", "/api/kv/a/b", ""), 428, TypePreconditionRequired)
	// If-Match on an absent key: 404.
	want(t, do(t, srv, writer, "PUT", "/api/kv/a/b", "x", "If-Match", `"1"`), 404, "urn:logbook:problem:not-found")
	// Add with If-None-Match: *, then again: 412.
	r := do(t, srv, writer, "PUT", "/api/kv/a/b", "v1", "If-None-Match", "*")
	want(t, r, 201, "")
	if r.etag != `"1"` {
		t.Fatalf("ETag after add: %q", r.etag)
	}
	want(t, do(t, srv, writer, "PUT", "/api/kv/a/b", "v1", "If-None-Match", "*"), 412, TypePreconditionFailed)
	r = do(t, srv, viewer, "GET", "/api/kv/a/b", "")
	if r.status != 200 || r.body != "v1" || r.etag != `"1"` {
		t.Fatalf("GET: %+v", r)
	}
	want(t, do(t, srv, viewer, "GET", "/api/kv/a/b", "", "If-None-Match", `"1"`), 304, "")
	want(t, do(t, srv, viewer, "GET", "/api/kv/a/b", "", "If-None-Match", `"7", W/"1"`), 304, "")
	// Update at the current version, then at the old one: 412 with the
	// current version.
	r = do(t, srv, writer, "PUT", "/api/kv/a/b", "v2", "If-Match", `"1"`)
	want(t, r, 204, "")
	if r.etag != `"2"` {
		t.Fatalf("ETag after update: %q", r.etag)
	}
	r = do(t, srv, writer, "PUT", "/api/kv/a/b", "lost", "If-Match", `"1"`)
	want(t, r, 412, TypePreconditionFailed)
	if r.problem["current_version"] != float64(2) {
		t.Fatalf("412 without the current version: %v", r.problem)
	}
	r = do(t, srv, viewer, "GET", "/api/kv/a/b", "", "If-None-Match", `"1"`)
	if r.status != 200 || r.body != "v2" || r.etag != `"2"` {
		t.Fatalf("GET after update with an old If-None-Match: %+v", r)
	}
	// Delete cascades.
	want(t, do(t, srv, writer, "PUT", "/api/kv/a", "parent", "If-None-Match", "*"), 201, "")
	want(t, do(t, srv, writer, "DELETE", "/api/kv/a", "", "If-Match", `"2"`), 412, TypePreconditionFailed)
	want(t, do(t, srv, writer, "DELETE", "/api/kv/a", "", "If-Match", `"1"`), 204, "")
	want(t, do(t, srv, viewer, "GET", "/api/kv/a/b", ""), 404, "")
	want(t, do(t, srv, writer, "DELETE", "/api/kv/a", "", "If-Match", `"1"`), 404, "")
}

func TestBadRequests(t *testing.T) {
	srv := server(t)
	// Tokens and roles.
	want(t, do(t, srv, "", "GET", "/api/kv/a", ""), 401, "")
	want(t, do(t, srv, viewer, "PUT", "/api/kv/a", "x", "If-None-Match", "*"), 403, "")
	// Ids.
	for _, path := range []string{"/api/kv/", "/api/kv/a/", "/api/kv/%2Fa", "/api/kv/a%00b", "/api/kv/" + strings.Repeat("x", 513)} {
		want(t, do(t, srv, writer, "PUT", path, "x", "If-None-Match", "*"), 400, "urn:logbook:problem:invalid-request")
		want(t, do(t, srv, viewer, "GET", path, ""), 400, "urn:logbook:problem:invalid-request")
	}
	// Entity tags.
	for _, h := range [][]string{
		{"If-Match", "1"}, {"If-Match", `"0"`}, {"If-Match", `"x"`}, {"If-Match", `"1", "2"`}, {"If-Match", "*"},
		{"If-None-Match", `"1"`}, {"If-Match", `"1"`, "If-None-Match", "*"},
	} {
		want(t, do(t, srv, writer, "PUT", "/api/kv/a", "x", h...), 400, "urn:logbook:problem:invalid-request")
	}
	want(t, do(t, srv, viewer, "GET", "/api/kv/a", "", "If-None-Match", "*"), 400, "")
	want(t, do(t, srv, viewer, "GET", "/api/kv/a", "", "If-None-Match", "bare"), 400, "")
	// Values over the limit: 413, with or without a Content-Length.
	want(t, do(t, srv, writer, "PUT", "/api/kv/a", strings.Repeat("x", 1001), "If-None-Match", "*"), 413, "urn:logbook:problem:too-large")
	want(t, do(t, srv, writer, "PUT", "/api/kv/a", strings.Repeat("x", 1000), "If-None-Match", "*"), 201, "")
	// Unknown query parameters.
	want(t, do(t, srv, viewer, "GET", "/api/kv/a?x=1", ""), 400, "")
}

func TestChunkedBodyOverLimit(t *testing.T) {
	srv := server(t)
	req, _ := http.NewRequest("PUT", srv.URL+"/api/kv/big", io.MultiReader(strings.NewReader(strings.Repeat("y", 1500))))
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer "+writer)
	req.Header.Set("If-None-Match", "*")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 413 {
		t.Fatalf("chunked body over the limit: %d", res.StatusCode)
	}
}

// TestOpenAPIMatchesRoutes: the document describes exactly the table's
// routes, with their query parameters.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	openapitest.CheckDocumented(t, OpenAPI(), httpkit.Specs(Routes))
}
