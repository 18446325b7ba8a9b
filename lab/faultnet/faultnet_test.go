package faultnet

import (
	"bufio"
	"errors"
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// echoServer answers every line with the same line until the client closes.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func proxy(t *testing.T, upstream string) *Proxy {
	t.Helper()
	p, err := Listen(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes a line and reads it back within timeout.
func roundTrip(c net.Conn, line string, timeout time.Duration) (string, error) {
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	return readLine(c, timeout)
}

func readLine(c net.Conn, timeout time.Duration) (string, error) {
	c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	var b []byte
	one := make([]byte, 1)
	for {
		if _, err := c.Read(one); err != nil {
			return string(b), err
		}
		if one[0] == '\n' {
			return string(b), nil
		}
		b = append(b, one[0])
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestPassThrough(t *testing.T) {
	p := proxy(t, echoServer(t))
	c := dial(t, p.Addr())
	for _, line := range []string{"one", "two", "three"} {
		got, err := roundTrip(c, line, 2*time.Second)
		if err != nil || got != line {
			t.Fatalf("round trip %q = %q, %v", line, got, err)
		}
	}
	// The counters are added just after each write: give them a moment.
	var s Stats
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if s = p.Stats(); s.BytesUp == 14 && s.BytesDown == 14 {
			break
		}
	}
	if s.Accepted != 1 || s.Active != 1 || s.BytesUp != 14 || s.BytesDown != 14 {
		t.Fatalf("stats = %+v", s)
	}
	// A large transfer in both directions arrives whole.
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte('a' + i%26)
	}
	go c.Write(big)
	got := make([]byte, len(big))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != string(big) {
		t.Fatalf("1 MiB echo: %v", err)
	}
}

func TestCutHoldsBytesUntilHeal(t *testing.T) {
	p := proxy(t, echoServer(t))
	old := dial(t, p.Addr())
	if _, err := roundTrip(old, "before", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.Cut(); err != nil {
		t.Fatal(err)
	}
	// An open connection gets nothing back.
	if got, err := roundTrip(old, "during", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("open connection under a cut: %q, %v; want a timeout", got, err)
	}
	// A new connection is accepted, but reaches nothing.
	fresh := dial(t, p.Addr())
	if got, err := roundTrip(fresh, "new", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("new connection under a cut: %q, %v; want a timeout", got, err)
	}
	if s := p.Stats(); s.Held != 1 || s.Cuts != 1 {
		t.Fatalf("stats under a cut = %+v", s)
	}
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	// Nothing was dropped: what was sent during the cut arrives now, in order.
	if got, err := readLine(old, 2*time.Second); err != nil || got != "during" {
		t.Fatalf("after heal the open connection read %q, %v", got, err)
	}
	if got, err := readLine(fresh, 2*time.Second); err != nil || got != "new" {
		t.Fatalf("after heal the new connection read %q, %v", got, err)
	}
	if got, err := roundTrip(old, "after", 2*time.Second); err != nil || got != "after" {
		t.Fatalf("after heal: %q, %v", got, err)
	}
}

// Clients that give up during a cut and close do not pile up: their held
// connections are dropped, and the heal dials upstream only for those
// still there.
func TestCutDropsHeldConnectionsWhoseClientLeft(t *testing.T) {
	p := proxy(t, echoServer(t))
	p.Cut()
	for range 5 {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "hello\n")
		c.Close()
	}
	stay := dial(t, p.Addr())
	io.WriteString(stay, "stay\n")
	deadline := time.Now().Add(3 * time.Second)
	// A leaving connection stops being held a moment before it stops being
	// active, so wait for both counts.
	for s := p.Stats(); (s.Accepted != 6 || s.Held != 1 || s.Active != 1) && time.Now().Before(deadline); s = p.Stats() {
		time.Sleep(20 * time.Millisecond)
	}
	if s := p.Stats(); s.Held != 1 || s.Active != 1 {
		t.Fatalf("stats under a cut after 5 clients left = %+v", s)
	}
	p.Heal()
	// What the remaining client sent while held arrives after the heal.
	if got, err := readLine(stay, 2*time.Second); err != nil || got != "stay" {
		t.Fatalf("after heal: %q, %v", got, err)
	}
	if s := p.Stats(); s.Dialed != 1 {
		t.Fatalf("dialled upstream %d times, want 1: %+v", s.Dialed, s)
	}
}

func TestRefuse(t *testing.T) {
	p := proxy(t, echoServer(t))
	old := dial(t, p.Addr())
	if _, err := roundTrip(old, "x", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.Refuse(); err != nil {
		t.Fatal(err)
	}
	if _, err := readLine(old, 2*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("open connection after Refuse read: %v; want it closed", err)
	}
	_, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial under Refuse: %v; want connection refused", err)
	}
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	if got, err := roundTrip(c, "back", 2*time.Second); err != nil || got != "back" {
		t.Fatalf("after heal: %q, %v", got, err)
	}
	if s := p.Stats(); s.Refusals != 1 || s.Closed != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestReset(t *testing.T) {
	p := proxy(t, echoServer(t))
	old := dial(t, p.Addr())
	if _, err := roundTrip(old, "x", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.Reset(); err != nil {
		t.Fatal(err)
	}
	if _, err := readLine(old, 2*time.Second); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after Reset: %v; want connection reset", err)
	}
	// New connections pass at once, without a Heal.
	c := dial(t, p.Addr())
	if got, err := roundTrip(c, "y", 2*time.Second); err != nil || got != "y" {
		t.Fatalf("after Reset: %q, %v", got, err)
	}
	if s := p.Stats(); s.Resets != 1 || s.Active != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestLatency(t *testing.T) {
	const d = 150 * time.Millisecond
	p := proxy(t, echoServer(t))
	c := dial(t, p.Addr())
	if _, err := roundTrip(c, "warm", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.Latency(d); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		start := time.Now()
		if _, err := roundTrip(c, "slow", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < d {
			t.Fatalf("round trip under %v latency took %v", d, took)
		}
	}
	// The bytes are delayed, not serialised: 20 lines sent at once come back
	// in about one d, not twenty.
	start := time.Now()
	for range 20 {
		io.WriteString(c, "burst\n")
	}
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for range 20 {
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	c.SetReadDeadline(time.Time{})
	if took := time.Since(start); took < d || took > 10*d {
		t.Fatalf("20 pipelined lines under %v latency took %v", d, took)
	}
	if err := p.Latency(-time.Second); err == nil {
		t.Fatal("negative latency accepted")
	}
	p.Heal()
	c2 := dial(t, p.Addr())
	start = time.Now()
	if _, err := roundTrip(c2, "fast", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= d {
		t.Fatalf("round trip after heal took %v", took)
	}
}

func TestUpstreamDownResetsClient(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	p := proxy(t, addr)
	// The reset may come before the client's connect returns, or after.
	c, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second)
	if err == nil {
		defer c.Close()
		_, err = roundTrip(c, "x", 2*time.Second)
	}
	if err == nil || isTimeout(err) {
		t.Fatalf("through a proxy to nothing: %v; want the connection closed", err)
	}
	if s := p.Stats(); s.DialErrors != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestCloseEndsEverything(t *testing.T) {
	before := runtime.NumGoroutine()
	p, err := Listen(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	open := dial(t, p.Addr())
	roundTrip(open, "x", 2*time.Second)
	p.Cut()
	dial(t, p.Addr()) // held
	time.Sleep(50 * time.Millisecond)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := readLine(open, 2*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("read after Close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("dial after Close succeeded")
	}
	for _, f := range []func() error{p.Cut, p.Heal, p.Reset, p.Refuse} {
		if err := f(); !errors.Is(err, ErrClosed) {
			t.Fatalf("fault after Close: %v", err)
		}
	}
	// Close waited for the proxy's goroutines (the echo server's may linger).
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before+4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+4 {
		t.Fatalf("%d goroutines after Close, %d before", n, before)
	}
}

func TestMaxConns(t *testing.T) {
	p := proxy(t, echoServer(t))
	p.SetMaxConns(1)
	first := dial(t, p.Addr())
	if _, err := roundTrip(first, "a", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	// The second is reset (at connect or at the first read).
	c, err := net.DialTimeout("tcp", p.Addr(), 2*time.Second)
	if err == nil {
		defer c.Close()
		_, err = roundTrip(c, "b", 2*time.Second)
	}
	if err == nil || isTimeout(err) {
		t.Fatalf("connection over the limit: %v; want it reset", err)
	}
	if s := p.Stats(); s.OverLimit != 1 || s.Active != 1 {
		t.Fatalf("stats = %+v", s)
	}
	// Once the first is gone there is room again.
	first.Close()
	deadline := time.Now().Add(2 * time.Second)
	for p.Stats().Active != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	c2 := dial(t, p.Addr())
	if got, err := roundTrip(c2, "c", 2*time.Second); err != nil || got != "c" {
		t.Fatalf("after the first left: %q, %v", got, err)
	}
}

func TestBadUpstream(t *testing.T) {
	if _, err := Listen("no-port"); err == nil {
		t.Fatal("upstream without a port accepted")
	}
	if _, err := ListenOn("256.0.0.1:0", "127.0.0.1:1"); err == nil {
		t.Fatal("bad listen address accepted")
	}
}
