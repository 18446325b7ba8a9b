package webui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

func testFS() fstest.MapFS {
	return fstest.MapFS{
		"dist/index.html":            {Data: []byte("<!doctype html><title>board</title>")},
		"dist/tickets.html":          {Data: []byte("<!doctype html><title>tickets</title>")},
		"dist/notify.html":           {Data: []byte("<!doctype html><title>notify</title>")},
		"dist/admin.html":            {Data: []byte("<!doctype html><title>admin</title>")},
		"dist/assets/main-abc123.js": {Data: []byte("console.log(1)")},
		"dist/favicon.svg":           {Data: []byte("<svg/>")},
	}
}

func get(t *testing.T, h http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

func TestHandler(t *testing.T) {
	h := handler(testFS(), "index.html")
	for _, path := range []string{"/", "/index.html", "/tickets.html", "/board/some/deep/link"} {
		rec := get(t, h, "GET", path)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), "<title>board</title>") {
			t.Fatalf("GET %s: %d %q, want index.html", path, rec.Code, rec.Body.String())
		}
		if cc := rec.Header().Get("Cache-Control"); cc != "no-cache" {
			t.Fatalf("GET %s: Cache-Control %q: index.html must be revalidated", path, cc)
		}
		if !strings.Contains(rec.Header().Get("Content-Security-Policy"), "script-src 'self'") {
			t.Fatalf("GET %s: no content security policy", path)
		}
	}
	rec := get(t, h, "GET", "/assets/main-abc123.js")
	if rec.Code != 200 || rec.Body.String() != "console.log(1)" {
		t.Fatalf("asset: %d %q", rec.Code, rec.Body.String())
	}
	if cc := rec.Header().Get("Cache-Control"); !strings.Contains(cc, "max-age=31536000") || !strings.Contains(cc, "immutable") {
		t.Fatalf("asset Cache-Control %q, want a long immutable lifetime", cc)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.Contains(ct, "javascript") {
		t.Fatalf("asset Content-Type %q", ct)
	}
	rec = get(t, h, "GET", "/favicon.svg")
	if rec.Code != 200 || rec.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("unhashed file: %d, Cache-Control %q", rec.Code, rec.Header().Get("Cache-Control"))
	}
	if rec := get(t, h, "POST", "/"); rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST /: %d, want 405", rec.Code)
	}
	if rec := get(t, h, "GET", "/../../etc/passwd"); rec.Code != 200 || !strings.Contains(rec.Body.String(), "board") {
		t.Fatalf("a path outside dist: %d %q, want index.html", rec.Code, rec.Body.String())
	}
}

// The tickets server serves the tickets page at "/", at deep links and
// for the board's page, and the same assets.
func TestTicketsHandler(t *testing.T) {
	h := handler(testFS(), "tickets.html")
	for _, path := range []string{"/", "/index.html", "/tickets.html", "/some/link"} {
		rec := get(t, h, "GET", path)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), "<title>tickets</title>") || rec.Header().Get("Cache-Control") != "no-cache" {
			t.Fatalf("GET %s: %d %q (Cache-Control %q), want tickets.html", path, rec.Code, rec.Body.String(), rec.Header().Get("Cache-Control"))
		}
	}
	if rec := get(t, h, "GET", "/assets/main-abc123.js"); rec.Code != 200 || rec.Body.String() != "console.log(1)" {
		t.Fatalf("asset: %d %q", rec.Code, rec.Body.String())
	}
}

// The notify server serves the notify page at "/", at deep links and for
// the other services' pages, and the same assets.
func TestNotifyHandler(t *testing.T) {
	h := handler(testFS(), "notify.html")
	for _, path := range []string{"/", "/index.html", "/tickets.html", "/notify.html", "/metrics/link"} {
		rec := get(t, h, "GET", path)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), "<title>notify</title>") || rec.Header().Get("Cache-Control") != "no-cache" {
			t.Fatalf("GET %s: %d %q (Cache-Control %q), want notify.html", path, rec.Code, rec.Body.String(), rec.Header().Get("Cache-Control"))
		}
	}
	if rec := get(t, h, "GET", "/assets/main-abc123.js"); rec.Code != 200 || rec.Body.String() != "console.log(1)" {
		t.Fatalf("asset: %d %q", rec.Code, rec.Body.String())
	}
}

// Every server serves the admin page at /admin and /admin.html, beside
// its own page.
func TestAdminPage(t *testing.T) {
	for _, page := range []string{"index.html", "tickets.html", "notify.html"} {
		h := handler(testFS(), page)
		for _, path := range []string{"/admin", "/admin.html", "/admin/"} {
			rec := get(t, h, "GET", path)
			if rec.Code != 200 || !strings.Contains(rec.Body.String(), "<title>admin</title>") || rec.Header().Get("Cache-Control") != "no-cache" ||
				!strings.Contains(rec.Header().Get("Content-Security-Policy"), "script-src 'self'") {
				t.Fatalf("%s's GET %s: %d %q, want admin.html", page, path, rec.Code, rec.Body.String())
			}
		}
		if rec := get(t, h, "GET", "/"); strings.Contains(rec.Body.String(), "admin") {
			t.Fatalf("%s's / is the admin page", page)
		}
	}
}

// Before the UI is built, "/" says how to build it.
func TestPlaceholder(t *testing.T) {
	rec := get(t, handler(fstest.MapFS{"dist/.gitkeep": {}}, "tickets.html"), "GET", "/")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "scripts/ui.sh") {
		t.Fatalf("unbuilt UI: %d %.200q, want the placeholder", rec.Code, rec.Body.String())
	}
}

// The embedded tree always answers "/" with a page: the built UI, or the
// placeholder in a fresh clone.
func TestEmbeddedIndex(t *testing.T) {
	for _, h := range []http.Handler{Handler(), TicketsHandler(), NotifyHandler()} {
		rec := get(t, h, "GET", "/")
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), "<html") {
			t.Fatalf("embedded index: %d %.200q", rec.Code, rec.Body.String())
		}
	}
}
