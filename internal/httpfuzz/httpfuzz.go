// Package httpfuzz holds what the HTTP APIs' fuzz targets assert of
// every answer, whatever the request: no panic (the fuzzer reports one),
// no 5xx but a documented unavailability, every 4xx a problem document
// with its status, and an answer within a bound.
package httpfuzz

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Request is one request a fuzz target makes.
type Request struct {
	Method, Target string // Target: the path and query
	Header         http.Header
	Body           []byte
}

// Do serves req with h and checks the answer: it must come within bound,
// be no 5xx unless allow5xx says that status is a documented answer
// (a 503 of a service shutting down, say), and be a problem+json
// document with its status when it is a 4xx or a 5xx. It returns the
// answer, or nil when req is not a request net/http would send.
func Do(t testing.TB, h http.Handler, req Request, bound time.Duration, allow5xx func(status int) bool) *httptest.ResponseRecorder {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, req.Method, "http://logbook"+req.Target, bytes.NewReader(req.Body))
	if err != nil || r.URL.Path == "" || r.URL.Path[0] != '/' {
		return nil
	}
	for k, vs := range req.Header {
		for _, v := range vs {
			if !validHeader(k, v) {
				return nil
			}
			r.Header.Add(k, v)
		}
	}
	rec := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(rec, r)
	if el := time.Since(start); el > bound+time.Second {
		t.Errorf("%s %q: answered in %v, want within %v", req.Method, req.Target, el, bound)
	}
	if rec.Code >= 500 && (allow5xx == nil || !allow5xx(rec.Code)) {
		t.Fatalf("%s %q %q: %d %s", req.Method, req.Target, req.Body, rec.Code, rec.Body)
	}
	if rec.Code >= 400 {
		var p struct {
			Status int    `json:"status"`
			Title  string `json:"title"`
		}
		ct := rec.Header().Get("Content-Type")
		if !strings.HasPrefix(ct, "application/problem+json") || json.Unmarshal(rec.Body.Bytes(), &p) != nil || p.Status != rec.Code {
			t.Fatalf("%s %q %q: %d answered %q %s, want a problem+json document with its status", req.Method, req.Target, req.Body, rec.Code, ct, rec.Body)
		}
	}
	return rec
}

// validHeader says whether net/http would send the header field.
func validHeader(k, v string) bool {
	if k == "" || strings.ContainsAny(k, " \t\r\n:") {
		return false
	}
	return !strings.ContainsAny(v, "\r\n\x00")
}

// Measure runs fn and says how long it took and how many bytes the
// process allocated meanwhile (runtime.MemStats.TotalAlloc), and the
// growth of the heap in use after a collection (HeapInuse, negative if it
// shrank): what a limits test bounds.
func Measure(fn func()) (elapsed time.Duration, allocated uint64, heapGrowth int64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	fn()
	elapsed = time.Since(start)
	runtime.ReadMemStats(&after)
	allocated = after.TotalAlloc - before.TotalAlloc
	runtime.GC()
	runtime.ReadMemStats(&after)
	return elapsed, allocated, int64(after.HeapInuse) - int64(before.HeapInuse)
}

// Bounded runs fn as Measure does and fails t if it took longer than
// maxTime or allocated more than maxAlloc bytes (twice that under the
// race detector).
func Bounded(t testing.TB, what string, maxTime time.Duration, maxAlloc uint64, fn func()) {
	t.Helper()
	if RaceEnabled {
		maxAlloc *= 2 // see RaceEnabled
	}
	el, alloc, growth := Measure(fn)
	t.Logf("%s: %v, %d MiB allocated, heap in use %+d MiB", what, el.Round(time.Millisecond), alloc>>20, growth>>20)
	if el > maxTime {
		t.Errorf("%s took %v, want within %v", what, el, maxTime)
	}
	if alloc > maxAlloc {
		t.Errorf("%s allocated %d MiB, want at most %d MiB", what, alloc>>20, maxAlloc>>20)
	}
}
