//go:build unix

package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/services/notify/sink"
	"github.com/logbook/logbook/services/notify/userscdc"
)

// Every serving command is assembled the same way, by server.Run: it logs
// "<name> serving" with its URL, answers /healthz without a token, serves
// /metrics — the Go runtime's and the request metrics by route — only to
// a token, logs each request, and stops gracefully when its context ends
// (as at a signal), logging "<name> stopped".
func TestServingCommandsAreAssembledAlike(t *testing.T) {
	for _, c := range []struct {
		name string // the "serving" line's
		args func(t *testing.T) []string
	}{
		{"logbook", func(t *testing.T) []string {
			return []string{"flights", "serve", "--data", t.TempDir()}
		}},
		{"logbook tickets", func(t *testing.T) []string {
			return []string{"tickets", "serve", "--data", t.TempDir(), "--tickets-per-sport", "5"}
		}},
		{"logbook kv", func(t *testing.T) []string {
			return []string{"kv", "serve", "--data", t.TempDir()}
		}},
		{"logbook notify sink", func(t *testing.T) []string {
			return []string{"notify", "sink"}
		}},
		{"logbook notify", func(t *testing.T) []string {
			url, schema, slot, _ := usersDB(t, userscdc.Population{Users: 10, Clubs: 1, Type: "like_update", Seed: 1})
			sk, err := sink.New(sink.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ss := httptest.NewServer(sk)
			t.Cleanup(ss.Close)
			dir := t.TempDir()
			return []string{"notify", "serve", "--data", filepath.Join(dir, "data"), "--state", filepath.Join(dir, "state"),
				"--users-db", url, "--users-schema", schema, "--slot", slot, "--push-url", ss.URL + sink.Path, "--email-url", ss.URL + sink.Path}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer")
			args := append(c.args(t), "--addr", "127.0.0.1:0", "--log-format", "json")
			if args[0] == "flights" && !hasCommand("flights", "serve") {
				args = args[1:] // `logbook serve`, where flights has no serve yet
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stderr syncBuffer
			done := make(chan int, 1)
			go func() {
				done <- run(ctx, &env{stdout: io.Discard, stderr: &stderr, getenv: os.Getenv}, args)
			}()
			url := ""
			for deadline := time.Now().Add(60 * time.Second); url == ""; time.Sleep(20 * time.Millisecond) {
				for _, line := range strings.Split(stderr.String(), "\n") {
					var l struct{ Msg, URL string }
					if json.Unmarshal([]byte(line), &l) == nil && l.Msg == c.name+" serving" {
						url = l.URL
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
			get := func(path, token string) (int, string) {
				req, _ := http.NewRequest("GET", url+path, nil)
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
			// notify serve answers /healthz once its users view does.
			var health struct{ Status string }
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				code, body := get("/healthz", "")
				if code == 200 && json.Unmarshal([]byte(body), &health) == nil && health.Status == "ok" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("/healthz: %d %q", code, body)
				}
			}
			if code, _ := get("/metrics", ""); code != http.StatusUnauthorized {
				t.Errorf("/metrics without a token: %d, want 401", code)
			}
			if code, _ := get("/metrics", "wrong-token-123"); code != http.StatusUnauthorized {
				t.Errorf("/metrics with an unknown token: %d, want 401", code)
			}
			code, m := get("/metrics", "viewer-token")
			for _, want := range []string{
				`logbook_http_requests_total{code="200",route="GET /healthz"}`,
				`logbook_http_requests_total{code="401",route="GET /metrics"} 2`,
				"go_gc_duration_seconds",
			} {
				if code != 200 || !strings.Contains(m, want) {
					t.Errorf("/metrics (%d) lacks %s", code, want)
				}
			}
			cancel()
			select {
			case code := <-done:
				if code != 0 {
					t.Fatalf("exit %d:\n%s", code, stderr.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatal("did not stop within 30 s of its context's end")
			}
			log := stderr.String()
			for _, want := range []string{`"msg":"http request"`, `"route":"GET /healthz"`, `"msg":"` + c.name + ` stopped"`} {
				if !strings.Contains(log, want) {
					t.Errorf("the log lacks %s", want)
				}
			}
		})
	}
}

// hasCommand says whether the command group has the subcommand sub.
func hasCommand(group, sub string) bool {
	for _, g := range newRoot(&env{}).Commands() {
		if g.Name() == group {
			for _, c := range g.Commands() {
				if c.Name() == sub {
					return true
				}
			}
		}
	}
	return false
}
