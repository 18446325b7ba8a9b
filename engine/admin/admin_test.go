package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/admin"
	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/eventstore/pgstore"
	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/engine/httpkit/openapitest"
	"github.com/logbook/logbook/engine/metrics"
	"github.com/logbook/logbook/engine/projection"
	"github.com/logbook/logbook/internal/testenv"
)

const (
	viewerToken = "viewer-token-0123"
	adminToken  = "admin-token-0123"
)

var answers = openapitest.NewAnswers(admin.OpenAPI(), httpkit.Specs(admin.Routes))

func TestDocumented(t *testing.T) {
	openapitest.CheckDocumented(t, admin.OpenAPI(), httpkit.Specs(admin.Routes))
}

func openStore(t *testing.T) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func appendTo(t *testing.T, s eventstore.Store, stream string, evs ...eventstore.NewEvent) {
	t.Helper()
	if _, err := s.Append(context.Background(), stream, eventstore.Any, evs); err != nil {
		t.Fatal(err)
	}
}

func jsonEvent(typ, data string) eventstore.NewEvent {
	return eventstore.NewEvent{Type: typ, Data: []byte(data)}
}

func tokens() *auth.Tokens {
	tk := auth.NewTokens([]auth.Role{auth.Admin})
	_ = tk.Add(viewerToken, auth.Viewer)
	_ = tk.Add(adminToken, auth.Admin)
	return tk
}

type answer struct {
	status int
	ctype  string
	body   []byte
}

// problemType is the answer's problem type; it fails t unless the answer
// is problem+json.
func (a answer) problemType(t *testing.T) string {
	t.Helper()
	if a.ctype != "application/problem+json" {
		t.Fatalf("answer %d of type %q, want application/problem+json: %s", a.status, a.ctype, a.body)
	}
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(a.body, &p); err != nil || p.Status != a.status || p.Detail == "" {
		t.Fatalf("problem %s: %v", a.body, err)
	}
	return p.Type
}

func do(t *testing.T, h http.Handler, method, path, token, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	a := answer{status: rec.Code, ctype: rec.Header().Get("Content-Type"), body: rec.Body.Bytes()}
	answers.Check(t, method, path, a.status, a.ctype, a.body)
	return a
}

func decode[T any](t *testing.T, a answer) T {
	t.Helper()
	if a.status != http.StatusOK {
		t.Fatalf("answer %d: %s", a.status, a.body)
	}
	var v T
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

type streamPage struct {
	Streams []struct {
		ID      string `json:"id"`
		Version uint64 `json:"version"`
	} `json:"streams"`
	Next string `json:"next"`
}

// Every id with the prefix, and only those, a page at a time: the pages
// join without a gap or a repeat, the prefix itself (a stream too)
// included, ids around the prefix's range left out.
func TestStreamsByPrefixInPages(t *testing.T) {
	t.Run("pebble", func(t *testing.T) { testStreamsByPrefix(t, openStore(t)) })
	// PostgreSQL, its reads capped at 2 rows: a page is read in parts.
	t.Run("postgres", func(t *testing.T) {
		url, _ := testenv.SchemaURL(t)
		s, err := pgstore.Open(context.Background(), url, pgstore.Options{MaxReadBatch: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		testStreamsByPrefix(t, s)
	})
}

func testStreamsByPrefix(t *testing.T, s eventstore.Store) {
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("rotation-%02d", i)
		want = append(want, id)
		for range i + 1 {
			appendTo(t, s, id, jsonEvent("Added", `{}`))
		}
	}
	for _, id := range []string{"airport-AMS", "rotation", "rotationz", "rotatio", "zebra"} {
		appendTo(t, s, id, jsonEvent("Added", `{}`))
	}
	h := admin.New(s, tokens(), admin.Options{})

	var got []string
	after, pages := "", 0
	for {
		p := decode[streamPage](t, do(t, h, "GET", "/admin/api/streams?prefix=rotation-&limit=3&after="+url.QueryEscape(after), viewerToken, ""))
		pages++
		for _, st := range p.Streams {
			got = append(got, st.ID)
			var i int
			fmt.Sscanf(st.ID, "rotation-%02d", &i)
			if st.Version != uint64(i+1) {
				t.Errorf("%s at version %d, want %d", st.ID, st.Version, i+1)
			}
		}
		if p.Next == "" {
			break
		}
		after = p.Next
		if pages > 5 {
			t.Fatal("paging does not end")
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || pages != 3 {
		t.Fatalf("%d pages of %v, want 3 of %v", pages, got, want)
	}

	// The prefix is itself a stream: it comes first.
	p := decode[streamPage](t, do(t, h, "GET", "/admin/api/streams?prefix=rotation&limit=2", viewerToken, ""))
	if len(p.Streams) != 2 || p.Streams[0].ID != "rotation" || p.Streams[1].ID != "rotation-00" || p.Next != "rotation-00" {
		t.Fatalf("prefix rotation: %+v", p)
	}
	p = decode[streamPage](t, do(t, h, "GET", "/admin/api/streams?prefix=rotationz", viewerToken, ""))
	if len(p.Streams) != 1 || p.Streams[0].ID != "rotationz" || p.Next != "" {
		t.Fatalf("prefix rotationz: %+v", p)
	}
	p = decode[streamPage](t, do(t, h, "GET", "/admin/api/streams?prefix=nothing-here", viewerToken, ""))
	if len(p.Streams) != 0 || p.Next != "" {
		t.Fatalf("prefix nothing-here: %+v", p)
	}
	// No prefix: every stream, in byte order.
	p = decode[streamPage](t, do(t, h, "GET", "/admin/api/streams?limit=500", viewerToken, ""))
	if len(p.Streams) != 12 || p.Streams[0].ID != "airport-AMS" || p.Streams[11].ID != "zebra" {
		t.Fatalf("all streams: %+v", p)
	}
}

// A page is bounded, and what is out of bounds is refused as a problem
// that says what the bound is — never silently clamped.
func TestBadInputIsAProblem(t *testing.T) {
	s := openStore(t)
	appendTo(t, s, "s", jsonEvent("E", `{}`))
	h := admin.New(s, tokens(), admin.Options{})
	for _, c := range []struct{ method, path, body, detail string }{
		{"GET", "/admin/api/streams?limit=0", "", "from 1 to 500"},
		{"GET", "/admin/api/streams?limit=501", "", "from 1 to 500"},
		{"GET", "/admin/api/streams?limit=ten", "", "from 1 to 500"},
		{"GET", "/admin/api/streams?prefix=" + strings.Repeat("x", 257), "", "at most 256"},
		{"GET", "/admin/api/streams?prefix=a%00b", "", "control character"},
		{"GET", "/admin/api/streams?page=2", "", `unknown query parameter \"page\"`},
		{"GET", "/admin/api/streams/s?limit=201", "", "from 1 to 200"},
		{"GET", "/admin/api/streams/s?from=0", "", "1 or more"},
		{"GET", "/admin/api/streams/s?from=-1", "", "1 or more"},
		{"DELETE", "/admin/api/streams/s?mode=very", "", "want soft or hard"},
		{"POST", "/admin/api/truncate", `{"stream":"s","before":1}`, "2 or more"},
		{"POST", "/admin/api/truncate", `{"stream":"","before":5}`, "stream id is required"},
		{"POST", "/admin/api/truncate", `{"stream":"s","before":5,"after":1}`, "after"},
		{"POST", "/admin/api/forget", `{"subject":""}`, "subject"},
		{"POST", "/admin/api/forget", `not json`, ""},
	} {
		a := do(t, h, c.method, c.path, adminToken, c.body)
		if a.status != http.StatusBadRequest {
			t.Errorf("%s %s: %d, want 400: %s", c.method, c.path, a.status, a.body)
			continue
		}
		a.problemType(t)
		if !strings.Contains(string(a.body), c.detail) {
			t.Errorf("%s %s: %s does not say %q", c.method, c.path, a.body, c.detail)
		}
	}
	a := do(t, h, "GET", "/admin/api/streams/missing", viewerToken, "")
	if a.status != http.StatusNotFound || a.problemType(t) != admin.TypeNoStream {
		t.Errorf("a missing stream: %d %s", a.status, a.body)
	}
	a = do(t, h, "GET", "/admin/api/nothing", viewerToken, "")
	if a.status != http.StatusNotFound {
		t.Errorf("an unknown route: %d %s", a.status, a.body)
	}
	a.problemType(t)
}

type eventPage struct {
	Stream  string `json:"stream"`
	Version uint64 `json:"version"`
	Events  []struct {
		Seq         uint64            `json:"seq"`
		Position    uint64            `json:"position"`
		Type        string            `json:"type"`
		Tags        []string          `json:"tags"`
		Meta        map[string]string `json:"meta"`
		Size        int               `json:"size"`
		ContentType string            `json:"content_type"`
		Data        json.RawMessage   `json:"data"`
		DataBase64  *[]byte           `json:"data_base64"`
	} `json:"events"`
	Next uint64 `json:"next"`
}

// A stream's events come with their metadata; a JSON payload as JSON,
// any other in base64 with the content type found for it; pages join at
// next.
func TestStreamEvents(t *testing.T) {
	s := openStore(t)
	bin := []byte{0, 1, 2, 0xff}
	appendTo(t, s, "flights/KL1001", // a '/' in the id: percent-encoded in the path
		eventstore.NewEvent{Type: "Scheduled", Tags: []string{"flight"}, Meta: map[string]string{"by": "planner"}, Data: []byte(`{"dep":"AMS","arr":"JFK"}`)},
		eventstore.NewEvent{Type: "Blob", Data: bin},
		eventstore.NewEvent{Type: "Note", Meta: map[string]string{"content-type": "text/markdown"}, Data: []byte("# not json")},
	)
	h := admin.New(s, tokens(), admin.Options{})
	p := decode[eventPage](t, do(t, h, "GET", "/admin/api/streams/flights%2FKL1001?limit=2", viewerToken, ""))
	if p.Stream != "flights/KL1001" || p.Version != 3 || len(p.Events) != 2 || p.Next != 3 {
		t.Fatalf("first page: %+v", p)
	}
	e := p.Events[0]
	if e.Seq != 1 || e.Position != 1 || e.Type != "Scheduled" || e.Meta["by"] != "planner" || fmt.Sprint(e.Tags) != "[flight]" ||
		e.ContentType != "application/json" || string(e.Data) != `{"dep":"AMS","arr":"JFK"}` || e.DataBase64 != nil {
		t.Errorf("a JSON event: %+v (data %s)", e, e.Data)
	}
	e = p.Events[1]
	if e.ContentType != "application/octet-stream" || e.Data != nil || e.DataBase64 == nil || !bytes.Equal(*e.DataBase64, bin) || e.Size != 4 {
		t.Errorf("a binary event: %+v", e)
	}
	p = decode[eventPage](t, do(t, h, "GET", "/admin/api/streams/flights%2FKL1001?from=3", viewerToken, ""))
	if len(p.Events) != 1 || p.Events[0].ContentType != "text/markdown" || string(*p.Events[0].DataBase64) != "# not json" || p.Next != 0 {
		t.Fatalf("last page: %+v", p)
	}
}

// A page of events ends once its payloads reach MaxPageBytes, whatever
// the limit asked, and says where to go on.
func TestEventPageBytesBounded(t *testing.T) {
	s := openStore(t)
	big := bytes.Repeat([]byte{'x'}, 900<<10)
	for range 6 {
		appendTo(t, s, "big", eventstore.NewEvent{Type: "Big", Data: big})
	}
	h := admin.New(s, tokens(), admin.Options{})
	p := decode[eventPage](t, do(t, h, "GET", "/admin/api/streams/big?limit=200", viewerToken, ""))
	want := admin.MaxPageBytes / len(big)
	if len(p.Events) != want || p.Next != uint64(want+1) {
		t.Fatalf("%d events, next %d; want %d, next %d", len(p.Events), p.Next, want, want+1)
	}
}

// hooks records the calls of the action hooks; an unknown stream is
// admin.ErrNoStream.
type hooks struct {
	mu    sync.Mutex
	calls []string
	known map[string]bool
}

func (h *hooks) options() admin.Options {
	return admin.Options{
		Delete: func(_ context.Context, stream string, hard bool) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			if !h.known[stream] {
				return fmt.Errorf("delete %q: %w", stream, admin.ErrNoStream)
			}
			h.calls = append(h.calls, fmt.Sprintf("delete %s hard=%v", stream, hard))
			return nil
		},
		Truncate: func(_ context.Context, stream string, before uint64) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.calls = append(h.calls, fmt.Sprintf("truncate %s before %d", stream, before))
			return nil
		},
		Forget: func(_ context.Context, subject string) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.calls = append(h.calls, "forget "+subject)
			return nil
		},
	}
}

type me struct {
	Role    string        `json:"role"`
	Actions admin.Actions `json:"actions"`
}

// A viewer reads but may not delete, truncate or forget (403, and the
// hook is never called); an admin may; no token is 401.
func TestRoles(t *testing.T) {
	s := openStore(t)
	appendTo(t, s, "s", jsonEvent("E", `{}`))
	rec := &hooks{known: map[string]bool{"s": true}}
	h := admin.New(s, tokens(), rec.options())

	for _, c := range []struct{ method, path, body string }{
		{"DELETE", "/admin/api/streams/s?mode=hard", ""},
		{"POST", "/admin/api/truncate", `{"stream":"s","before":2}`},
		{"POST", "/admin/api/forget", `{"subject":"user-1"}`},
	} {
		if a := do(t, h, c.method, c.path, viewerToken, c.body); a.status != http.StatusForbidden {
			t.Errorf("a viewer's %s %s: %d, want 403", c.method, c.path, a.status)
		} else {
			a.problemType(t)
		}
		if a := do(t, h, c.method, c.path, "", c.body); a.status != http.StatusUnauthorized {
			t.Errorf("no token's %s %s: %d, want 401", c.method, c.path, a.status)
		}
	}
	if len(rec.calls) != 0 {
		t.Fatalf("hooks called for a viewer: %v", rec.calls)
	}
	if m := decode[me](t, do(t, h, "GET", "/admin/api/me", viewerToken, "")); m.Role != "viewer" || m.Actions != (admin.Actions{}) {
		t.Errorf("a viewer: %+v", m)
	}
	if a := do(t, h, "GET", "/admin/api/head", viewerToken, ""); a.status != http.StatusOK || !strings.Contains(string(a.body), `"head":1`) {
		t.Errorf("a viewer reading the head: %d %s", a.status, a.body)
	}

	if m := decode[me](t, do(t, h, "GET", "/admin/api/me", adminToken, "")); m.Role != "admin" || m.Actions != (admin.Actions{Delete: true, Truncate: true, Forget: true}) {
		t.Errorf("an admin: %+v", m)
	}
	for _, c := range []struct{ method, path, body string }{
		{"DELETE", "/admin/api/streams/s?mode=hard", ""},
		{"DELETE", "/admin/api/streams/s", ""},
		{"POST", "/admin/api/truncate", `{"stream":"s","before":2}`},
		{"POST", "/admin/api/forget", `{"subject":"user-1"}`},
	} {
		if a := do(t, h, c.method, c.path, adminToken, c.body); a.status != http.StatusNoContent {
			t.Errorf("an admin's %s %s: %d, want 204: %s", c.method, c.path, a.status, a.body)
		}
	}
	want := "[delete s hard=true delete s hard=false truncate s before 2 forget user-1]"
	if fmt.Sprint(rec.calls) != want {
		t.Errorf("calls %v, want %s", rec.calls, want)
	}
	a := do(t, h, "DELETE", "/admin/api/streams/unknown", adminToken, "")
	if a.status != http.StatusNotFound || a.problemType(t) != admin.TypeNoStream {
		t.Errorf("deleting an unknown stream: %d %s", a.status, a.body)
	}
}

// Without a hook, an action is absent: 501 for an admin, and /me says it
// is not there.
func TestActionWithoutHook(t *testing.T) {
	s := openStore(t)
	h := admin.New(s, tokens(), admin.Options{})
	if m := decode[me](t, do(t, h, "GET", "/admin/api/me", adminToken, "")); m.Actions != (admin.Actions{}) {
		t.Errorf("no hooks, yet %+v", m)
	}
	for _, c := range []struct{ method, path, body string }{
		{"DELETE", "/admin/api/streams/s", ""},
		{"POST", "/admin/api/truncate", `{"stream":"s","before":2}`},
		{"POST", "/admin/api/forget", `{"subject":"user-1"}`},
	} {
		a := do(t, h, c.method, c.path, adminToken, c.body)
		if a.status != http.StatusNotImplemented || a.problemType(t) != admin.TypeNotAvailable {
			t.Errorf("%s %s without a hook: %d %s", c.method, c.path, a.status, a.body)
		}
	}
}

// WithStore finds the store's deletion through the metrics decorator,
// and the API deletes and truncates for real: a soft-deleted stream reads
// as gone (410), a truncated one starts at its cut.
func TestWithStoreDeletes(t *testing.T) {
	s := openStore(t)
	measured, err := metrics.InstrumentStore(s, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if o := (admin.Options{}).WithStore(readOnly{s}); o.Delete != nil || o.Truncate != nil {
		t.Fatal("a store that cannot delete got delete hooks")
	}
	for range 5 {
		appendTo(t, s, "x", jsonEvent("E", `{}`))
		appendTo(t, s, "y", jsonEvent("E", `{}`))
	}
	h := admin.New(measured, tokens(), admin.Options{}.WithStore(measured))
	if a := do(t, h, "POST", "/admin/api/truncate", adminToken, `{"stream":"y","before":4}`); a.status >= 300 {
		t.Fatalf("truncate: %d %s", a.status, a.body)
	}
	evs, err := s.ReadStream(context.Background(), "y", 0, 10)
	if err != nil || len(evs) != 2 || evs[0].Seq != 4 {
		t.Fatalf("after truncating before 4: %d events from %v, %v", len(evs), evs, err)
	}
	if a := do(t, h, "DELETE", "/admin/api/streams/x?mode=soft", adminToken, ""); a.status >= 300 {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	if _, err := s.ReadStream(context.Background(), "x", 0, 10); !errors.Is(err, eventstore.ErrStreamDeleted) {
		t.Fatalf("reading the deleted stream: %v", err)
	}
	if a := do(t, h, "GET", "/admin/api/streams/x", adminToken, ""); a.status != http.StatusGone || a.problemType(t) != admin.TypeDeleted {
		t.Fatalf("the deleted stream's page: %d %s", a.status, a.body)
	}
}

// readOnly hides the store's deletion.
type readOnly struct{ eventstore.Store }

// Every view that reports to the registry is listed with its position
// and lag; publishers' lag is the head's distance from their position.
func TestPositions(t *testing.T) {
	s := openStore(t)
	for i := range 5 {
		appendTo(t, s, fmt.Sprintf("s-%d", i), jsonEvent("E", `{}`))
	}
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, name := range []string{"orders", "customers"} {
		r := projection.NewRunner(s, projection.NewMemory(0, func(n *int, _ eventstore.Event) error { *n++; return nil }),
			projection.Options{Name: name, Registerer: reg})
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		if err := r.WaitFor(wctx, 5); err != nil {
			t.Fatal(err)
		}
		wcancel()
	}
	defer func() { cancel(); wg.Wait() }()
	errAt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := admin.New(s, tokens(), admin.Options{
		Positions: admin.ViewPositions(reg),
		Publishers: func(context.Context) []admin.PublisherState {
			return []admin.PublisherState{{Topic: "logbook", Running: true, Position: 3, Published: 3, LastError: "broker gone", LastErrorTime: &errAt}}
		},
	})
	p := decode[struct {
		Head  uint64           `json:"head"`
		Views []admin.Position `json:"views"`
		Pubs  []struct {
			Topic     string `json:"topic"`
			Lag       uint64 `json:"lag"`
			LastError string `json:"last_error"`
		} `json:"publishers"`
	}](t, do(t, h, "GET", "/admin/api/positions", viewerToken, ""))
	if p.Head != 5 || len(p.Views) != 2 || p.Views[0].Name != "customers" || p.Views[1].Name != "orders" ||
		p.Views[0].Position != 5 || p.Views[1].Position != 5 || p.Views[0].LagEvents != 0 {
		t.Fatalf("positions: %+v", p)
	}
	if len(p.Pubs) != 1 || p.Pubs[0].Lag != 2 || p.Pubs[0].LastError != "broker gone" {
		t.Fatalf("publishers: %+v", p.Pubs)
	}
	// A view behind: its lag is there.
	appendTo(t, s, "s-late", jsonEvent("E", `{}`))
	late := projection.NewRunner(s, stuckView{}, projection.Options{Name: "stuck", Registerer: reg})
	wg.Add(1)
	go func() { defer wg.Done(); _ = late.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ps, err := admin.ViewPositions(reg)(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, v := range ps {
			if v.Name == "stuck" && v.Position == 0 && v.LagEvents == 6 {
				found = true
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stuck view's lag is not reported: %+v", ps)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stuckView applies nothing: its Apply waits for the end.
type stuckView struct{}

func (stuckView) Checkpoint(context.Context) (uint64, error) { return 0, nil }

func (stuckView) Apply(ctx context.Context, _ []eventstore.Event) error {
	<-ctx.Done()
	return ctx.Err()
}
