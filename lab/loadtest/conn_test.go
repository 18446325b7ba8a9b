package loadtest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A Conn sends what the server expects over one kept connection, reads
// errors as errors, and dials again after the server closed it.
func TestConn(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Header.Get("Authorization") != "Bearer tok":
			http.Error(w, "no token", http.StatusUnauthorized)
		case r.URL.Path == "/close":
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusNoContent)
		case r.Method == "POST" && (r.Header.Get("Content-Type") != "application/json" || string(body) != `{"id":"R1"}`):
			http.Error(w, "bad body "+string(body), http.StatusBadRequest)
		case r.Method == "POST":
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"R1"}`)
		default:
			// Big enough for net/http to answer chunked.
			_, _ = io.WriteString(w, strings.Repeat("x", 10000))
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := NewClient(srv.URL, "tok", 1, 0)
	k, err := c.NewConn()
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx := context.Background()
	for range 3 {
		status, data, err := k.Do(ctx, "POST", "/api/rotations", `{"id":"R1"}`)
		if err != nil || status != 201 || string(data) != `{"id":"R1"}` {
			t.Fatalf("POST: %d %q %v", status, data, err)
		}
	}
	status, data, err := k.Do(ctx, "GET", "/big", "")
	if err != nil || status != 200 || len(data) != 10000 {
		t.Fatalf("GET a chunked answer: %d, %d bytes, %v", status, len(data), err)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for four requests, want 1", n)
	}
	if status, _, err := k.Do(ctx, "POST", "/api/rotations", `{"id":"R2"}`); status != 400 || err == nil || !strings.Contains(err.Error(), "bad body") {
		t.Fatalf("a refused request: %d %v", status, err)
	}
	if _, _, err := k.Do(ctx, "GET", "/close", ""); err != nil {
		t.Fatal(err)
	}
	if status, _, err := k.Do(ctx, "POST", "/api/rotations", `{"id":"R1"}`); err != nil || status != 201 {
		t.Fatalf("after the server closed the connection: %d %v", status, err)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want a second one after the close", n)
	}
}
