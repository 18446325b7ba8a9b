package kvcas

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/lab/faultnet"
	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/httpapi"
	"github.com/logbook/logbook/services/kv/kvtest"
	"github.com/logbook/logbook/services/kv/pgkv"
)

const writerToken = "kvcas-writer"

// node is a kv node in this process: the kv HTTP API over its own pgkv
// pool, which reaches PostgreSQL through its own fault proxy.
type node struct {
	url   string
	proxy *faultnet.Proxy
}

func startNodes(t *testing.T, n int, wrap func(i int, h http.Handler) http.Handler) []node {
	t.Helper()
	raw, _ := testenv.SchemaURL(t)
	tokens := auth.NewTokens(httpapi.Roles())
	if err := tokens.Add(writerToken, httpapi.Writer); err != nil {
		t.Fatal(err)
	}
	var nodes []node
	for i := range n {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		p, err := faultnet.Listen(u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		u.Host = p.Addr()
		b, err := pgkv.Open(context.Background(), u.String(), pgkv.Options{MaxConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		repo := kv.New(b, kv.Limits{})
		var h http.Handler = httpapi.New(repo, tokens)
		if wrap != nil {
			h = wrap(i, h)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(func() { srv.Close(); repo.Close() })
		nodes = append(nodes, node{url: srv.URL, proxy: p})
	}
	return nodes
}

func urls(nodes []node) []string {
	var u []string
	for _, n := range nodes {
		u = append(u, n.url)
	}
	return u
}

// Two nodes on one PostgreSQL, one cut off from it for longer than the
// clients' timeout and the other's connections reset: the operations that
// timed out are of unknown outcome, and the history is linearizable.
func TestLinearizableOnPostgresUnderFaults(t *testing.T) {
	nodes := startNodes(t, 2, nil)
	w := &Workload{URLs: urls(nodes), Token: writerToken, Clients: 8, Keys: 3, Timeout: 500 * time.Millisecond, OpsPerKey: 150}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	var faults sync.WaitGroup
	faults.Add(1)
	go func() {
		defer faults.Done()
		time.Sleep(time.Second)
		nodes[0].proxy.Cut()
		time.Sleep(1200 * time.Millisecond)
		nodes[0].proxy.Heal()
		nodes[1].proxy.Reset()
	}()
	h, err := w.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	faults.Wait()
	start := time.Now()
	res, err := Check(h, filepath.Join(t.TempDir(), "viz.html"))
	if err != nil {
		t.Fatal(err)
	}
	counts := h.Counts()
	t.Logf("%+v (checked in %v); %v; refused %v", res, time.Since(start).Round(time.Millisecond), counts, h.Refused)
	if !res.Linearizable {
		t.Fatalf("history of a correct cluster not linearizable: %+v", res)
	}
	if len(h.Refused) != 0 {
		t.Fatalf("answers refusing the workload: %v", h.Refused)
	}
	if res.Indeterminate == 0 {
		t.Fatal("no operation of unknown outcome: the cut did not bite")
	}
	if h.Acknowledged() < 10 || counts["update/ok"] == 0 || counts["update/stale"] == 0 || counts["get/ok"] == 0 {
		t.Fatalf("too little contention to mean anything: %v", counts)
	}
}

// staleCache serves a key's GET from a copy kept for a while: a node that
// does this answers reads that miss writes acknowledged before them.
func staleCache(ttl time.Duration, h http.Handler) http.Handler {
	type entry struct {
		at     time.Time
		status int
		etag   string
		body   []byte
	}
	var mu sync.Mutex
	cache := map[string]entry{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			h.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		e, ok := cache[r.URL.Path]
		mu.Unlock()
		if !ok || time.Since(e.at) > ttl {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			e = entry{time.Now(), rec.Code, rec.Header().Get("ETag"), rec.Body.Bytes()}
			mu.Lock()
			cache[r.URL.Path] = e
			mu.Unlock()
		}
		if e.etag != "" {
			w.Header().Set("ETag", e.etag)
		}
		w.WriteHeader(e.status)
		w.Write(e.body)
	})
}

// The check must be able to fail: one node of two serves reads from a
// stale cache, and the history is not linearizable, with a visualization.
func TestCatchesStaleReads(t *testing.T) {
	nodes := startNodes(t, 2, func(i int, h http.Handler) http.Handler {
		if i == 1 {
			return staleCache(300*time.Millisecond, h)
		}
		return h
	})
	w := &Workload{URLs: urls(nodes), Token: writerToken, Clients: 8, Keys: 2, Timeout: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	h, err := w.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	viz := filepath.Join(t.TempDir(), "viz.html")
	res, err := Check(h, viz)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v; %v", res, h.Counts())
	if res.Linearizable {
		t.Fatal("stale reads passed the check")
	}
	if res.Visualization != viz {
		t.Fatalf("visualization %q, want %q", res.Visualization, viz)
	}
	b, err := os.ReadFile(viz)
	if err != nil || !bytes.Contains(b, []byte("<html")) {
		t.Fatalf("visualization: %d bytes, %v", len(b), err)
	}
}

func TestBadConfiguration(t *testing.T) {
	for _, w := range []Workload{
		{Token: "t"},
		{URLs: []string{"127.0.0.1:8083"}, Token: "t"},
		{URLs: []string{"http://127.0.0.1:8083"}},
	} {
		if _, err := w.Run(context.Background()); err == nil {
			t.Fatalf("%+v accepted", w)
		}
	}
}

// A wrong token is counted as refused, not recorded as an operation.
func TestWrongTokenIsRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer right" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
	}))
	defer srv.Close()
	w := &Workload{URLs: []string{srv.URL + "/"}, Token: "wrong", Clients: 2, OpsPerClient: 5}
	h, err := w.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Ops) != 0 || h.Refused[http.StatusUnauthorized] != 10 {
		t.Fatalf("ops %d, refused %v", len(h.Ops), h.Refused)
	}
}

func TestInterpret(t *testing.T) {
	resp := func(status int, etag string) *http.Response {
		r := &http.Response{StatusCode: status, Status: http.StatusText(status), Header: http.Header{}}
		if etag != "" {
			r.Header.Set("ETag", etag)
		}
		return r
	}
	cases := []struct {
		in     kvtest.Input
		resp   *http.Response
		body   string
		want   kvtest.Output
		status int
		err    string
	}{
		{kvtest.Input{Op: "get"}, resp(200, `"3"`), "v", kvtest.Output{Kind: "ok", Version: 3, Value: "v"}, 0, ""},
		{kvtest.Input{Op: "get"}, resp(404, ""), "", kvtest.Output{Kind: "absent"}, 0, ""},
		{kvtest.Input{Op: "get"}, resp(200, ""), "v", kvtest.Output{}, 0, "without a version"},
		{kvtest.Input{Op: "add"}, resp(201, `"1"`), "", kvtest.Output{Kind: "ok"}, 0, ""},
		{kvtest.Input{Op: "add"}, resp(412, ""), "{}", kvtest.Output{Kind: "exists"}, 0, ""},
		{kvtest.Input{Op: "update"}, resp(204, `"4"`), "", kvtest.Output{Kind: "ok", Version: 4}, 0, ""},
		{kvtest.Input{Op: "update"}, resp(412, ""), `{"current_version":7}`, kvtest.Output{Kind: "stale", Version: 7}, 0, ""},
		{kvtest.Input{Op: "delete"}, resp(412, ""), `{}`, kvtest.Output{}, 0, "without current_version"},
		{kvtest.Input{Op: "delete"}, resp(404, ""), "", kvtest.Output{Kind: "notfound"}, 0, ""},
		{kvtest.Input{Op: "delete"}, resp(503, ""), "", kvtest.Output{}, 0, "Service Unavailable"},
		{kvtest.Input{Op: "update"}, resp(502, ""), "", kvtest.Output{}, 0, "Bad Gateway"},
		{kvtest.Input{Op: "update"}, resp(428, ""), "", kvtest.Output{}, 428, ""},
	}
	for _, c := range cases {
		got, st, err := interpret(c.in, c.resp, []byte(c.body))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v %d: err %v, want %q", c.in.Op, c.resp.StatusCode, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want || st != c.status {
			t.Errorf("%v %d: %+v %d %v, want %+v %d", c.in.Op, c.resp.StatusCode, got, st, err, c.want, c.status)
		}
	}
}
