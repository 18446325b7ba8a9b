package auth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tok, err := ParseFile(strings.NewReader("# tokens\n\nplanner-secret planner\nviewer-secret viewer\n"), "t")
	if err != nil || tok.Len() != 2 {
		t.Fatalf("%v %v", tok, err)
	}
	if r, ok := tok.Lookup("planner-secret"); !ok || r != Planner {
		t.Fatal("planner token not found")
	}
	if _, ok := tok.Lookup("planner-secreT"); ok {
		t.Fatal("a wrong token was accepted")
	}
	for in, want := range map[string]string{
		"only-one-field\n":        "t:1: want \"token role\"",
		"short planner\n":         "shorter than 8",
		"long-enough-token god\n": "unknown role",
	} {
		if _, err := ParseFile(strings.NewReader(in), "t"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
	env, err := ParseEnv("aaaaaaaa:planner, bbbbbbbb:viewer, cccccccc:booker")
	if err != nil || env.Len() != 3 {
		t.Fatal(env, err)
	}
	// A booker books tickets and reads, but does not plan flights.
	if r, _ := env.Lookup("cccccccc"); r != Booker || !r.Has(Booker) || !r.Has(Viewer) || r.Has(Planner) || r.CanWrite() {
		t.Errorf("booker role: %q", r)
	}
	if r, _ := env.Lookup("aaaaaaaa"); r.Has(Booker) {
		t.Error("a planner may book")
	}
	if _, err := ParseEnv("aaaaaaaa"); err == nil {
		t.Fatal("missing role accepted")
	}
}

func TestRequire(t *testing.T) {
	tok, _ := ParseEnv("planner-token:planner,viewer-token:viewer")
	h := tok.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	for _, c := range []struct {
		method, token string
		status        int
	}{
		{"GET", "", 401}, {"GET", "nope-nope", 401}, {"GET", "viewer-token", 200},
		{"POST", "viewer-token", 403}, {"DELETE", "viewer-token", 403}, {"POST", "planner-token", 200},
	} {
		req := httptest.NewRequest(c.method, "/x", nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.status {
			t.Errorf("%s with %q: %d, want %d", c.method, c.token, rec.Code, c.status)
		}
		if c.status >= 400 && rec.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s with %q: not problem+json", c.method, c.token)
		}
	}
}

// The scheme of an Authorization header is case-insensitive (RFC 9110).
func TestBearerSchemeCaseInsensitive(t *testing.T) {
	tokens := &Tokens{}
	if err := tokens.Add("viewer-token-1", Viewer); err != nil {
		t.Fatal(err)
	}
	h := tokens.RequireRole(Viewer, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("Authorization", scheme+" viewer-token-1")
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("scheme %q: %d", scheme, rec.Code)
		}
	}
}

// The schema-admin role: a token of its own, which reads like any token,
// may use routes that need it, and may not change the schedule. Tokens
// are accepted as the password of basic auth too.
func TestSchemaAdminAndBasicAuth(t *testing.T) {
	tok, err := ParseEnv("admin-secret:schema-admin,viewer-secret:viewer,planner-secret:planner")
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	schedule, registry := tok.Require(ok), tok.RequireRole(SchemaAdmin, ok)
	for _, c := range []struct {
		h              http.Handler
		method         string
		user, password string
		want           int
	}{
		{registry, "POST", "x", "admin-secret", 204},
		{registry, "POST", "", "viewer-secret", 403},
		{registry, "POST", "", "planner-secret", 403},
		{registry, "GET", "admin-secret", "", 401}, // the token is the password, not the user
		{registry, "GET", "x", "wrong-secret", 401},
		{schedule, "POST", "x", "admin-secret", 403},
		{schedule, "GET", "x", "admin-secret", 204},
		{schedule, "POST", "x", "planner-secret", 204},
	} {
		req := httptest.NewRequest(c.method, "/", nil)
		req.SetBasicAuth(c.user, c.password)
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s as %q:%q: %d, want %d", c.method, c.user, c.password, rec.Code, c.want)
		}
	}
}
