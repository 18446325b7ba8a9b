package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// `logbook kv serve` serves the repository's HTTP API for real: add with
// If-None-Match: *, read with its version as the entity tag, 304 when
// unchanged, 412 on a stale If-Match, compare-and-set, delete; tokens
// required, the viewer only reads, and writing needs kv's own writer
// role: a flights planner's token may not.
func TestKVServe(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer,writer-token:writer,planner-token:planner")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- run(ctx, &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }},
			[]string{"kv", "serve", "--data", t.TempDir(), "--addr", addr})
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("kv serve exited %d", code)
		}
	}()
	ready := false
	for start := time.Now(); time.Since(start) < 20*time.Second && !ready; time.Sleep(20 * time.Millisecond) {
		if res, err := http.Get("http://" + addr + "/healthz"); err == nil {
			res.Body.Close()
			ready = res.StatusCode == http.StatusOK
		}
	}
	if !ready {
		t.Fatal("kv serve did not answer /healthz")
	}
	do := func(method, path, token, body string, header ...string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header.Get("ETag"), string(b)
	}
	for _, c := range []struct {
		method, path, token, body string
		header                    []string
		code                      int
		etag, answer              string
	}{
		{"GET", "/api/kv/users/1", "", "", nil, 401, "", ""},
		{"PUT", "/api/kv/users/1", "viewer-token", "x", []string{"If-None-Match", "*"}, 403, "", ""},
		{"PUT", "/api/kv/users/1", "planner-token", "x", []string{"If-None-Match", "*"}, 403, "", ""},
		{"PUT", "/api/kv/users/1", "writer-token", "alice", nil, 428, "", ""},
		{"PUT", "/api/kv/users/1", "writer-token", "alice", []string{"If-None-Match", "*"}, 201, `"1"`, ""},
		{"PUT", "/api/kv/users/1", "writer-token", "alice", []string{"If-None-Match", "*"}, 412, "", ""},
		{"GET", "/api/kv/users/1", "viewer-token", "", nil, 200, `"1"`, "alice"},
		{"GET", "/api/kv/users/1", "viewer-token", "", []string{"If-None-Match", `"1"`}, 304, `"1"`, ""},
		{"PUT", "/api/kv/users/1", "writer-token", "bob", []string{"If-Match", `"7"`}, 412, "", ""},
		{"PUT", "/api/kv/users/1", "writer-token", "bob", []string{"If-Match", `"1"`}, 204, `"2"`, ""},
		{"GET", "/api/kv/users/1", "viewer-token", "", []string{"If-None-Match", `"1"`}, 200, `"2"`, "bob"},
		{"DELETE", "/api/kv/users/1", "writer-token", "", []string{"If-Match", `"2"`}, 204, "", ""},
		{"GET", "/api/kv/users/1", "viewer-token", "", nil, 404, "", ""},
	} {
		code, etag, body := do(c.method, c.path, c.token, c.body, c.header...)
		if code != c.code || (c.etag != "" && etag != c.etag) || (c.answer != "" && body != c.answer) {
			t.Errorf("%s %s %v: %d %s %q; want %d %s %q", c.method, c.path, c.header, code, etag, body, c.code, c.etag, c.answer)
		}
	}
}
