package httpapi

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/internal/httpfuzz"
	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/pebblekv"
)

// FuzzAPI sends the kv API arbitrary requests — method, key, the
// conditional headers If-Match and If-None-Match, content type and body
// — over the embedded backend in a temporary directory. Whatever the
// request: no panic, no 5xx, every error a problem+json document with
// its status, an answer within a second; and a 200 or 201 to a PUT
// carries the new version as its ETag.
func FuzzAPI(f *testing.F) {
	b, err := pebblekv.Open(f.TempDir(), pebblekv.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	repo := kv.New(b, kv.Limits{MaxValueBytes: 1000})
	f.Cleanup(func() { repo.Close() })
	tokens, err := auth.ParseEnv(writer+":"+string(Writer)+","+viewer+":viewer", Roles())
	if err != nil {
		f.Fatal(err)
	}
	h := New(repo, tokens)
	for _, s := range []struct{ method, key, ifMatch, ifNoneMatch, ct, body string }{
		{"PUT", "a", "", "*", "application/octet-stream", "v1"},
		{"PUT", "a", `"1"`, "", "application/octet-stream", "v2"},
		{"PUT", "a", `"1", "2"`, "", "", "v3"},
		{"PUT", "a", `W/"2"`, "", "", "v3"},
		{"PUT", "a", `*`, "", "", "v3"},
		{"PUT", "a", `"18446744073709551616"`, "", "", "v"},
		{"PUT", "a", `"-1"`, "", "", "v"},
		{"PUT", "b/c/d", "", `"1"`, "text/plain", ""},
		{"PUT", "%00", "", "*", "", "x"},
		{"PUT", "..%2f..", "", "*", "", "x"},
		{"GET", "a", "", `"2"`, "", ""},
		{"GET", "a", `"9"`, "", "", ""},
		{"GET", "", "", "", "", ""},
		{"DELETE", "a", `"2"`, "", "", ""},
		{"DELETE", "a", "", "", "", ""},
		{"HEAD", "a", "", "", "", ""},
		{"POST", "a", "", "", "", "x"},
	} {
		f.Add(s.method, s.key, s.ifMatch, s.ifNoneMatch, s.ct, []byte(s.body), true)
	}
	f.Add("PUT", "a", "", "", "", make([]byte, 1001), true)
	f.Add("PUT", "a", "", "*", "", []byte("x"), false)
	f.Fuzz(func(t *testing.T, method, key, ifMatch, ifNoneMatch, ct string, body []byte, asWriter bool) {
		token := writer
		if !asWriter {
			token = viewer
		}
		req := httpfuzz.Request{Method: method, Target: "/api/kv/" + (&url.URL{Path: key}).EscapedPath(), Header: http.Header{}, Body: body}
		req.Header.Set("Authorization", "Bearer "+token)
		if ifMatch != "" {
			req.Header.Set("If-Match", ifMatch)
		}
		if ifNoneMatch != "" {
			req.Header.Set("If-None-Match", ifNoneMatch)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		rec := httpfuzz.Do(t, h, req, time.Second, nil)
		if rec != nil && method == "PUT" && (rec.Code == 200 || rec.Code == 201) && rec.Header().Get("ETag") == "" {
			t.Fatalf("PUT %q answered %d without an ETag", key, rec.Code)
		}
	})
}
