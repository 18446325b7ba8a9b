package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/internal/httpfuzz"
	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/pebblekv"
)

// A write and a read at every limit at once — the longest key
// (MaxIDBytes), the largest value (MaxValueBytes), both conditional —
// are answered within 5 seconds each, allocating at most 4 times the
// value's size.
func TestRequestAtEveryLimit(t *testing.T) {
	b, err := pebblekv.Open(t.TempDir(), pebblekv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	repo := kv.New(b, kv.Limits{})
	defer repo.Close()
	tokens, err := auth.ParseEnv(writer+":"+string(Writer)+","+viewer+":viewer", Roles())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(repo, tokens))
	defer srv.Close()
	lim := kv.DefaultLimits
	key := strings.Repeat("k", lim.MaxIDBytes)
	value := bytes.Repeat([]byte("v"), lim.MaxValueBytes)
	do := func(method, cond, tag string, body []byte, token string) *http.Response {
		req, _ := http.NewRequest(method, srv.URL+"/api/kv/"+key, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set(cond, tag)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	maxAlloc := uint64(4 * lim.MaxValueBytes)
	httpfuzz.Bounded(t, "PUT of the largest value at the longest key", 5*time.Second, maxAlloc, func() {
		res := do("PUT", "If-None-Match", "*", value, writer)
		res.Body.Close()
		if res.StatusCode != 201 && res.StatusCode != 200 {
			t.Fatalf("PUT: %d", res.StatusCode)
		}
	})
	httpfuzz.Bounded(t, "GET of it", 5*time.Second, maxAlloc, func() {
		res := do("GET", "If-None-Match", `"999"`, nil, viewer)
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || n != int64(len(value)) {
			t.Fatalf("GET: %d, %d bytes", res.StatusCode, n)
		}
	})
	httpfuzz.Bounded(t, "PUT of a value one byte over", 5*time.Second, maxAlloc, func() {
		res := do("PUT", "If-Match", `"1"`, append(value, 'x'), writer)
		res.Body.Close()
		if res.StatusCode != 413 {
			t.Fatalf("PUT one byte over: %d, want 413", res.StatusCode)
		}
	})
}

// limitedBackend is pebblekv with a value limit of its own, as etcd and
// Cassandra have.
type limitedBackend struct{ *pebblekv.Backend }

func (limitedBackend) ValueLimit() (int64, string) { return 2000, "the test backend's own limit" }

// TestValueTooLarge: a value over the limit is answered 413 problem+json
// however it comes — a Content-Length over it, a chunked body (no length)
// that runs over it as it streams, a value over the backend's own limit —
// and the key is not written.
func TestValueTooLarge(t *testing.T) {
	b, err := pebblekv.Open(t.TempDir(), pebblekv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	repo := kv.New(limitedBackend{b}, kv.Limits{MaxValueBytes: 1 << 20})
	defer repo.Close()
	if got := repo.Limits().MaxValueBytes; got != 2000 {
		t.Fatalf("MaxValueBytes %d, want the backend's 2000", got)
	}
	tokens, err := auth.ParseEnv(writer+":"+string(Writer)+","+viewer+":viewer", Roles())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(repo, tokens))
	defer srv.Close()
	put := func(body io.Reader, length int64) resp {
		req, _ := http.NewRequest("PUT", srv.URL+"/api/kv/k", body)
		req.ContentLength = length
		req.Header.Set("Authorization", "Bearer "+writer)
		req.Header.Set("If-None-Match", "*")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		r := resp{status: res.StatusCode}
		b, _ := io.ReadAll(res.Body)
		r.body = string(b)
		if res.Header.Get("Content-Type") == "application/problem+json" {
			_ = json.Unmarshal(b, &r.problem)
		}
		return r
	}
	for name, r := range map[string]resp{
		"Content-Length over": put(bytes.NewReader(make([]byte, 2001)), 2001),
		"chunked, over":       put(io.MultiReader(bytes.NewReader(make([]byte, 1500)), bytes.NewReader(make([]byte, 1500))), -1),
	} {
		if r.status != 413 || r.problem == nil || r.problem["type"] != httpkit.TypeTooLarge {
			t.Fatalf("%s: %d %s, want a 413 problem", name, r.status, r.body)
		}
	}
	want(t, do(t, srv, viewer, "GET", "/api/kv/k", ""), 404, "")
	if r := put(io.MultiReader(strings.NewReader("a"), strings.NewReader(strings.Repeat("b", 1999))), -1); r.status != 201 {
		t.Fatalf("a chunked value at the limit: %d %s", r.status, r.body)
	}
}
