package cluster

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/logbook/logbook/internal/testenv"
)

// TestNginxRetriesOnlyKeyedCommands: when a write node fails mid-request,
// nginx tries the next one for a command with an Idempotency-Key (a second
// delivery is a duplicate) but not for one without (it could be applied
// twice). Both nodes here drop every connection, so the count of
// deliveries is the count of tries.
func TestNginxRetriesOnlyKeyedCommands(t *testing.T) {
	nginx := testenv.Nginx(t)
	var deliveries atomic.Int64
	drop := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deliveries.Add(1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	var nodes []*Node
	for range 2 {
		srv := httptest.NewServer(drop)
		defer srv.Close()
		nodes = append(nodes, &Node{Addr: strings.TrimPrefix(srv.URL, "http://")})
	}
	// A fresh nginx for each request: a node that failed is passed over
	// for a while (max_fails), which would hide the retry being measured.
	post := func(key string) int64 {
		t.Helper()
		c := &Cluster{cfg: Config{Dir: t.TempDir(), Nginx: nginx, Addr: "127.0.0.1:0"}, Writers: nodes}
		if err := c.startNginx(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer c.Stop()
		deliveries.Store(0)
		req, _ := http.NewRequest("POST", c.URL+"/api/rotations/R1/legs", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusBadGateway {
			t.Fatalf("status %d, want 502 (every node dropped the request)", res.StatusCode)
		}
		return deliveries.Load()
	}
	if n := post(""); n != 1 {
		t.Errorf("a command without a key was delivered %d times, want once", n)
	}
	if n := post("k1"); n != 2 {
		t.Errorf("a command with a key was delivered %d times, want on both nodes", n)
	}
}
