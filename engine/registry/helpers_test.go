package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
)

const (
	adminToken  = "admin-token-123"
	viewerToken = "viewer-token-123"
	editorTok   = "editor-token-123"
)

func testTokens(t testing.TB) *auth.Tokens {
	t.Helper()
	tokens, err := auth.ParseEnv(adminToken+":schema-admin,"+viewerToken+":viewer,"+editorTok+":editor", append(Roles(), "editor")) // editor: another service's role
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

func openPebble(t testing.TB, dir string) eventstore.Store {
	t.Helper()
	s, err := pebblestore.Open(dir, pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openRegistry(t testing.TB, store eventstore.Store) *Registry {
	t.Helper()
	reg, err := Open(context.Background(), store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg
}

// newServer serves reg under /registry, as logbook flights serve mounts it.
func newServer(t testing.TB, reg *Registry) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/registry/", http.StripPrefix("/registry", Handler(reg, testTokens(t))))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// fixture is a registry on a fresh pebblestore behind an HTTP server.
type fixture struct {
	t     testing.TB
	dir   string
	store eventstore.Store
	reg   *Registry
	srv   *httptest.Server
}

func newFixture(t testing.TB) *fixture {
	f := &fixture{t: t, dir: t.TempDir()}
	f.store = openPebble(t, f.dir)
	t.Cleanup(func() { f.store.Close() })
	f.reg = openRegistry(t, f.store)
	f.srv = newServer(t, f.reg)
	return f
}

// call sends a request with the admin token and returns the status and
// body; it checks the content type of every answer.
func (f *fixture) call(method, path string, body any) (int, string) {
	return f.callAs(adminToken, method, path, body)
}

func (f *fixture) callAs(token, method, path string, body any) (int, string) {
	f.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			f.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, f.srv.URL+"/registry"+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", ContentType)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != ContentType {
		f.t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// want checks a call's status and, if wantBody is not "", its body as JSON.
func (f *fixture) want(method, path string, body any, status int, wantBody string) string {
	f.t.Helper()
	got, b := f.call(method, path, body)
	if got != status {
		f.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, got, status, b)
	}
	if wantBody != "" && !jsonEqual(b, wantBody) {
		f.t.Fatalf("%s %s: body %s, want %s", method, path, b, wantBody)
	}
	return b
}

// wantCode checks a call fails with status and Confluent error code.
func (f *fixture) wantCode(method, path string, body any, status, code int) {
	f.t.Helper()
	got, b := f.call(method, path, body)
	var e struct {
		Code    int    `json:"error_code"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal([]byte(b), &e)
	if got != status || e.Code != code || e.Message == "" {
		f.t.Fatalf("%s %s: status %d body %s, want status %d error_code %d", method, path, got, b, status, code)
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

func schemaBody(s string) map[string]any { return map[string]any{"schema": s} }

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func itoa(n int) string { return strconv.Itoa(n) }
