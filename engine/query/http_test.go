package query_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/query"
)

func newServer(t *testing.T, opts query.HandlerOptions) (*httptest.Server, eventstore.Store) {
	t.Helper()
	s := openStore(t)
	j := newReader(t, s, query.Options{MaxBufferSize: 3})
	mux := http.NewServeMux()
	mux.Handle("/queries/", query.NewHandler(j, opts))
	srv := httptest.NewServer(mux)
	// Live responses end when the reader closes, before the server waits
	// for them.
	t.Cleanup(srv.Close)
	t.Cleanup(j.Close)
	return srv, s
}

func get(t *testing.T, ctx context.Context, url string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// ndjson reads a whole NDJSON response into objects of type T.
func ndjson[T any](t *testing.T, resp *http.Response) []T {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/x-ndjson" {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, ct, body)
	}
	var out []T
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue // heartbeat
		}
		var v T
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestHTTPEvents(t *testing.T) {
	ctx := testCtx(t)
	srv, s := newServer(t, query.HandlerOptions{})
	if _, err := s.Append(ctx, "order-1", eventstore.Any, []eventstore.NewEvent{
		{Type: "Placed", Version: 2, Tags: []string{"orders"}, Meta: map[string]string{"user": "ann"}, Data: []byte(`{"total": 12}`)},
		{Type: "Binary", Data: []byte{0xff, 0x00, 0x01}},
		{Type: "Empty"},
		{Type: "Text", Data: []byte("not json")},
		{Type: "Tail", Tags: []string{"orders"}, Data: []byte(`[1]`)},
	}); err != nil {
		t.Fatal(err)
	}
	evs := ndjson[query.EventJSON](t, get(t, ctx, srv.URL+"/queries/events?stream=order-1"))
	if len(evs) != 5 {
		t.Fatalf("%d events", len(evs))
	}
	e := evs[0]
	if e.Stream != "order-1" || e.Seq != 1 || e.Position != 1 || e.Type != "Placed" || e.Version != 2 ||
		!slices.Equal(e.Tags, []string{"orders"}) || e.Meta["user"] != "ann" || string(e.Data) != `{"total":12}` ||
		e.DataBase64 != nil || e.Time.IsZero() {
		t.Fatalf("first event: %+v", e)
	}
	if _, err := eventstore.ParseID(e.ID); err != nil {
		t.Fatalf("id %q: %v", e.ID, err)
	}
	if evs[1].Data != nil || evs[1].DataBase64 == nil || !slices.Equal(*evs[1].DataBase64, []byte{0xff, 0, 1}) {
		t.Fatalf("binary payload: %+v", evs[1])
	}
	if evs[2].Data != nil || evs[2].DataBase64 == nil || len(*evs[2].DataBase64) != 0 || evs[2].Tags == nil || evs[2].Meta == nil {
		t.Fatalf("empty payload: %+v", evs[2])
	}
	if evs[3].DataBase64 == nil || string(*evs[3].DataBase64) != "not json" {
		t.Fatalf("text payload: %+v", evs[3])
	}

	ranged := ndjson[query.EventJSON](t, get(t, ctx, srv.URL+"/queries/events?stream=order-1&from=2&to=3"))
	if len(ranged) != 2 || ranged[0].Seq != 2 || ranged[1].Seq != 3 {
		t.Fatalf("from 2 to 3: %+v", ranged)
	}
	all := ndjson[query.EventJSON](t, get(t, ctx, srv.URL+"/queries/all?from=4"))
	if len(all) != 2 || all[0].Position != 4 {
		t.Fatalf("all from 4: %+v", all)
	}
	tagged := ndjson[query.EventJSON](t, get(t, ctx, srv.URL+"/queries/tag/orders"))
	if len(tagged) != 2 || tagged[0].Position != 1 || tagged[1].Position != 5 {
		t.Fatalf("tag: %+v", tagged)
	}
	if _, err := s.Append(ctx, "order-2", eventstore.Any, []eventstore.NewEvent{{Type: "x"}}); err != nil {
		t.Fatal(err)
	}
	type idLine struct {
		Stream string `json:"stream"`
	}
	// /queries/persistence-ids is the former name of /queries/streams,
	// kept for clients.
	for _, path := range []string{"/queries/streams", "/queries/persistence-ids"} {
		ids := ndjson[idLine](t, get(t, ctx, srv.URL+path))
		if len(ids) != 2 || ids[0].Stream != "order-1" || ids[1].Stream != "order-2" {
			t.Fatalf("%s: %+v", path, ids)
		}
	}
}

// lines returns a channel of a streaming response's non-empty lines.
func lines(resp *http.Response) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() != "" {
				ch <- sc.Text()
			}
		}
	}()
	return ch
}

func nextLine(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("stream ended")
		}
		return l
	case <-time.After(patience):
		t.Fatal("no line")
	}
	return ""
}

func TestHTTPLive(t *testing.T) {
	ctx := testCtx(t)
	srv, s := newServer(t, query.HandlerOptions{Heartbeat: 5 * time.Millisecond})
	appendEvents(t, s, "a", 4, "t")

	for _, path := range []string{"/queries/events?stream=a&live=true", "/queries/all?live=1", "/queries/tag/t?live=true"} {
		t.Run(path, func(t *testing.T) {
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			resp := get(t, cctx, srv.URL+path)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			ch := lines(resp)
			var last query.EventJSON
			head, _ := s.Head(ctx)
			for range head {
				if err := json.Unmarshal([]byte(nextLine(t, ch)), &last); err != nil {
					t.Fatal(err)
				}
			}
			// Heartbeats keep the idle stream open; then a new event.
			time.Sleep(30 * time.Millisecond)
			appendEvents(t, s, "a", 1, "t")
			if err := json.Unmarshal([]byte(nextLine(t, ch)), &last); err != nil {
				t.Fatal(err)
			}
			if last.Seq != head+1 || last.Position != head+1 || last.Type != "test" || last.Stream != "a" {
				t.Fatalf("new event: %+v", last)
			}
		})
	}

	// An idle live stream sends heartbeats: empty lines in NDJSON,
	// comments in SSE.
	for _, c := range []struct{ accept, beat string }{{"*/*", "\n"}, {"text/event-stream", ":\n\n"}} {
		cctx, cancel := context.WithCancel(ctx)
		resp := get(t, cctx, srv.URL+"/queries/all?live=true&from=1000", "Accept", c.accept)
		buf := make([]byte, 64)
		n, err := io.ReadAtLeast(resp.Body, buf, 2*len(c.beat))
		if err != nil || strings.Trim(string(buf[:n]), c.beat) != "" {
			t.Fatalf("idle stream (%s) sent %q, %v", c.accept, buf[:n], err)
		}
		cancel()
	}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := lines(get(t, cctx, srv.URL+"/queries/streams?live=true"))
	if l := nextLine(t, ch); l != `{"stream":"a"}` {
		t.Fatalf("first id line %s", l)
	}
	appendEvents(t, s, "b", 1)
	if l := nextLine(t, ch); l != `{"stream":"b"}` {
		t.Fatalf("new id line %s", l)
	}
}

func TestHTTPServerSentEvents(t *testing.T) {
	ctx := testCtx(t)
	srv, s := newServer(t, query.HandlerOptions{})
	appendEvents(t, s, "other", 2)
	appendEvents(t, s, "a", 4)

	resp := get(t, ctx, srv.URL+"/queries/events?stream=a", "Accept", "text/event-stream")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	body, _ := io.ReadAll(resp.Body)
	frames := strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n")
	if len(frames) != 5 || frames[4] != "event: end\ndata: {}" {
		t.Fatalf("frames %q", frames)
	}
	if !strings.HasPrefix(frames[1], "id: 2\ndata: {") {
		t.Fatalf("second frame %q", frames[1])
	}
	// A reconnecting EventSource resumes after Last-Event-ID.
	resp = get(t, ctx, srv.URL+"/queries/all?format=sse", "Last-Event-ID", "4")
	body, _ = io.ReadAll(resp.Body)
	if !strings.HasPrefix(string(body), "id: 5\n") || strings.Count(string(body), "id: ") != 2 {
		t.Fatalf("resumed body %q", body)
	}
}

func TestHTTPErrors(t *testing.T) {
	ctx := testCtx(t)
	srv, _ := newServer(t, query.HandlerOptions{})
	cases := []struct {
		method, path string
		status       int
		param        string
	}{
		{"GET", "/queries/events", 400, "stream"},
		{"GET", "/queries/events?stream=a&from=x", 400, "from"},
		{"GET", "/queries/events?stream=a&from=-1", 400, "from"},
		{"GET", "/queries/events?stream=a&from=5&to=3", 400, "to"},
		{"GET", "/queries/events?stream=a&live=maybe", 400, "live"},
		{"GET", "/queries/events?stream=a&form=3", 400, "form"},
		{"GET", "/queries/events?stream=" + url.QueryEscape("bad\x01id"), 400, "stream"},
		{"GET", "/queries/events?stream=a&format=xml", 400, "format"},
		{"GET", "/queries/all?from=1.5", 400, "from"},
		{"GET", "/queries/tag/" + strings.Repeat("x", 200), 400, "tag"},
		{"GET", "/queries/streams?live=2", 400, "live"},
		{"GET", "/queries/persistence-ids?live=2", 400, "live"},
		{"POST", "/queries/streams", 405, ""},
		{"GET", "/queries/nothing", 404, ""},
		{"POST", "/queries/all", 405, ""},
		{"DELETE", "/queries/tag/x", 405, ""},
	}
	for _, c := range cases {
		req, _ := http.NewRequestWithContext(ctx, c.method, srv.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Type      string `json:"type"`
			Title     string `json:"title"`
			Status    int    `json:"status"`
			Detail    string `json:"detail"`
			Parameter string `json:"parameter"`
		}
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/problem+json" ||
			p.Status != c.status || p.Type != "about:blank" || p.Title != http.StatusText(c.status) ||
			p.Detail == "" || p.Parameter != c.param {
			t.Errorf("%s %s: status %d, %q, problem %+v", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"), p)
		}
	}
}

// TestHTTPClientGoneReturnsPermit checks that a live stream whose client
// disconnects ends, leaving no permit or waiter behind.
func TestHTTPClientGoneReturnsPermit(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t)
	j := newReader(t, s, query.Options{MaxConcurrentQueries: 1})
	srv := httptest.NewServer(query.NewHandler(j, query.HandlerOptions{}))
	defer srv.Close()
	appendEvents(t, s, "a", 1)
	cctx, cancel := context.WithCancel(ctx)
	ch := lines(get(t, cctx, srv.URL+"/queries/all?live=true"))
	nextLine(t, ch)
	cancel()
	for range ch {
	}
	waitFor(t, "the handler to finish", func() bool {
		st := j.Permitter().Stats()
		return st.InUse == 0 && st.Waiting == 0
	})
	// The only permit is free for the next query.
	resp := get(t, ctx, srv.URL+"/queries/all")
	if evs := ndjson[query.EventJSON](t, resp); len(evs) != 1 {
		t.Fatalf("%d events", len(evs))
	}
}
