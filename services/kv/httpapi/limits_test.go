package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/auth"
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
