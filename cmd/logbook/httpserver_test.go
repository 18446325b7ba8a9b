package main

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// An idle keep-alive connection — here after a 401 — is closed by the
// server within its idle timeout, and a request whose head never ends is
// cut off within the head timeout: neither can hold a connection for good.
func TestServerClosesIdleAndSlowConnections(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no token", http.StatusUnauthorized) })
	srv := newHTTPServer(h, slog.New(slog.NewTextHandler(io.Discard, nil)), serverTimeouts{head: 300 * time.Millisecond, body: time.Second, idle: 300 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()

	closedWithin := func(conn net.Conn, limit time.Duration) bool {
		conn.SetReadDeadline(time.Now().Add(limit))
		_, err := io.Copy(io.Discard, conn) // returns at EOF (closed) or the deadline
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return false
		}
		return true
	}

	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := io.WriteString(idle, "GET /api/validity HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("first answer: %v %v", res, err)
	}
	start := time.Now()
	if !closedWithin(idle, 3*time.Second) {
		t.Fatal("an idle connection after a 401 was still open 3 s later")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the idle connection was closed after %v", d)
	}

	slow, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := io.WriteString(slow, "GET / HTTP/1.1\r\nHost: x\r\n"+strings.Repeat("X-Slow: 1\r\n", 3)); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(slow, 3*time.Second) {
		t.Fatal("a request head that never ends held its connection 3 s")
	}
}
