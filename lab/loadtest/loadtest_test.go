package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/internal/progress"
)

// TestReadIsOpenModel checks the schedule: the number of requests follows
// the ramp and hold, and a slow server shows up in the latency instead of
// slowing the generator down.
func TestReadIsOpenModel(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(401)
			return
		}
		hits.Add(1)
		time.Sleep(20 * time.Millisecond)
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	c := NewClient(srv.URL, "tok", 64, 0)
	defer c.Close()
	prog := &progress.Counter{}
	res, err := RunRead(context.Background(), c, ReadConfig{Rate: 200, Ramp: 500 * time.Millisecond, Hold: time.Second, Progress: prog})
	if err != nil {
		t.Fatal(err)
	}
	if _, done, total := prog.Load(); done != hits.Load() || total != done {
		t.Errorf("progress %d of %d, the server saw %d requests", done, total, hits.Load())
	}
	// The timeline has every second, the ramp's included.
	if len(res.Timeline) != 2 || res.Timeline[0].Rate < 50 || res.Timeline[0].P50 < 20 || res.Timeline[1].P99 < 20 {
		t.Errorf("timeline %+v", res.Timeline)
	}
	fig := res.Figure()
	if len(fig.Panels) != 2 || len(fig.Panels[0].Series) != 2 || fig.Panels[0].Series[1].Name != "target" ||
		len(fig.Panels[1].Series[2].Y) != len(res.Timeline)-1 { // the partial last second left out
		t.Errorf("figure %+v", fig)
	}
	// Ramp from 1 to 200/s over 0.5 s sends ~50, the hold 200.
	if total := hits.Load(); total < 230 || total > 270 {
		t.Fatalf("%d requests, want about 250", total)
	}
	if res.Requests < 190 || res.Requests > 210 || res.Failures != 0 {
		t.Fatalf("hold phase: %+v", res)
	}
	if res.P50 < 20 {
		t.Fatalf("p50 %.1f ms below the server's 20 ms", res.P50)
	}
	// A closed-model generator would slow down to match a slow server;
	// an open one still sends 200/s — and so does this one.
	if res.AchievedRate < 180 || res.AchievedRate > 220 {
		t.Fatalf("achieved %.0f/s, want about 200", res.AchievedRate)
	}
}

func TestWritePlanners(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprint("direct=", direct), func(t *testing.T) { testWritePlanners(t, direct) })
	}
}

func testWritePlanners(t *testing.T, direct bool) {
	var paths atomic.Int64
	var failed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths.Add(1)
		if r.Method == "PUT" && !strings.HasSuffix(r.URL.Path, "/rotation") {
			failed.Store(true)
		}
		w.WriteHeader(201)
	}))
	defer srv.Close()
	c := NewClient(srv.URL, "tok", 16, 0)
	defer c.Close()
	res, err := RunWrite(context.Background(), c, WriteConfig{Users: 20, Legs: 5, Waves: 4, WaveInterval: 10 * time.Millisecond, Direct: direct})
	if err != nil {
		t.Fatal(err)
	}
	// Each planner: create rotation, 5 legs, create airplane, assign.
	if res.Requests != 20*8 || paths.Load() != 160 || res.Failures != 0 || failed.Load() {
		t.Fatalf("%+v, server saw %d", res, paths.Load())
	}
	if len(res.Timeline) == 0 || res.Timeline[0].Rate <= 0 {
		t.Fatalf("timeline %+v", res.Timeline)
	}
}

func TestLegBodyIsTheLegsJSON(t *testing.T) {
	dep := time.Date(2026, 4, 1, 23, 10, 0, 0, time.UTC)
	got := legBody("A\"B", 42, "FRA", "MUC", dep, dep.Add(100*time.Minute))
	want, _ := json.Marshal(map[string]any{
		"airline": "A\"B", "number": 42, "origin": "FRA", "destination": "MUC",
		"departure": dep, "arrival": dep.Add(100 * time.Minute),
	})
	var g, w map[string]any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	_ = json.Unmarshal(want, &w)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestWaitCaughtUp(t *testing.T) {
	var calls atomic.Int64
	var stuck atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz":
			fmt.Fprint(w, `{"status":"ok","head":30}`)
		case stuck.Load():
			fmt.Fprint(w, `{"valid":true,"position":5}`)
		default:
			fmt.Fprintf(w, `{"valid":true,"position":%d}`, 10*calls.Add(1)) // 10, 20, 30
		}
	}))
	defer srv.Close()
	c := NewClient(srv.URL, "tok", 1, 0)
	defer c.Close()
	if err := WaitCaughtUp(context.Background(), c, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 3 {
		t.Fatalf("asked the view %d times, want until it reached the head (3)", calls.Load())
	}
	stuck.Store(true)
	err := WaitCaughtUp(context.Background(), c, 150*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "of 30 after") {
		t.Fatalf("a view that does not catch up: %v", err)
	}
}

// TestReadConnsAvoidHeadOfLineBlocking: with ReadConfig.Conns each
// request has a connection to itself, so a slow answer holds up no other
// request, while requests pipelined over two connections, each of which
// often carries a slow one, wait behind it.
func TestReadConnsAvoidHeadOfLineBlocking(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(100 * time.Millisecond)
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	// A tenth of the requests are slow: the 75th percentile is a fast
	// one unless it waited behind a slow one.
	paths := []string{"/slow", "/fast", "/fast", "/fast", "/fast", "/fast", "/fast", "/fast", "/fast", "/fast"}
	cfg := ReadConfig{Rate: 200, Hold: 2 * time.Second, Paths: paths, Conns: 2}
	own, err := RunRead(t.Context(), NewClient(srv.URL, "tok", 1, 0), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Conns = 0
	piped, err := RunRead(t.Context(), NewClient(srv.URL, "tok", 2, 0), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("own connections (%d opened): p75 %.1f p99 %.1f ms; pipelined over 2: p75 %.1f p99 %.1f ms", own.Conns, own.P75, own.P99, piped.P75, piped.P99)
	if own.P75 > 20 || own.P99 < 100 {
		t.Errorf("own connections: p75 %.1f ms, p99 %.1f ms; want the fast ones fast and the slow ones 100 ms", own.P75, own.P99)
	}
	if piped.P75 < 20 {
		t.Errorf("pipelined over 2 connections: p75 %.1f ms, want the fast requests held up behind the slow ones", piped.P75)
	}
}

// TestReadConnsGrow: a request that finds every connection busy opens
// another instead of waiting for one, as another user would, and the run
// reports how many it opened.
func TestReadConnsGrow(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
		_, _ = w.Write([]byte(`{}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	// Two connections serve 100 requests a second at most; 150 are
	// offered, so about three are busy at a time.
	res, err := RunRead(t.Context(), NewClient(srv.URL, "tok", 8, 0), ReadConfig{Rate: 150, Hold: 2 * time.Second, Conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d connections opened (the server saw %d), p99 %.1f ms", res.Conns, conns.Load(), res.P99)
	if res.Conns <= 2 || int64(res.Conns) != conns.Load() {
		t.Errorf("the run opened %d connections and the server saw %d; want more than the 2 dialled up front, and the same", res.Conns, conns.Load())
	}
	if res.P99 > 100 {
		t.Errorf("p99 %.1f ms: requests waited for a connection instead of opening one", res.P99)
	}
}
