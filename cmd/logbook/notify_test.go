package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/logbook/logbook/services/notify/sink"
)

// `logbook notify sink` serves the loopback endpoint for real: a batch
// posted is counted per key, a key posted twice shows as a duplicate.
func TestNotifySink(t *testing.T) {
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
			[]string{"notify", "sink", "--addr", addr})
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("notify sink exited %d", code)
		}
	}()
	body := []byte(`{"messages":[{"key":"r/1/push","user_id":1,"channel":"push","to":["t"]},{"key":"r/1/push","user_id":1,"channel":"push","to":["t"]}]}`)
	var res *http.Response
	for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(20 * time.Millisecond) {
		if res, err = http.Post("http://"+addr+sink.Path, "application/json", bytes.NewReader(body)); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("deliver: status %d", res.StatusCode)
	}
	res, err = http.Get("http://" + addr + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var st sink.Stats
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.FirstTakenAt.IsZero() || !st.LastNewKeyAt.Equal(st.FirstTakenAt) {
		t.Fatalf("stats %+v: the one batch is both the first taken and the last new key", st)
	}
	st.FirstTakenAt, st.LastNewKeyAt = time.Time{}, time.Time{}
	if st != (sink.Stats{Calls: 1, Messages: 2, UniqueKeys: 1, Duplicates: 1}) {
		t.Fatalf("stats %+v", st)
	}
}

func TestNotifySinkBadFlag(t *testing.T) {
	var stderr bytes.Buffer
	code := run(context.Background(), &env{stdout: io.Discard, stderr: &stderr, getenv: func(string) string { return "" }},
		[]string{"notify", "sink", "--error-rate", "2"})
	if code == 0 || !bytes.Contains(stderr.Bytes(), []byte("error rate 2")) {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// notify serve refuses missing or bad flags before opening anything.
func TestNotifyServeBadUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"notify", "serve", "--push-url", "http://x", "--email-url", "http://y"}, `required flag(s) "users-db" not set`},
		{[]string{"notify", "serve", "--users-db", "postgres://x/y"}, `required flag(s) "email-url", "push-url" not set`},
		{[]string{"notify", "serve", "--users-db", "mysql://x/y", "--push-url", "http://x", "--email-url", "http://y"}, "--users-db postgres://… is required"},
		{[]string{"notify", "serve", "--users-db", "postgres://x/y", "--push-url", "http://x", "--email-url", "http://y", "--chunk", "0"}, "--chunk 1-50000"},
		{[]string{"notify", "serve", "--users-db", "postgres://x/y", "--push-url", "http://x", "--email-url", "http://y", "--metrics-sink", "mysql://x"}, "--metrics-sink"},
		{[]string{"notify", "serve", "--users-db", "postgres://x/y", "--push-url", "http://x", "--email-url", "http://y", "--max-timestamp-skew", "0s"}, "--max-timestamp-skew"},
		{[]string{"notify", "serve", "--users-db", "postgres://x/y", "--push-url", "http://x", "--email-url", "http://y", "--max-timestamp-age", "-1h"}, "--max-timestamp-age"},
		{[]string{"notify", "serve", "--users-db", "postgres://x/y", "--push-url", "http://x", "--email-url", "http://y", "--bus", "http://x"}, "--bus"},
		// Delivery URLs: absolute http or https with a host, shown redacted.
		{[]string{"notify", "serve", "--users-db", "postgres://x/y", "--push-url", "127.0.0.1:8084/deliver", "--email-url", "http://y"}, "--push-url"},
		{[]string{"notify", "serve", "--users-db", "postgres://x/y", "--push-url", "http://x", "--email-url", "ftp://u:pw@y/?key=s3cret"}, `--email-url: "ftp://***@y/?key=***": want an absolute http:// or https:// URL with a host`},
		{[]string{"notify", "serve", "--users-db", "postgres://x/y", "--push-url", "http:///deliver", "--email-url", "http://y"}, "--push-url"},
	} {
		var stderr bytes.Buffer
		code := run(context.Background(), &env{stdout: io.Discard, stderr: &stderr, getenv: func(string) string { return "" }}, c.args)
		if code == 0 || !bytes.Contains(stderr.Bytes(), []byte(c.want)) {
			t.Errorf("%v: exit %d, stderr %q, want it to name %s", c.args, code, stderr.String(), c.want)
		}
	}
}
