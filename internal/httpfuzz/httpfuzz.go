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
