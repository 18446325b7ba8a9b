// Package webui serves the web UI: the TypeScript application in web/,
// built by Vite into dist/ and embedded in the logbook binary, so that
// `logbook flights serve`, `logbook tickets serve` and `logbook notify
// serve` need no files beside them. The build has one page per service — index.html,
// the planners' schedule board, tickets.html, the tickets page, and
// notify.html, the notify service's send and metrics page — over shared
// assets, and admin.html, the operator's page every server serves at
// /admin; each server serves its own page at "/" (Handler, TicketsHandler,
// NotifyHandler) and never another's. In a fresh clone dist/ holds only a keep-file, and "/"
// serves placeholder.html, which says how to build the UI
// (scripts/ui.sh): the Go build never depends on npm having run.
package webui

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed all:dist
var dist embed.FS

//go:embed placeholder.html
var placeholder []byte

// Handler serves the flights UI, the schedule board: index.html at "/"
// (and at any path that is not a file, so that a reloaded deep link still
// loads the application), the hashed assets under /assets/ with a year's
// cache lifetime — Vite puts a content hash in their names, so a new build
// is a new URL — and everything else revalidated on every load.
func Handler() http.Handler {
	return handler(dist, "index.html")
}

// TicketsHandler serves the tickets service's UI as Handler serves the
// board: tickets.html at "/" and at every path that is not a file.
func TicketsHandler() http.Handler {
	return handler(dist, "tickets.html")
}

// NotifyHandler serves the notify service's UI (send, dead letters,
// metrics) as Handler serves the board: notify.html at "/" and at every
// path that is not a file.
func NotifyHandler() http.Handler {
	return handler(dist, "notify.html")
}

// AdminPage is the operator's page, which every server serves at /admin
// (and /admin.html) beside its own: streams and their events, the head,
// the views' positions and lags, the Kafka publisher, over the server's
// admin API (engine/admin, under /admin/api/).
const AdminPage = "admin.html"

// handler serves page for "/", for any path that is not a file, and for
// any page of the build (a .html file) but the admin page: the other
// service's page would only fail against this server's API.
func handler(fsys fs.FS, page string) http.Handler {
	sub, err := fs.Sub(fsys, "dist")
	if err != nil {
		panic(err) // the embed pattern guarantees dist exists
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
		if name == "admin" || name == "admin.html" {
			// Every server's own store, through its admin API.
			servePage(w, r, sub, AdminPage)
			return
		}
		if name == "" || strings.HasSuffix(name, ".html") || !exists(sub, name) {
			servePage(w, r, sub, page)
			return
		}
		if strings.HasPrefix(name, "assets/") {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		setSecurityHeaders(w)
		files.ServeHTTP(w, r)
	})
}

func exists(fsys fs.FS, name string) bool {
	st, err := fs.Stat(fsys, name)
	return err == nil && !st.IsDir()
}

func servePage(w http.ResponseWriter, r *http.Request, fsys fs.FS, page string) {
	b, err := fs.ReadFile(fsys, page)
	if err != nil {
		b = placeholder // not built
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// A page names the current assets: it must never be stale.
	w.Header().Set("Cache-Control", "no-cache")
	setSecurityHeaders(w)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(b)
}

// setSecurityHeaders: the UI loads only its own scripts and styles, and
// talks only to its own origin; the bearer token it holds in the page is
// then out of reach of injected markup.
func setSecurityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}
