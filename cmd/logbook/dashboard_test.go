package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// startFlightsNode runs the flights server (`logbook serve`) in-process
// on its own embedded store, with the tokens of LOGBOOK_TOKENS and the
// extra flags given, until the test ends; cancel stops it early. It
// returns the node's base URL.
func startFlightsNode(t *testing.T, ctx context.Context, cancel context.CancelFunc, flags ...string) string {
	t.Helper()
	var stderr syncBuffer
	done := make(chan int, 1)
	args := append([]string{"serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0", "--log-format", "json"}, flags...)
	go func() {
		done <- run(ctx, &env{stdout: &syncBuffer{}, stderr: &stderr, getenv: os.Getenv}, args)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, stderr.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, line := range strings.Split(stderr.String(), "\n") {
			var l struct{ Msg, URL string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "logbook serving" && l.URL != "" {
				return l.URL
			}
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("serve exited %d before serving: %s", code, stderr.String())
		default:
		}
	}
	t.Fatalf("no \"logbook serving\" line in the JSON log:\n%s", stderr.String())
	return ""
}
