package window

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore/pebblestore"
)

// FuzzQuery asks the windows handler arbitrary queries — group_by,
// unit, from and to, filters on dimensions, limit, final, format, as
// parameters in any number — of an aggregation holding a few events.
// Whatever the query: no panic, no 5xx, every error a problem+json
// document with its status, every 200 valid JSON or NDJSON, an answer
// within a second. (Live queries are left out: they stream until the
// client leaves.)
func FuzzQuery(f *testing.F) {
	st, err := pebblestore.Open(f.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	a, err := Open(f.TempDir(), testDef("sent", Tumbling(time.Minute), 0, time.Hour, 24*time.Hour), Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { a.Close() })
	appendEvents(f, st, []tev{
		ev("2025-03-01T10:00:00Z", "a", "x", 1, "u1"),
		ev("2025-03-01T10:30:00Z", "a", "y", 2, "u2"),
		ev("2025-03-01T11:00:00Z", "b", "x", 3, "u3"),
		ev("2025-03-02T00:00:00Z", "b", "y", 4, "u1"),
	})
	catchUp(f, st, a, 5)
	h := NewHandler([]*Aggregation{a}, HandlerOptions{})
	for _, q := range []string{
		"unit=hour&group_by=kind&sender=a&from=2025-03-01T00:00:00Z&to=2025-03-02T00:00:00Z",
		"unit=day&format=ndjson",
		"unit=minute&from=0001-01-01T00:00:00Z&to=9999-12-31T23:59:59Z",
		"unit=minute&from=2262-04-12T00:00:00Z&to=1677-09-21T00:00:00Z",
		"from=2025-03-02T00:00:00Z&to=2025-03-01T00:00:00Z",
		"group_by=sender,kind,sender&limit=1",
		"group_by=,,&final=true",
		"unit=week", "from=yesterday", "sendr=a", "sender=a&sender=b", "limit=0", "limit=99999999999999999999",
		"live=maybe", "format=sse", "final=maybe",
		"from=2025-03-01T10:00:00%2B14:00&to=2025-03-01T10:00:00-14:00",
	} {
		f.Add("sent", q, "")
	}
	f.Add("sent", "", "application/x-ndjson")
	f.Add("nope", "", "")
	f.Add("sent/x", "", "")
	f.Fuzz(func(t *testing.T, name, query, accept string) {
		v, err := url.ParseQuery(query)
		if err != nil || v.Has("live") && v.Get("live") != "false" && v.Get("live") != "maybe" {
			return // a live query streams until the client leaves
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", "http://logbook/api/windows/"+url.PathEscape(name)+"?"+query, nil)
		if err != nil {
			return
		}
		if accept != "" {
			if strings.ContainsAny(accept, "\r\n\x00") {
				return
			}
			req.Header.Set("Accept", accept)
		}
		w := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(w, req)
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("%q: answered in %v", query, el)
		}
		ct := w.Header().Get("Content-Type")
		switch {
		case w.Code >= 500:
			t.Fatalf("%q: %d %s", query, w.Code, w.Body)
		case w.Code >= 400:
			var p struct{ Status int }
			if ct != "application/problem+json" || json.Unmarshal(w.Body.Bytes(), &p) != nil || p.Status != w.Code {
				t.Fatalf("%q: %d as %q: %s", query, w.Code, ct, w.Body)
			}
		case ct == "application/json":
			if !json.Valid(w.Body.Bytes()) {
				t.Fatalf("%q: invalid JSON: %s", query, w.Body)
			}
		case ct == "application/x-ndjson":
			for _, line := range strings.Split(strings.TrimSuffix(w.Body.String(), "\n"), "\n") {
				if line != "" && !json.Valid([]byte(line)) {
					t.Fatalf("%q: invalid NDJSON line %q", query, line)
				}
			}
		}
	})
}
