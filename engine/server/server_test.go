package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/metrics"
)

// envChild, set, makes the test binary the server of TestRunSignals.
const envChild = "SERVER_TEST_CHILD_ADDR"

func TestMain(m *testing.M) {
	if addr := os.Getenv(envChild); addr != "" {
		runChild(addr)
		return
	}
	os.Exit(m.Run())
}

// runChild serves until a signal: GET /block answers its head, then
// never ends, so that a graceful shutdown waits for it. It prints
// "returned <err>" when Run returns and exits 0.
func runChild(addr string) {
	time.AfterFunc(time.Minute, func() { os.Exit(3) }) // never outlive the test
	mux := http.NewServeMux()
	mux.HandleFunc("GET /block", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		select {} // ignores the shutdown
	})
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	err := Run(context.Background(), Config{Name: "child", Addr: addr, Logger: log, Timeouts: Timeouts{Shutdown: time.Minute}}, mux)
	fmt.Printf("returned %v\n", err)
	os.Exit(0)
}

// syncBuffer is a buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// started runs Run in the background with a JSON logger and returns the
// URL it logs, the log, and a function that cancels Run and returns its
// error.
func started(t *testing.T, cfg Config, h http.Handler) (url string, logged *syncBuffer, stop func() error) {
	t.Helper()
	logged = &syncBuffer{}
	cfg.Logger = slog.New(slog.NewJSONHandler(logged, nil))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, cfg, h) }()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(20 * time.Second):
			return errors.New("Run did not return 20 s after its context ended")
		}
	}
	t.Cleanup(func() { _ = stop() })
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, line := range strings.Split(logged.String(), "\n") {
			var l struct{ Msg, URL string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == cfg.Name+" serving" {
				return l.URL, logged, stop
			}
		}
		select {
		case err := <-errc:
			t.Fatalf("Run returned before serving: %v", err)
		default:
		}
	}
	t.Fatalf("no %q line in the log:\n%s", cfg.Name+" serving", logged.String())
	return "", nil, nil
}

// get sends GET url with token ("" none) and returns the status and body.
func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Run serves the handler with /healthz (no token, the Check's fields),
// /metrics behind a token (the caller's metrics and the request metrics
// by route), pprof behind a token on the debug address, an access log
// line per request; at the end OnShutdown runs and Run returns nil.
func TestRunAssemblesTheServer(t *testing.T) {
	tokens, err := auth.ParseEnv("viewer-token:viewer", nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := metrics.NewRegistry()
	own := prometheus.NewCounter(prometheus.CounterOpts{Name: "logbook_test_things_total", Help: "Things."})
	reg.MustRegister(own)
	own.Add(3)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /things/{id}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "thing "+r.PathValue("id")) })
	var shutdowns atomic.Int32
	debugAddr := freePort(t)
	url, logged, stop := started(t, Config{
		Name: "test", Addr: "127.0.0.1:0", Tokens: tokens, Metrics: reg, DebugAddr: debugAddr,
		Check:      func(context.Context) (map[string]any, error) { return map[string]any{"head": 7, "users": "view"}, nil },
		LogAttrs:   []any{"store", "somewhere"},
		OnShutdown: []func(){func() { shutdowns.Add(1) }},
	}, mux)

	if code, body := get(t, url+"/healthz", ""); code != 200 || body != `{"status":"ok","head":7,"users":"view"}`+"\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, url+"/things/42", ""); code != 200 || body != "thing 42" {
		t.Errorf("the handler: %d %q", code, body)
	}
	for _, tok := range []string{"", "wrong-token-123"} {
		if code, _ := get(t, url+"/metrics", tok); code != http.StatusUnauthorized {
			t.Errorf("/metrics with token %q: %d, want 401", tok, code)
		}
	}
	code, m := get(t, url+"/metrics", "viewer-token")
	for _, want := range []string{
		"logbook_test_things_total 3",
		`logbook_http_requests_total{code="200",route="GET /healthz"} 1`,
		`logbook_http_requests_total{code="200",route="GET /things/{id}"} 1`,
		`logbook_http_requests_total{code="401",route="GET /metrics"} 2`,
	} {
		if code != 200 || !strings.Contains(m, want) {
			t.Errorf("/metrics (%d) lacks %s", code, want)
		}
	}
	for _, c := range []struct {
		token string
		want  int
	}{{"", 401}, {"viewer-token", 200}} {
		if code, _ := get(t, "http://"+debugAddr+"/debug/pprof/", c.token); code != c.want {
			t.Errorf("pprof with token %q: %d, want %d", c.token, code, c.want)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if shutdowns.Load() != 1 {
		t.Errorf("OnShutdown ran %d times, want 1", shutdowns.Load())
	}
	log := logged.String()
	for _, want := range []string{`"msg":"test serving"`, `"store":"somewhere"`, `"msg":"http request"`, `"route":"GET /things/{id}"`, `"msg":"test stopped"`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %s:\n%s", want, log)
		}
	}
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), time.Second); err == nil {
		t.Error("the server still accepts connections after Run returned")
	}
}

// A failed Check answers 503 naming the part, without its details (they
// go to the log); with no Metrics there is no /metrics; with no Tokens
// nothing passes the token check.
func TestRunHealthFailsAndDefaults(t *testing.T) {
	url, logged, _ := started(t, Config{Name: "bare", Addr: "127.0.0.1:0",
		Check: func(context.Context) (map[string]any, error) {
			return nil, Unavailable("repository", errors.New("connection refused by 10.0.0.9"))
		},
	}, http.NotFoundHandler())
	if code, body := get(t, url+"/healthz", ""); code != 503 || !strings.Contains(body, "repository unavailable") || strings.Contains(body, "10.0.0.9") {
		t.Errorf("/healthz of a failed check: %d %q", code, body)
	}
	if !strings.Contains(logged.String(), "10.0.0.9") {
		t.Errorf("the failure's detail is not in the log:\n%s", logged.String())
	}
	if code, _ := get(t, url+"/metrics", "any-token-at-all"); code != 404 {
		t.Errorf("/metrics without a registry: %d, want 404 (the handler's)", code)
	}

	url, _, _ = started(t, Config{Name: "tokenless", Addr: "127.0.0.1:0", Metrics: metrics.NewRegistry()}, http.NotFoundHandler())
	if code, body := get(t, url+"/healthz", ""); code != 200 || body != `{"status":"ok"}`+"\n" {
		t.Errorf("/healthz without a Check: %d %q", code, body)
	}
	if code, _ := get(t, url+"/metrics", "any-token-at-all"); code != 401 {
		t.Errorf("/metrics without Tokens: %d, want 401", code)
	}
}

// Run caps the connections at MaxConns, and fails at once on an address
// it cannot listen on.
func TestRunCapsConnectionsAndReportsListenErrors(t *testing.T) {
	url, _, _ := started(t, Config{Name: "capped", Addr: "127.0.0.1:0", MaxConns: 1}, http.NotFoundHandler())
	addr := strings.TrimPrefix(url, "http://")
	held, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	io.WriteString(held, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if res, err := http.ReadResponse(bufio.NewReader(held), nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("the connection within the cap: %v %v", res, err)
	}
	over, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	over.SetReadDeadline(time.Now().Add(5 * time.Second))
	if res, err := http.ReadResponse(bufio.NewReader(over), nil); err != nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a connection over the cap: %v %v", res, err)
	}

	err = Run(context.Background(), Config{Name: "clash", Addr: addr, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, http.NotFoundHandler())
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("Run on a taken address: %v", err)
	}
}

// The process that runs Run: a SIGTERM shuts it down gracefully (Run
// returns nil) and the process exits on its own; while a request holds
// the shutdown, the listener is closed, and a second SIGTERM ends the
// process at once.
func TestRunSignals(t *testing.T) {
	start := func(t *testing.T) (*exec.Cmd, string, *syncBuffer, chan error) {
		addr := freePort(t)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envChild+"="+addr)
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if strings.Contains(out.String(), "child serving") {
				return cmd, addr, out, exited
			}
			if time.Now().After(deadline) {
				t.Fatalf("the child did not serve: %s", out.String())
			}
		}
	}

	t.Run("one", func(t *testing.T) {
		cmd, _, out, exited := start(t)
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil || !strings.Contains(out.String(), "returned <nil>") {
				t.Fatalf("after one SIGTERM: %v, %s", err, out.String())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("one SIGTERM did not stop an idle server: %s", out.String())
		}
	})

	t.Run("two", func(t *testing.T) {
		cmd, addr, out, exited := start(t)
		res, err := http.Get("http://" + addr + "/block")
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("/block: %v %v", res, err)
		}
		defer res.Body.Close()
		cmd.Process.Signal(syscall.SIGTERM)
		// The shutdown waits for /block: the process lives on, and takes
		// no new connection.
		deadline := time.Now().Add(5 * time.Second)
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				break
			}
			c.Close()
			if time.Now().After(deadline) {
				t.Fatal("the listener was still open 5 s after SIGTERM")
			}
			time.Sleep(20 * time.Millisecond)
		}
		select {
		case err := <-exited:
			t.Fatalf("the process ended (%v) while a request held the shutdown: %s", err, out.String())
		case <-time.After(300 * time.Millisecond):
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || strings.Contains(out.String(), "returned") {
				t.Fatalf("after the second SIGTERM: %v, %s", err, out.String())
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a second SIGTERM did not end the process")
		}
	})
}
