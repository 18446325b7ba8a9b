package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/pebblekv"
)

// largeServer serves a repository holding one value of size bytes under
// "big", through the handler h builds.
func largeServer(t *testing.T, size int, h func(*kv.Repository, *auth.Tokens) *httptest.Server) *httptest.Server {
	t.Helper()
	b, err := pebblekv.Open(t.TempDir(), pebblekv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	repo := kv.New(b, kv.Limits{})
	if err := repo.Add(context.Background(), "big", bytes.Repeat([]byte("z"), size)); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.ParseEnv(writer+":"+string(Writer)+","+viewer+":viewer", Roles())
	if err != nil {
		t.Fatal(err)
	}
	srv := h(repo, tokens)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); repo.Close() })
	return srv
}

// stalledGET sends a GET of "big" and reads nothing of the answer: the
// server's write of it blocks once the socket buffers are full.
func stalledGET(t *testing.T, srv *httptest.Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	_, err = c.Write([]byte("GET /api/kv/big HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + viewer + "\r\n\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestLargeReadsStream: readers of an 8 MiB value that read slowly do
// not make the server hold the value once per reader: the value is
// streamed from its file, so 12 stalled readers hold a few copy buffers,
// not 12 × 8 MiB.
func TestLargeReadsStream(t *testing.T) {
	const size, readers = 8 << 20, 12
	srv := largeServer(t, size, func(repo *kv.Repository, tokens *auth.Tokens) *httptest.Server {
		return httptest.NewServer(New(repo, tokens))
	})
	before := heapInUse()
	var conns []net.Conn
	for range readers {
		conns = append(conns, stalledGET(t, srv))
	}
	// Each answer has begun (its status line is readable) and then
	// stalls on the socket.
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReaderSize(c, 64).ReadString('\n')
		if err != nil || !strings.Contains(line, "200") {
			t.Fatalf("status line %q: %v", line, err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	grew := int64(heapInUse()) - int64(before)
	t.Logf("heap grew by %.1f MiB with %d stalled readers of %d MiB", float64(grew)/(1<<20), readers, size>>20)
	if grew > 24<<20 {
		t.Fatalf("the heap grew by %d MiB with %d stalled readers of a %d MiB value: the handler holds the value", grew>>20, readers, size>>20)
	}
}

// TestLargeReadsBounded: with MaxLargeReads in flight, the next large
// read waits LargeReadWait and is answered 503 with Retry-After; a small
// value is still served, and a slot freed by a reader that went away
// serves the next large read.
func TestLargeReadsBounded(t *testing.T) {
	srv := largeServer(t, 4<<20, func(repo *kv.Repository, tokens *auth.Tokens) *httptest.Server {
		mux := http.NewServeMux()
		MountWith(mux, repo, tokens, Options{MaxLargeReads: 2, LargeReadWait: 200 * time.Millisecond})
		return httptest.NewServer(mux)
	})
	want(t, do(t, srv, writer, "PUT", "/api/kv/small", "s", "If-None-Match", "*"), 201, "")
	var conns []net.Conn
	for range 2 {
		c := stalledGET(t, srv)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if line, err := bufio.NewReaderSize(c, 64).ReadString('\n'); err != nil || !strings.Contains(line, "200") {
			t.Fatalf("status line %q: %v", line, err)
		}
		conns = append(conns, c)
	}
	start := time.Now()
	req, _ := http.NewRequest("GET", srv.URL+"/api/kv/big", nil)
	req.Header.Set("Authorization", "Bearer "+viewer)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 503 || res.Header.Get("Retry-After") == "" || !strings.Contains(string(body), TypeBusy) {
		t.Fatalf("a third large read with two in flight: %d, Retry-After %q, %s", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the refused read took %v", d)
	}
	if r := do(t, srv, viewer, "GET", "/api/kv/small", ""); r.status != 200 || r.body != "s" {
		t.Fatalf("a small read with the large slots taken: %+v", r)
	}
	conns[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode == 200 {
			if n != 4<<20 {
				t.Fatalf("a streamed read gave %d bytes", n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot of a reader that went away was not freed: %d", res.StatusCode)
		}
	}
}

// TestStalledReaderFreesItsSlot: a client that stops reading a large
// value does not hold its slot forever — a write that makes no progress
// for StallTimeout ends the answer — so the next large read is served.
func TestStalledReaderFreesItsSlot(t *testing.T) {
	srv := largeServer(t, 8<<20, func(repo *kv.Repository, tokens *auth.Tokens) *httptest.Server {
		mux := http.NewServeMux()
		MountWith(mux, repo, tokens, Options{MaxLargeReads: 1, LargeReadWait: 3 * time.Second, StallTimeout: 300 * time.Millisecond})
		return httptest.NewServer(mux)
	})
	c := stalledGET(t, srv)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := bufio.NewReaderSize(c, 64).ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("status line %q: %v", line, err)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/api/kv/big", nil)
	req.Header.Set("Authorization", "Bearer "+viewer)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || n != 8<<20 {
		t.Fatalf("a large read while a stalled reader held the only slot: %d, %d bytes", res.StatusCode, n)
	}
}

// TestLargeWritesBounded: with MaxLargeWrites large writes in flight
// (here one, whose body is still arriving), the next waits LargeReadWait
// and is answered 503 with Retry-After; a small write still goes through,
// and once the first ends the next large write is taken.
func TestLargeWritesBounded(t *testing.T) {
	b, err := pebblekv.Open(t.TempDir(), pebblekv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	repo := kv.New(b, kv.Limits{MaxValueBytes: 16 << 20})
	tokens, err := auth.ParseEnv(writer+":"+string(Writer)+","+viewer+":viewer", Roles())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	MountWith(mux, repo, tokens, Options{MaxLargeWrites: 1, LargeReadWait: 200 * time.Millisecond})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); repo.Close() })
	put := func(id string, body io.Reader, length int64) (*http.Response, string) {
		req, _ := http.NewRequest("PUT", srv.URL+"/api/kv/"+id, body)
		req.ContentLength = length
		req.Header.Set("Authorization", "Bearer "+writer)
		req.Header.Set("If-None-Match", "*")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		msg, _ := io.ReadAll(res.Body)
		return res, string(msg)
	}
	// The first large write: 2 MiB sent, the rest held back.
	pr, pw := io.Pipe()
	first := make(chan int)
	go func() {
		res, _ := put("first", pr, 4<<20)
		first <- res.StatusCode
	}()
	if _, err := pw.Write(make([]byte, 2<<20)); err != nil {
		t.Fatal(err)
	}
	res, body := put("second", bytes.NewReader(make([]byte, 2<<20)), 2<<20)
	if res.StatusCode != 503 || res.Header.Get("Retry-After") == "" || !strings.Contains(body, TypeBusy) || !strings.Contains(body, "writes") {
		t.Fatalf("a large write while the only slot is taken: %d, Retry-After %q, %s", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	if res, body := put("small", strings.NewReader("s"), 1); res.StatusCode != 201 {
		t.Fatalf("a small write while the large slot is taken: %d %s", res.StatusCode, body)
	}
	if _, err := pw.Write(make([]byte, 2<<20)); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if code := <-first; code != 201 {
		t.Fatalf("the first large write: %d", code)
	}
	if res, body := put("second", bytes.NewReader(make([]byte, 2<<20)), 2<<20); res.StatusCode != 201 {
		t.Fatalf("a large write after the slot was freed: %d %s", res.StatusCode, body)
	}
}
