package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTicketsBadUsage(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"tickets"}, 2, "which tickets command? (check, serve)"},
		{[]string{"tickets", "serve", "--arch", "lifo"}, 2, `--arch "lifo"`},
		{[]string{"tickets", "serve", "--node-rate", "-1"}, 2, "must not be negative"},
		{[]string{"tickets", "serve", "--replicas", "3"}, 2, "--replicas 1 or 2"},
		{[]string{"tickets", "serve", "--node-rate", "50"}, 2, "give --arch too"},
		{[]string{"tickets", "serve", "--sports", "0"}, 2, "--sports 0"},
		{[]string{"tickets", "serve", "--tickets-per-sport", "0"}, 2, "tickets per sport"},
		{[]string{"loadtest", "tickets"}, 2, `required flag(s) "token", "url" not set`},
		{[]string{"loadtest", "tickets", "--token", "t"}, 2, `required flag(s) "url" not set`},
		{[]string{"loadtest", "tickets", "--url", "ftp://x", "--token", "t"}, 2, "want http://host:port"},
		{[]string{"loadtest", "tickets", "--url", "http://x", "--token", "t", "--hot-multipliers", "1,x"}, 2, `"x" is not a positive number`},
		{[]string{"loadtest", "tickets", "--url", "http://x", "--token", "t", "--ops", "sell"}, 2, `--ops "sell"`},
		{[]string{"loadtest", "tickets", "--url", "http://x", "--token", "t", "--step", "1s", "--warmup", "2s"}, 2, "--warmup shorter than --step"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.msg)
		}
	}
	// A server that is not there fails the run at once, not never.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{
		{"loadtest", "write", "--url", down, "--token", "t", "--users", "1"},
		{"loadtest", "read", "--url", down, "--token", "t", "--hold", "1s"},
		{"loadtest", "tickets", "--url", down, "--token", "t", "--step", "1s"},
	} {
		start := time.Now()
		code, _, stderr := runCLI(t, args...)
		if code != 1 || !strings.Contains(stderr, "cannot reach "+down) || time.Since(start) > 10*time.Second {
			t.Errorf("%v against a closed port: exit %d after %v, stderr %q; want exit 1 and \"cannot reach\" at once", args, code, time.Since(start), stderr)
		}
	}
	t.Setenv("LOGBOOK_TOKENS", "")
	if code, _, stderr := runCLI(t, "tickets", "serve", "--data", t.TempDir()); code != 2 || !strings.Contains(stderr, "no bearer tokens") {
		t.Errorf("serve without tokens: %d %q", code, stderr)
	}
}

// tickets serve answers over HTTP, the load test runs against it, and
// tickets check reads the store it leaves.
func TestTicketsServeLoadtestCheck(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer,booker-token:booker")
	data := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		code := run(ctx, &env{stdout: &strings.Builder{}, stderr: &strings.Builder{}, getenv: func(string) string { return "" }},
			[]string{"tickets", "serve", "--data", data, "--addr", addr, "--arch", "fair", "--node-rate", "0", "--tickets-per-sport", "20"})
		done <- code
	}()
	ready := false
	for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(20 * time.Millisecond) {
		if res, err := http.Get("http://" + addr + "/healthz"); err == nil {
			res.Body.Close()
			ready = res.StatusCode == 200
			break
		}
	}
	if !ready {
		cancel()
		t.Fatalf("tickets serve did not answer /healthz (exit %d)", <-done)
	}
	figure := filepath.Join(t.TempDir(), "tickets.svg")
	code, out, stderr := runCLI(t, "loadtest", "tickets", "--url", "http://"+addr, "--token", "booker-token", "--ops", "book",
		"--cold-rate", "20", "--hot-multipliers", "1", "--step", "1s", "--json", "--plot", figure)
	var res struct {
		Arch  string `json:"arch"`
		Steps []struct {
			Throughput map[string]float64 `json:"throughput"`
			P99        map[string]float64 `json:"p99_ms"`
			Nodes      map[string]float64 `json:"nodes"`
		} `json:"steps"`
		ColdMinFraction       *float64 `json:"cold_min_fraction"`
		HotFractionOfCapacity *float64 `json:"hot_fraction_of_capacity"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Arch != "fair" || len(res.Steps) != 1 ||
		res.ColdMinFraction == nil || res.HotFractionOfCapacity == nil || res.Steps[0].Nodes["db1"] == 0 {
		t.Errorf("loadtest tickets: exit %d, %q, %q", code, out, stderr)
	}
	if svg, err := os.ReadFile(figure); err != nil || !strings.Contains(string(svg), "cycling") || !strings.Contains(string(svg), "db1") {
		t.Errorf("--plot drew no figure of sports and nodes: %v", err)
	}
	// The web page at / (the built tickets page, or the placeholder
	// that says how to build it).
	res0, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res0.Body)
	res0.Body.Close()
	if res0.StatusCode != 200 || !strings.HasPrefix(res0.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(page), "<html") {
		t.Errorf("GET /: %d %q %.200q, want the web page", res0.StatusCode, res0.Header.Get("Content-Type"), page)
	}
	// A live stream open at shutdown ends with it: the server exits at
	// once rather than after its shutdown timeout.
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/tickets/live", nil)
	req.Header.Set("Authorization", "Bearer viewer-token")
	live, err := http.DefaultClient.Do(req)
	if err != nil || live.StatusCode != 200 {
		t.Fatalf("live: %v %v", err, live)
	}
	defer live.Body.Close()
	if line, err := bufio.NewReader(live.Body).ReadString('\n'); err != nil || !strings.HasPrefix(line, `{"hello":`) {
		t.Fatalf("live: %q %v, want a hello", line, err)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("tickets serve exited %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("tickets serve did not stop within 5 s with a live stream open")
	}
	code, out, stderr = runCLI(t, "tickets", "check", "--data", data, "--json")
	var a struct {
		Events     int      `json:"events"`
		Violations []string `json:"violations"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &a) != nil || a.Events == 0 || len(a.Violations) != 0 {
		t.Errorf("tickets check: exit %d, %q, %q", code, out, stderr)
	}
}
