package httpkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/problem"
)

func TestPathRegexp(t *testing.T) {
	for _, c := range []struct {
		path, capture, want string
		match, miss         []string
	}{
		{"/api/rotations", "", `^/api/rotations$`, []string{"/api/rotations"}, []string{"/api/rotations/x", "/api/rotationsx"}},
		{"/api/rotations/{id}/legs/{leg}", "id", `^/api/rotations/(?<id>[^/]+)/legs/[^/]+$`, []string{"/api/rotations/R1/legs/L2"}, []string{"/api/rotations/R1/legs", "/api/rotations/R1/legs/L2/x"}},
		{"/api/kv/{key...}", "", `^/api/kv/.*$`, []string{"/api/kv/a/b/c"}, []string{"/api/k"}},
		{"/queries/", "", `^/queries/`, []string{"/queries/events"}, []string{"/query"}},
		{"/a.b/{x}", "", `^/a\.b/[^/]+$`, []string{"/a.b/1"}, []string{"/axb/1"}},
	} {
		s := Spec{Method: "GET", Path: c.path}
		got := s.PathRegexp(c.capture)
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.path, got, c.want)
		}
		re := regexp.MustCompile(strings.ReplaceAll(got, "(?<", "(?P<"))
		for _, m := range c.match {
			if !re.MatchString(m) {
				t.Errorf("%s does not match %s", got, m)
			}
		}
		for _, m := range c.miss {
			if re.MatchString(m) {
				t.Errorf("%s matches %s", got, m)
			}
		}
	}
	if w := (Spec{Path: "/a/{id}/b/{rest...}"}).Wildcards(); fmt.Sprint(w) != "[id rest]" {
		t.Errorf("wildcards %v", w)
	}
}

type thing struct{ calls int }

func TestMount(t *testing.T) {
	const editor auth.Role = "editor" // a role a service would declare
	tokens := auth.NewTokens([]auth.Role{editor})
	_ = tokens.Add("editor-token", editor)
	_ = tokens.Add("viewer-token", auth.Viewer)
	ok := func(a *thing, w http.ResponseWriter, r *http.Request) error {
		a.calls++
		return WriteJSON(w, 200, map[string]string{"ok": r.Pattern})
	}
	routes := []Route[*thing]{
		{Spec: Spec{Method: "POST", Path: "/c/{id}", Role: editor, Kind: Command}, Handle: ok},
		{Spec: Spec{Method: "GET", Path: "/v", Role: auth.Viewer, Kind: ViewQuery, Query: []string{"q", MinPosition}}, Handle: ok},
		{Spec: Spec{Method: "GET", Path: "/doc", Public: true, Kind: Anywhere}, Handle: ok},
	}
	do := func(node Node, method, path, token string) (int, string) {
		mux := http.NewServeMux()
		Mount(mux, routes, &thing{}, node, tokens, nil)
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		mux.ServeHTTP(rec, req)
		var raw map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &raw)
		typ, _ := raw["type"].(string)
		return rec.Code, typ
	}
	full := Node{WriteModel: true, Views: true}
	for _, c := range []struct {
		node              Node
		method, path, tok string
		status            int
		typ               string
	}{
		{full, "POST", "/c/1", "editor-token", 200, ""},
		{full, "POST", "/c/1", "viewer-token", 403, "about:blank"},
		{full, "POST", "/c/1", "", 401, "about:blank"},
		{full, "GET", "/v?q=1&min_position=3", "viewer-token", 200, ""},
		{full, "GET", "/v?nonce=1", "viewer-token", 400, TypeInvalidRequest},
		{full, "GET", "/doc", "", 200, ""},
		{Node{Views: true}, "POST", "/c/1", "editor-token", 421, TypeMisdirected},
		{Node{WriteModel: true}, "GET", "/v", "viewer-token", 421, TypeMisdirected},
		{Node{WriteModel: true}, "GET", "/doc", "", 200, ""},
		{Node{Views: true}, "POST", "/c/1", "viewer-token", 403, "about:blank"}, // the role is checked first
	} {
		status, typ := do(c.node, c.method, c.path, c.tok)
		if status != c.status || (c.typ != "" && typ != c.typ) {
			t.Errorf("%+v %s %s (%s): %d %q, want %d %q", c.node, c.method, c.path, c.tok, status, typ, c.status, c.typ)
		}
	}
}

func TestWriteError(t *testing.T) {
	errDomain := errors.New("domain thing")
	domain := func(err error) (problem.Details, bool) {
		if errors.Is(err, errDomain) {
			return Problem(http.StatusTeapot, "urn:test:domain", err.Error()), true
		}
		return problem.Details{}, false
	}
	for _, c := range []struct {
		err    error
		status int
		typ    string
	}{
		{BadRequest("bad %d", 1), 400, TypeInvalidRequest},
		{&eventstore.ConflictError{Stream: "s", Actual: 3}, 409, TypeVersionConflict},
		{fmt.Errorf("wrapped: %w", errDomain), 418, "urn:test:domain"},
		{aggregate.ErrExists, 409, TypeExists},
		{aggregate.ErrKeyReused, 422, TypeKeyReused},
		{aggregate.ErrNotFound, 404, TypeNotFound},
		{eventstore.ErrInvalidStreamID, 400, TypeInvalidRequest},
		{eventstore.ErrEventTooLarge, 413, TypeTooLarge},
		{aggregate.ErrClosed, 503, TypeUnavailable},
		{errors.New("bug"), 500, TypeInternal},
	} {
		rec := httptest.NewRecorder()
		WriteError(rec, c.err, domain)
		var raw map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &raw)
		if rec.Code != c.status || raw["type"] != c.typ || rec.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%v: %d %v, want %d %s", c.err, rec.Code, raw["type"], c.status, c.typ)
		}
	}
	rec := httptest.NewRecorder()
	WriteError(rec, &eventstore.ConflictError{Stream: "s", Actual: 3}, nil)
	if !strings.Contains(rec.Body.String(), `"actual_version":3`) {
		t.Errorf("conflict without its actual version: %s", rec.Body)
	}
}
