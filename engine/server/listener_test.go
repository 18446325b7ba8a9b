package server

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
	srv := NewHTTPServer(h, slog.New(slog.NewTextHandler(io.Discard, nil)), Timeouts{Header: 300 * time.Millisecond, Body: time.Second, Idle: 300 * time.Millisecond})
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

// Beyond its connection cap a server answers a new connection at once
// with 503 and closes it, instead of holding it or a file descriptor; a
// closed connection frees its place.
func TestServerCapsConnections(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	srv := NewHTTPServer(h, slog.New(slog.NewTextHandler(io.Discard, nil)), DefaultTimeouts)
	ln, err := listen("127.0.0.1:0", 2)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()

	get := func(conn net.Conn) (*http.Response, error) {
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return nil, err
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		return http.ReadResponse(bufio.NewReader(conn), nil)
	}
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if res, err := get(c); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("a connection within the cap: %v %v", res, err)
		}
		held = append(held, c)
	}
	over, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	over.SetReadDeadline(time.Now().Add(5 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil || res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("a connection over the cap: %v %v", res, err)
	}
	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		res, err := get(c)
		c.Close()
		if err == nil && res.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed connection did not free its place: %v %v", res, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
