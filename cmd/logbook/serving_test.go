//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/services/notify/sink"
	"github.com/logbook/logbook/services/notify/userscdc"
)

// servingSecret is the password every serving command's store URL
// carries in TestServingCommandsAreAssembledAlike: no log line may show
// it.
const servingSecret = "pw-never-logged-7f3a"

// Every serving command is assembled the same way, by server.Run, and
// holds to the same standard; for each one this test proves:
//
//   - it logs "<name> serving" with its URL, and "<name> stopped";
//   - /healthz answers without a token, 200 while the command's store
//     answers and 503 — naming the part, without the error's text —
//     once it fails (the store's connections go through a proxy the
//     test cuts; the notify sink has no store);
//   - a request answered 5xx is in the access log at error level;
//   - /metrics, and pprof on --debug-addr, answer only to a token;
//   - a request whose headers never end is cut within the header
//     timeout (server.DefaultTimeouts.Header);
//   - --max-conns caps the connections held at once;
//   - the command sets a memory limit (GOMEMLIMIT unset);
//   - SIGTERM stops it gracefully: exit 0;
//   - its store URL's password is in no log line.
func TestServingCommandsAreAssembledAlike(t *testing.T) {
	for _, c := range []struct {
		name string // the "serving" line's
		// args are the command's, given the store's URL (through the
		// proxy, with a password) of a fresh schema.
		args func(t *testing.T, store string) []string
		// part is what /healthz says is unavailable when the store
		// fails ("" : "store").
		part string
		// noStore: no store to fail; fail5xx makes a 5xx instead.
		noStore bool
		fail5xx func(t *testing.T, url string)
	}{
		{name: "logbook", args: func(t *testing.T, store string) []string {
			return []string{"flights", "serve", "--store", store}
		}},
		{name: "logbook tickets", args: func(t *testing.T, store string) []string {
			return []string{"tickets", "serve", "--store", store, "--tickets-per-sport", "5"}
		}},
		{name: "logbook kv", part: "repository", args: func(t *testing.T, store string) []string {
			return []string{"kv", "serve", "--store", store}
		}},
		{name: "logbook notify sink", noStore: true, args: func(t *testing.T, _ string) []string {
			return []string{"notify", "sink", "--error-rate", "1"}
		}, fail5xx: func(t *testing.T, url string) {
			res, err := http.Post(url+sink.Path, "application/json", strings.NewReader(`{"messages":[{"key":"k1","user_id":1,"channel":"push","to":["d"],"title":"t","body":"b"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode < 500 {
				t.Errorf("the sink with --error-rate 1 answered %d", res.StatusCode)
			}
		}},
		{name: "logbook notify", args: func(t *testing.T, store string) []string {
			url, schema, slot, _ := usersDB(t, userscdc.Population{Users: 10, Clubs: 1, Type: "like_update", Seed: 1})
			sk, err := sink.New(sink.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ss := httptest.NewServer(sk)
			t.Cleanup(ss.Close)
			dir := t.TempDir()
			return []string{"notify", "serve", "--store", store, "--state", filepath.Join(dir, "state"),
				"--users-db", url, "--users-schema", schema, "--slot", slot, "--push-url", ss.URL + sink.Path + "?token=" + servingSecret, "--email-url", ss.URL + sink.Path}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer")
			t.Setenv("GOMEMLIMIT", "")
			t.Setenv("GOGC", "")
			oldLimit, oldPercent := debug.SetMemoryLimit(math.MaxInt64), debug.SetGCPercent(100)
			defer func() { debug.SetMemoryLimit(oldLimit); debug.SetGCPercent(oldPercent) }()

			pgURL, _ := testenv.SchemaURL(t)
			pu, err := url.Parse(pgURL)
			if err != nil {
				t.Fatal(err)
			}
			proxy := startProxy(t, pu.Host)
			pu.Host = proxy.addr()
			pu.User = url.UserPassword(pu.User.Username(), servingSecret)
			const maxConns = 12
			debugAddr := freeAddr(t)
			args := append(c.args(t, pu.String()), "--addr", "127.0.0.1:0", "--log-format", "json",
				"--max-conns", "12", "--debug-addr", debugAddr)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stderr syncBuffer
			done := make(chan int, 1)
			go func() {
				done <- run(ctx, &env{stdout: io.Discard, stderr: &stderr, getenv: os.Getenv}, args)
			}()
			addr := ""
			for deadline := time.Now().Add(60 * time.Second); addr == ""; time.Sleep(20 * time.Millisecond) {
				for _, line := range strings.Split(stderr.String(), "\n") {
					var l struct{ Msg, URL string }
					if json.Unmarshal([]byte(line), &l) == nil && l.Msg == c.name+" serving" {
						addr = l.URL
					}
				}
				select {
				case code := <-done:
					t.Fatalf("%v exited %d before serving:\n%s", args, code, stderr.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("no %q line:\n%s", c.name+" serving", stderr.String())
				}
			}
			// A request whose headers never end, cut within the header
			// timeout.
			slow, err := net.Dial("tcp", strings.TrimPrefix(addr, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer slow.Close()
			slowStart := time.Now()
			if _, err := io.WriteString(slow, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
				t.Fatal(err)
			}

			if got := debug.SetMemoryLimit(-1); got == math.MaxInt64 {
				t.Error("the command sets no memory limit")
			}
			get := func(u, token string) (int, string) {
				req, _ := http.NewRequest("GET", u, nil)
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
			waitHealthy := func() {
				t.Helper()
				var health struct{ Status string }
				for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
					code, body := get(addr+"/healthz", "")
					if code == 200 && json.Unmarshal([]byte(body), &health) == nil && health.Status == "ok" {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("/healthz: %d %q", code, body)
					}
				}
			}
			waitHealthy() // notify serve answers once its users view does
			if code, _ := get(addr+"/metrics", ""); code != http.StatusUnauthorized {
				t.Errorf("/metrics without a token: %d, want 401", code)
			}
			if code, _ := get(addr+"/metrics", "wrong-token-123"); code != http.StatusUnauthorized {
				t.Errorf("/metrics with an unknown token: %d, want 401", code)
			}
			code, m := get(addr+"/metrics", "viewer-token")
			for _, want := range []string{
				`logbook_http_requests_total{code="200",route="GET /healthz"}`,
				`logbook_http_requests_total{code="401",route="GET /metrics"} 2`,
				"go_gc_duration_seconds",
			} {
				if code != 200 || !strings.Contains(m, want) {
					t.Errorf("/metrics (%d) lacks %s", code, want)
				}
			}
			for _, p := range []struct {
				token string
				want  int
			}{{"", 401}, {"wrong-token-123", 401}, {"viewer-token", 200}} {
				if code, _ := get("http://"+debugAddr+"/debug/pprof/", p.token); code != p.want {
					t.Errorf("pprof on --debug-addr with token %q: %d, want %d", p.token, code, p.want)
				}
			}

			// The connection cap: with the slow connection and
			// maxConns-1 more held, one more is answered 503.
			http.DefaultClient.CloseIdleConnections()
			time.Sleep(50 * time.Millisecond)
			var held []net.Conn
			for range maxConns - 1 {
				conn, err := net.Dial("tcp", strings.TrimPrefix(addr, "http://"))
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, conn)
			}
			time.Sleep(100 * time.Millisecond)
			over, err := net.Dial("tcp", strings.TrimPrefix(addr, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.WriteString(over, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
			_ = over.SetReadDeadline(time.Now().Add(5 * time.Second))
			if res, err := http.ReadResponse(bufio.NewReader(over), nil); err != nil || res.StatusCode != 503 {
				t.Errorf("connection %d beyond --max-conns %d: %v %v, want 503", maxConns+1, maxConns, res, err)
			}
			over.Close()
			for _, conn := range held {
				conn.Close()
			}
			time.Sleep(100 * time.Millisecond)

			// The store fails: /healthz says so, without the error, and
			// the 503 is logged as an error.
			if c.noStore {
				c.fail5xx(t, addr)
			} else {
				proxy.setDown(true)
				var code int
				var body string
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
					if code, body = get(addr+"/healthz", ""); code == 503 || time.Now().After(deadline) {
						break
					}
				}
				want := "store unavailable"
				if c.part != "" {
					want = c.part + " unavailable"
				}
				if code != 503 || strings.TrimSpace(body) != want {
					t.Errorf("/healthz with the store down: %d %q, want 503 %q", code, body, want)
				}
				proxy.setDown(false)
				waitHealthy()
			}
			errorLogged := false
			for _, line := range strings.Split(stderr.String(), "\n") {
				var l struct {
					Level, Msg string
					Status     int
				}
				if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "http request" && l.Status >= 500 && l.Level == "ERROR" {
					errorLogged = true
				}
			}
			if !errorLogged {
				t.Errorf("no 5xx request at ERROR in the access log:\n%s", stderr.String())
			}

			// The slow request has been cut by now, or is within its
			// header timeout.
			_ = slow.SetReadDeadline(slowStart.Add(server.DefaultTimeouts.Header + 3*time.Second))
			if _, err := io.Copy(io.Discard, slow); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Errorf("a request whose headers never end is still held after %v", time.Since(slowStart))
				}
			}

			if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case code := <-done:
				if code != 0 {
					t.Fatalf("exit %d after SIGTERM:\n%s", code, stderr.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatal("did not stop within 30 s of SIGTERM")
			}
			log := stderr.String()
			for _, want := range []string{`"msg":"http request"`, `"route":"GET /healthz"`, `"msg":"` + c.name + ` stopped"`} {
				if !strings.Contains(log, want) {
					t.Errorf("the log lacks %s", want)
				}
			}
			if strings.Contains(log, servingSecret) {
				t.Errorf("the log shows the store's password:\n%s", log)
			}
		})
	}
}

// tcpProxy forwards connections to a server; down, it closes every
// connection and refuses new ones, as a server that failed would.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

func startProxy(t *testing.T, target string) *tcpProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			down := p.down
			p.mu.Unlock()
			if down {
				c.Close()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[s] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); s.Close(); c.Close() }()
			go func() { _, _ = io.Copy(c, s); s.Close(); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.setDown(true) })
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}
