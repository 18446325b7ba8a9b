package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/services/tickets"
)

// newLiveServer is newServer with the API value at hand (its stream
// limit) and its life context, which the test may end.
func newLiveServer(t *testing.T, maxStreams int) (*httptest.Server, context.CancelFunc) {
	t.Helper()
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := tickets.New(ctx, store, tickets.Config{Catalogue: tickets.Catalogue{Sports: tickets.DefaultSports, PerSport: 20, Days: 4}, Gate: newTestGate(nil)})
	if err != nil {
		t.Fatal(err)
	}
	tokens, _ := auth.ParseEnv(viewer+":viewer,"+booker+":booker,planner-token:planner", append(Roles(), "planner")) // planner: another service's role
	a := &API{Service: svc, tokens: tokens, life: ctx}
	a.live.max = maxStreams
	srv := httptest.NewServer(a.handler())
	t.Cleanup(func() {
		srv.Close()
		cancel()
		svc.Close()
		store.Close()
	})
	return srv, cancel
}

// schema compiles one of the OpenAPI document's component schemas: the
// stream's items are not JSON answers apitest checks by route.
func schema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(OpenAPI()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("openapi.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("openapi.json#/components/schemas/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func valid(t *testing.T, s *jsonschema.Schema, raw []byte) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(inst); err != nil {
		t.Fatalf("%s: not what openapi.json says: %v", raw, err)
	}
}

func openLive(t *testing.T, ctx context.Context, srv *httptest.Server, query, token string, header ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/tickets/live"+query, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// TestLive: the stream says hello with every sport and node, then
// samples whose rates times their intervals add up to exactly the
// requests sent, per sport, and the same total over the nodes (each
// request completes on one node).
func TestLive(t *testing.T) {
	srv, _ := newLiveServer(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := openLive(t, ctx, srv, "?interval=100", viewer)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("live: %d %q, want 200 NDJSON", res.StatusCode, res.Header.Get("Content-Type"))
	}
	lines := bufio.NewScanner(res.Body)
	next := func() map[string]json.RawMessage {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("live: the stream ended: %v", lines.Err())
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil || len(m) != 1 {
			t.Fatalf("live: line %q: want one named value (%v)", lines.Bytes(), err)
		}
		return m
	}
	first := next()
	valid(t, schema(t, "LiveHello"), first["hello"])
	var hello LiveHello
	_ = json.Unmarshal(first["hello"], &hello)
	if strings.Join(hello.Sports, ",") != "athletics,cycling,diving" || strings.Join(hello.Nodes, ",") != "db1,db2,db3" || hello.IntervalMS != 100 || hello.Arch != testGateName {
		t.Fatalf("hello %+v", hello)
	}

	// 7 cycling searches, 2 diving bookings, 3 control requests.
	want := map[string]int{"cycling": 7, "diving": 2}
	for range 7 {
		if status, _, m := call(t, srv, ctx, "GET", "/api/tickets/search?sport=cycling", viewer, ""); status != 200 {
			t.Fatalf("search: %d %v", status, m)
		}
	}
	for _, id := range []string{"diving.1", "diving.2"} {
		if status, _, m := call(t, srv, ctx, "POST", "/api/tickets/"+id+"/book", booker, `{"owner":"ann"}`); status != 200 {
			t.Fatalf("book: %d %v", status, m)
		}
	}
	for range 3 {
		call(t, srv, ctx, "GET", "/api/tickets/control", viewer, "")
	}
	sampleSchema := schema(t, "LiveSample")
	got := map[string]int{}
	nodes, control := 0, 0
	count := func(rate, secs float64) int { return int(math.Round(rate * secs)) }
	for deadline := time.Now().Add(10 * time.Second); got["cycling"] < 7 || got["diving"] < 2 || nodes < 9 || control < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s the samples counted %v, nodes %d, control %d; want %v, 9, 3", got, nodes, control, want)
		}
		m := next()
		valid(t, sampleSchema, m["sample"])
		var s LiveSample
		_ = json.Unmarshal(m["sample"], &s)
		if s.Seconds < 0.05 || s.Seconds > 5 || time.Since(s.At) > 10*time.Second {
			t.Fatalf("sample %+v: interval or time out of bounds", s)
		}
		for sport, r := range s.Sports {
			if r <= 0 {
				t.Fatalf("sample %+v lists a sport that served nothing", s)
			}
			got[sport] += count(r, s.Seconds)
		}
		for _, r := range s.Nodes {
			nodes += count(r, s.Seconds)
		}
		control += count(s.Control, s.Seconds)
	}
	if len(got) != 2 || got["cycling"] != 7 || got["diving"] != 2 || nodes != 9 || control != 3 {
		t.Fatalf("the samples counted %v, nodes %d, control %d; want %v, 9, 3", got, nodes, control, want)
	}
}

func TestLiveRequests(t *testing.T) {
	srv, _ := newLiveServer(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		query, token string
		status       int
	}{
		{"", "", 401},
		{"", "wrong-token", 401},
		{"?interval=99", viewer, 400},
		{"?interval=60001", viewer, 400},
		{"?interval=x", viewer, 400},
		{"?format=xml", viewer, 400},
		{"?colour=red", viewer, 400},
	} {
		if status, _, m := call(t, srv, ctx, "GET", "/api/tickets/live"+c.query, c.token, ""); status != c.status {
			t.Errorf("live%s as %q: %d %v, want %d", c.query, c.token, status, m, c.status)
		}
	}
	// Any role reads it, as server-sent events when asked.
	for _, c := range []struct{ query, accept string }{{"", "text/event-stream"}, {"?format=sse", ""}} {
		res := openLive(t, ctx, srv, c.query, booker, "Accept", c.accept)
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("live%s (Accept %q): %d %q, want an event stream", c.query, c.accept, res.StatusCode, res.Header.Get("Content-Type"))
		}
		r := bufio.NewReader(res.Body)
		line, _ := r.ReadString('\n')
		data, _ := r.ReadString('\n')
		if line != "event: hello\n" || !strings.HasPrefix(data, "data: {") {
			t.Fatalf("live as SSE: %q %q, want a hello event", line, data)
		}
		valid(t, schema(t, "LiveHello"), []byte(strings.TrimPrefix(data, "data: ")))
		res.Body.Close()
	}
	res := openLive(t, ctx, srv, "?format=ndjson", "planner-token", "Accept", "text/event-stream")
	if res.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("format=ndjson: %q", res.Header.Get("Content-Type"))
	}
}

// TestLiveBounded: past its limit a server refuses a live stream with
// 503 and Retry-After, and takes one again when a stream ends; the
// server's life ending ends the streams.
func TestLiveBounded(t *testing.T) {
	srv, stop := newLiveServer(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, firstCancel := context.WithCancel(ctx)
	a := openLive(t, first, srv, "", viewer)
	b := openLive(t, ctx, srv, "", viewer)
	if a.StatusCode != 200 || b.StatusCode != 200 {
		t.Fatalf("two streams: %d %d", a.StatusCode, b.StatusCode)
	}
	status, h, m := call(t, srv, ctx, "GET", "/api/tickets/live", viewer, "")
	if status != 503 || h.Get("Retry-After") == "" || m["type"] != "urn:logbook:problem:unavailable" {
		t.Fatalf("a third stream: %d %v %v, want 503 with Retry-After", status, h, m)
	}
	firstCancel()
	deadline := time.Now().Add(10 * time.Second)
	var c *http.Response
	for {
		c = openLive(t, ctx, srv, "", viewer)
		if c.StatusCode == 200 {
			break
		}
		c.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("after a stream ended: %d, want another taken", c.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	done := make(chan error, 2)
	for _, res := range []*http.Response{b, c} {
		go func() {
			_, err := io.Copy(io.Discard, res.Body)
			done <- err
		}()
	}
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("a stream at shutdown: %v, want its end", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the server's end did not end its live streams")
		}
	}
}

func TestSession(t *testing.T) {
	srv, _ := newLiveServer(t, 0)
	ctx := context.Background()
	for _, c := range []struct {
		token   string
		status  int
		role    string
		canBook bool
	}{
		{"", 401, "", false},
		{"wrong-token", 401, "", false},
		{viewer, 200, "viewer", false},
		{"planner-token", 200, "planner", false},
		{booker, 200, "booker", true},
	} {
		status, h, m := call(t, srv, ctx, "GET", "/api/tickets/session", c.token, "")
		if status != c.status {
			t.Fatalf("session as %q: %d %v, want %d", c.token, status, m, c.status)
		}
		if status != 200 {
			continue
		}
		if m["role"] != c.role || m["can_book"] != c.canBook || h.Get("Cache-Control") != "no-store" {
			t.Errorf("session as %q: %v, want role %s, can_book %v, not stored", c.token, m, c.role, c.canBook)
		}
		if m["days"] != 4.0 || m["tickets_per_sport"] != 20.0 || m["arch"] != testGateName || len(m["sports"].([]any)) != 3 {
			t.Errorf("session's catalogue: %v", m)
		}
	}
}
