package window

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/projection"
)

func TestHTTPPull(t *testing.T) {
	a := build(t, testDef("sent", Tumbling(time.Minute), 0, time.Hour, 24*time.Hour), []tev{
		ev("2025-03-01T10:00:00Z", "a", "x", 1, "u1"),
		ev("2025-03-01T10:30:00Z", "a", "y", 2, "u2"),
		ev("2025-03-01T11:00:00Z", "b", "x", 3, "u3"),
	})
	srv := httptest.NewServer(NewHandler([]*Aggregation{a}, HandlerOptions{}))
	defer srv.Close()

	resp, body := get(t, srv.URL+"/api/windows/sent?unit=hour&group_by=kind&sender=a&from=2025-03-01T00:00:00Z&to=2025-03-02T00:00:00Z", "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var res struct {
		Aggregation string `json:"aggregation"`
		Result
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatal(err)
	}
	expect(t, show(res.Rows), `
2025-03-01T10:00:00Z..2025-03-01T11:00:00Z kind=x n=1 late=0 sum=1 min=1 max=1 avg=1 users=1 closed
2025-03-01T10:00:00Z..2025-03-01T11:00:00Z kind=y n=1 late=0 sum=2 min=2 max=2 avg=2 users=1 closed
`)
	if res.Aggregation != "sent" || res.Position == 0 || !res.StreamTime.Equal(at("2025-03-01T11:00:00Z")) {
		t.Errorf("answer: %s", body)
	}

	resp, body = get(t, srv.URL+"/api/windows/sent?unit=day", "application/x-ndjson")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" || strings.Count(body, "\n") != 1 ||
		!strings.Contains(body, `"count":3`) {
		t.Errorf("ndjson: %d %s", resp.StatusCode, body)
	}

	for _, c := range []struct {
		query  string
		status int
		param  string
	}{
		{"unit=week", 400, "unit"},
		{"from=yesterday", 400, "from"},
		{"from=2300-01-01T00:00:00Z", 400, "from"}, // beyond Unix nanoseconds
		{"to=1600-01-01T00:00:00Z", 400, "to"},
		{"sendr=a", 400, "sendr"},
		{"group_by=sender,nope", 400, "group_by"},
		{"sender=a&sender=b", 400, "sender"},
		{"live=maybe", 400, "live"},
		{"live=true&format=json", 400, "format"},
		{"format=sse", 400, "format"},
		{"limit=0", 400, "limit"},
		{"limit=1", 422, ""},
	} {
		resp, body := get(t, srv.URL+"/api/windows/sent?"+c.query, "")
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s", c.query, resp.StatusCode, body)
			continue
		}
		var p map[string]any
		_ = json.Unmarshal([]byte(body), &p)
		if c.param != "" && p["parameter"] != c.param {
			t.Errorf("%s: parameter %v, want %s", c.query, p["parameter"], c.param)
		}
	}
	if resp, _ := get(t, srv.URL+"/api/windows/nope", ""); resp.StatusCode != 404 {
		t.Errorf("unknown aggregation: %d", resp.StatusCode)
	}
	post, err := http.Post(srv.URL+"/api/windows/sent", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != 405 {
		t.Errorf("POST: %d", post.StatusCode)
	}
}

func get(t *testing.T, u, accept string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestHTTPLive(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	a, err := Open(t.TempDir(), testDef("live", Tumbling(time.Minute), time.Minute), Options{MaxLive: 1, LiveInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	appendEvents(t, st, []tev{ev("2025-03-01T10:00:00Z", "a", "x", 1, "u1")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runner := projection.NewRunner(st, a, projection.Options{Name: "live"})
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	if err := runner.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler([]*Aggregation{a}, HandlerOptions{Heartbeat: 20 * time.Millisecond}))
	defer srv.Close()

	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/windows/live?live=true&sender=a&"+url.Values{"from": {"2025-03-01T00:00:00Z"}}.Encode(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan Row, 10)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() == "" {
				continue // heartbeat
			}
			var r Row
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Errorf("line %q: %v", sc.Text(), err)
			}
			lines <- r
		}
		close(lines)
	}()
	next := func() Row {
		select {
		case r := <-lines:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no row")
		}
		return Row{}
	}
	if r := next(); r.Count != 1 {
		t.Fatalf("first answer %+v", r)
	}
	// A second live query is over the bound.
	if resp2, body := get(t, srv.URL+"/api/windows/live?live=true", ""); resp2.StatusCode != 503 {
		t.Errorf("second live query: %d %s", resp2.StatusCode, body)
	}
	appendEvents(t, st, []tev{ev("2025-03-01T10:00:30Z", "a", "x", 5, "u1"), ev("2025-03-01T10:00:40Z", "b", "x", 5, "u1")})
	if r := next(); r.Count != 2 || r.Start != at("2025-03-01T10:00:00Z") {
		t.Errorf("change %+v", r)
	}
	// A second live query, as server-sent events, once the first is gone
	// (MaxLive is 1): the current rows, each with the position as id.
	sse := func() string {
		sctx, scancel := context.WithCancel(ctx)
		defer scancel()
		req, _ := http.NewRequestWithContext(sctx, "GET", srv.URL+"/api/windows/live?live=true&sender=a", nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("sse: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		br := bufio.NewReader(resp.Body)
		var ev []string
		for len(ev) < 2 {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if line != "\n" && !strings.HasPrefix(line, ":") {
				ev = append(ev, line)
			}
		}
		return strings.Join(ev, "")
	}
	appendEvents(t, st, []tev{ev("2025-03-01T10:05:00Z", "a", "x", 7, "u1")})
	// The 10:00 window closes (only the closed flag changes) and the
	// 10:05 one appears, in start order.
	if r := next(); !r.Closed || r.Count != 2 {
		t.Errorf("closing %+v", r)
	}
	if r := next(); r.Count != 1 || r.Start != at("2025-03-01T10:05:00Z") {
		t.Errorf("new window %+v", r)
	}
	resp.Body.Close()
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		// The first live query may not have ended yet: 503 until it has.
		r, _ := get(t, srv.URL+"/api/windows/live?unit=minute", "")
		if r.StatusCode == 200 && liveCount(a) == 0 {
			got = sse()
			break
		}
	}
	if !strings.HasPrefix(got, "id: 7\ndata: {") || !strings.Contains(got, `"count":2`) {
		t.Errorf("sse event %q", got)
	}
	cancel()
	<-done
}

func liveCount(a *Aggregation) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.live
}
