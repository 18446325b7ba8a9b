package server

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingListener counts the writes to its connections' sockets.
type countingListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	return countingConn{c, l.writes}, err
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// pipelined serves a handler (coalescing or not), sends n requests in
// one write on one connection, reads the n answers, and returns how many
// writes the server made and the answers' bodies.
func pipelined(t *testing.T, coalesce bool, n int, h http.HandlerFunc) (int64, []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int64
	var l net.Listener = countingListener{ln, &writes}
	if coalesce {
		l = coalescingListener{l}
	}
	srv := NewHTTPServer(h, slog.New(slog.NewTextHandler(io.Discard, nil)), DefaultTimeouts)
	go srv.Serve(l)
	defer srv.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var req strings.Builder
	for i := range n {
		req.WriteString("GET /" + string(rune('a'+i)) + " HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	if _, err := io.WriteString(c, req.String()); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	var bodies []string
	for range n {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		bodies = append(bodies, string(b))
	}
	return writes.Load(), bodies
}

// Answers to pipelined requests leave in one write instead of one each,
// in order; an answer kept while a later request's handler is slow leaves
// after coalesceDelay, not after the handler; and a client that sends
// one request at a time is answered at once.
func TestCoalescingConn(t *testing.T) {
	echo := func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.URL.Path) }
	plain, _ := pipelined(t, false, 10, echo)
	writes, bodies := pipelined(t, true, 10, echo)
	// Idle, the ten answers leave in one or two writes; on a loaded
	// machine (CI runs packages side by side under -race) a handler may
	// finish after coalesceDelay and start a new write. Half of the plain
	// server's writes still tells coalescing from none.
	if plain < 10 || writes > 5 {
		t.Errorf("10 pipelined answers took %d writes coalesced, %d plain; want at most 5 and 10", writes, plain)
	}
	if strings.Join(bodies, "") != "/a/b/c/d/e/f/g/h/i/j" {
		t.Errorf("answers %q out of order", bodies)
	}

	// The second request's handler takes a second; the first answer
	// must not wait for it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(time.Second)
		}
		io.WriteString(w, r.URL.Path)
	}), slog.New(slog.NewTextHandler(io.Discard, nil)), DefaultTimeouts)
	go srv.Serve(coalescingListener{ln})
	defer srv.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	io.WriteString(c, "GET /fast HTTP/1.1\r\nHost: x\r\n\r\nGET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("the first answer took %v: it waited for the slow handler of the next request", d)
	}

	// One request at a time, over the same connection: each answered
	// at once (far sooner than a flush timer would).
	for i := range 20 {
		start := time.Now()
		io.WriteString(c, "GET /one HTTP/1.1\r\nHost: x\r\n\r\n")
		if i == 0 {
			if res, err = http.ReadResponse(br, nil); err != nil { // /slow's answer
				t.Fatal(err)
			}
			res.Body.Close()
		}
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if string(b) != "/one" {
			t.Fatalf("answer %q", b)
		}
		if d := time.Since(start); i > 0 && d > 200*time.Millisecond {
			t.Errorf("a lone request took %v", d)
		}
	}
}

// A peer that stopped reading cannot hold Close (and with it the server's
// Shutdown) while a flush of kept answers is blocked on it.
func TestCoalescingCloseDoesNotWaitForAStalledPeer(t *testing.T) {
	server, client := net.Pipe() // writes block until the other end reads
	defer client.Close()
	c := &coalescingConn{Conn: server}
	c.timer = time.AfterFunc(time.Hour, c.timedFlush)
	c.timer.Stop()
	if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = c.Read(make([]byte, 4096)) }() // flushes, and blocks: nobody reads
	time.Sleep(50 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a peer that never reads")
	}
}
