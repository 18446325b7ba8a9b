package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/deliver"
	"github.com/logbook/logbook/services/notify/pipeline"
	"github.com/logbook/logbook/services/notify/sink"
	"github.com/logbook/logbook/services/notify/userscdc"
)

// users: ids 1..100 in club 1, each with a device and an address.
type users struct{}

func (users) Users(_ context.Context, ids []int64) (map[int64]*notify.User, error) {
	out := map[int64]*notify.User{}
	for _, id := range ids {
		if id >= 1 && id <= 100 {
			out[id] = &notify.User{ID: id, Name: "n", Language: "en", Email: "e@x", DeviceTokens: []string{"t"}}
		}
	}
	return out, nil
}

func (users) Members(_ context.Context, club int64, _ int) ([]int64, error) {
	if club != 1 {
		return nil, nil
	}
	var out []int64
	for id := int64(1); id <= 100; id++ {
		out = append(out, id)
	}
	return out, nil
}

func (users) Clubs(context.Context) ([]userscdc.Club, error) {
	return []userscdc.Club{{ID: 1, Members: 100}}, nil
}

const (
	senderToken = "sender-token-1"
	viewerToken = "viewer-token-1"
)

type server struct {
	t    *testing.T
	url  string
	sink *sink.Sink
}

func newServer(t *testing.T) *server {
	t.Helper()
	sk, err := sink.New(sink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ss := httptest.NewServer(sk)
	t.Cleanup(ss.Close)
	d, err := deliver.New(deliver.Config{Endpoints: map[notify.Channel]string{notify.Push: ss.URL + sink.Path, notify.Email: ss.URL + sink.Path}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := pebblestore.Open(dir+"/store", pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	svc, err := pipeline.New(context.Background(), st, pipeline.Config{Users: users{}, Deliverer: d, StateDir: dir + "/state", MaxRecipients: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	tokens := auth.NewTokens(Roles())
	if err := tokens.Add(senderToken, Sender); err != nil {
		t.Fatal(err)
	}
	if err := tokens.Add(viewerToken, auth.Viewer); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(svc, tokens))
	t.Cleanup(srv.Close)
	return &server{t: t, url: srv.URL, sink: sk}
}

// do makes a request and checks a JSON answer against the OpenAPI
// document; errors must be problem+json.
func (s *server) do(method, path, token, key string, body []byte) (int, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	ct := res.Header.Get("Content-Type")
	if res.StatusCode >= 400 {
		var p struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
			Detail string `json:"detail"`
		}
		if ct != "application/problem+json" || json.Unmarshal(raw, &p) != nil || p.Status != res.StatusCode || p.Detail == "" {
			s.t.Errorf("%s %s: %d answered %q: %s, want problem+json", method, path, res.StatusCode, ct, raw)
		}
	}
	answers.Check(s.t, method, path, res.StatusCode, ct, raw)
	return res.StatusCode, raw
}

func TestAPIErrors(t *testing.T) {
	s := newServer(t)
	send := `{"type":"like_update","club_id":1,"sender":"s","to_users":[1,2,3]}`
	big := append(append([]byte(`{"type":"like_update","sender":"s","to_users":[`), bytes.Repeat([]byte("1,"), MaxBody/2)...), []byte("1]}")...)
	for _, c := range []struct {
		name, method, path, token, key, body string
		raw                                  []byte
		status                               int
		typ                                  string
	}{
		{name: "no token", method: "POST", path: "/api/notifications", key: "k", body: send, status: 401},
		{name: "bad token", method: "GET", path: "/api/notifications", token: "nobody-at-all", status: 401},
		{name: "viewer sends", method: "POST", path: "/api/notifications", token: viewerToken, key: "k", body: send, status: 403},
		{name: "viewer replays", method: "POST", path: "/api/dead-letters/replay", token: viewerToken, body: `{"request":"x"}`, status: 403},
		{name: "no key", method: "POST", path: "/api/notifications", token: senderToken, body: send, status: 400},
		{name: "long key", method: "POST", path: "/api/notifications", token: senderToken, key: strings.Repeat("k", 129), body: send, status: 400},
		{name: "bad json", method: "POST", path: "/api/notifications", token: senderToken, key: "k", body: `{"type":`, status: 400},
		{name: "unknown field", method: "POST", path: "/api/notifications", token: senderToken, key: "k", body: `{"type":"like_update","sender":"s","to_users":[1],"to":[2]}`, status: 400},
		{name: "timestamp far ahead", method: "POST", path: "/api/notifications", token: senderToken, key: "k", body: `{"type":"like_update","sender":"s","timestamp":"2200-01-01T00:00:00Z","to_users":[1]}`, status: 400, typ: httpkit.TypeInvalidRequest},
		{name: "timestamp long ago", method: "POST", path: "/api/notifications", token: senderToken, key: "k", body: `{"type":"like_update","sender":"s","timestamp":"1601-01-01T00:00:00Z","to_users":[1]}`, status: 400, typ: httpkit.TypeInvalidRequest},
		{name: "no recipients", method: "POST", path: "/api/notifications", token: senderToken, key: "k", body: `{"type":"like_update","sender":"s"}`, status: 400},
		{name: "body too large", method: "POST", path: "/api/notifications", token: senderToken, key: "k", raw: big, status: 413},
		{name: "too many recipients", method: "POST", path: "/api/notifications", token: senderToken, key: "k", body: `{"type":"like_update","sender":"s","to_users":[` + strings.Repeat("1,", 1000) + `1]}`, status: 422, typ: TypeUnacceptable},
		{name: "unknown type", method: "POST", path: "/api/notifications", token: senderToken, key: "k", body: `{"type":"nope","sender":"s","to_users":[1]}`, status: 422, typ: TypeUnacceptable},
		{name: "empty club", method: "POST", path: "/api/notifications", token: senderToken, key: "k", body: `{"type":"like_update","sender":"s","club_id":2,"to_club":true}`, status: 422},
		{name: "unknown request", method: "GET", path: "/api/notifications/nope", token: viewerToken, status: 404},
		{name: "bad limit", method: "GET", path: "/api/notifications?limit=0", token: viewerToken, status: 400},
		{name: "unknown parameter", method: "GET", path: "/api/dead-letters?reqest=x", token: viewerToken, status: 400},
		{name: "unknown after", method: "GET", path: "/api/dead-letters?after=x", token: viewerToken, status: 404},
		{name: "replay nothing", method: "POST", path: "/api/dead-letters/replay", token: senderToken, body: `{}`, status: 400},
		{name: "replay too many", method: "POST", path: "/api/dead-letters/replay", token: senderToken, body: `{"ids":["a"` + strings.Repeat(`,"a"`, pipeline.MaxReplay) + `]}`, status: 413},
		{name: "no route", method: "GET", path: "/api/notifications/a/b", token: viewerToken, status: 404},
	} {
		body := c.raw
		if body == nil && c.body != "" {
			body = []byte(c.body)
		}
		status, raw := s.do(c.method, c.path, c.token, c.key, body)
		if status != c.status || c.typ != "" && !bytes.Contains(raw, []byte(c.typ)) {
			t.Errorf("%s: %d %s, want %d %s", c.name, status, raw, c.status, c.typ)
		}
	}
}

// A send over HTTP: 202 with the id, the same again answers the same,
// another body under the key is 422; the request's state then shows it
// done, and the list, the clubs, the types and the metrics answer.
func TestAPISend(t *testing.T) {
	s := newServer(t)
	body := []byte(`{"type":"like_update","club_id":1,"sender":"s","timestamp":"` + time.Now().UTC().Add(-time.Hour).Format(time.RFC3339) + `","to_users":[1,2,3,3,999]}`)
	status, raw := s.do("POST", "/api/notifications", senderToken, "key-1", body)
	var acc pipeline.Accepted
	if status != 202 || json.Unmarshal(raw, &acc) != nil || acc.Recipients != 4 || acc.Duplicates != 1 {
		t.Fatalf("send: %d %s", status, raw)
	}
	status, raw2 := s.do("POST", "/api/notifications", senderToken, "key-1", body)
	if status != 202 || !bytes.Equal(raw, raw2) {
		t.Fatalf("send again: %d %s, first %s", status, raw2, raw)
	}
	status, raw = s.do("POST", "/api/notifications", senderToken, "key-1", bytes.Replace(body, []byte("999"), []byte("998"), 1))
	if status != 422 || !bytes.Contains(raw, []byte("idempotency-key-reused")) {
		t.Fatalf("another body: %d %s", status, raw)
	}
	var st pipeline.Status
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		status, raw = s.do("GET", "/api/notifications/"+acc.ID+"?min_position="+strconv.FormatUint(acc.Position, 10), viewerToken, "", nil)
		if status != 200 || json.Unmarshal(raw, &st) != nil {
			t.Fatalf("get: %d %s", status, raw)
		}
		if st.State == "done" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not done: %s", raw)
		}
	}
	if st.Counts.Requested != 5 || st.Counts.Delivered != 6 || st.Counts.RefusedBy["duplicate"] != 1 || st.Counts.RefusedBy["unknown_user"] != 1 {
		t.Fatalf("status %s", raw)
	}
	if got := s.sink.Stats(); got.UniqueKeys != 6 || got.Duplicates != 0 {
		t.Fatalf("sink %+v", got)
	}
	for _, p := range []string{"/api/notifications?limit=5", "/api/clubs", "/api/notification-types", "/api/dead-letters?request=" + acc.ID} {
		if status, raw := s.do("GET", p, viewerToken, "", nil); status != 200 {
			t.Errorf("%s: %d %s", p, status, raw)
		}
	}
	if status, raw := s.do("GET", "/api/openapi.json", "", "", nil); status != 200 || !json.Valid(raw) {
		t.Errorf("openapi.json: %d", status)
	}
}

// Sends beyond MaxSending wait for a turn, then are answered 503 with
// Retry-After.
func TestAPISendsAreBounded(t *testing.T) {
	a := &API{reading: make(chan struct{}, 1), sending: make(chan struct{}, 1), wait: 10 * time.Millisecond}
	a.sending <- struct{}{} // every turn taken
	req := httptest.NewRequest("POST", "/api/notifications", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", "k")
	rec := httptest.NewRecorder()
	err := a.send(rec, req)
	if e, ok := errors.AsType[*httpkit.Error](err); !ok || e.Status != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("a send with no turn free: %v", err)
	}
	<-a.sending
	req = httptest.NewRequest("POST", "/api/notifications", strings.NewReader(`{"type":`))
	req.Header.Set("Idempotency-Key", "k")
	if err := a.send(httptest.NewRecorder(), req); err == nil {
		t.Fatal("a bad body was accepted")
	}
	if len(a.sending) != 0 {
		t.Fatal("a finished send kept its turn")
	}
}

// stall opens a connection that sends a send's headers and the first
// n bytes of a body of length total, then nothing more.
func stall(t *testing.T, url string, n, total int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	body := []byte(`{"type":"like_update","sender":"s","to_users":[1`)
	for len(body) < n {
		body = append(body, ",1"...)
	}
	fmt.Fprintf(c, "POST /api/notifications HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nIdempotency-Key: slow\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", senderToken, total)
	if _, err := c.Write(body[:n]); err != nil {
		t.Fatal(err)
	}
	return c
}

// Uploads that are slow to arrive — small ones, and large ones past
// their first part — hold no turn of the sends decoded at once: with
// MaxSending of each stalled, a normal send is accepted at once.
func TestSlowUploadsDoNotBlockSends(t *testing.T) {
	s := newServer(t)
	for range MaxSending {
		stall(t, s.url, 100, 1000)
		stall(t, s.url, 200<<10, 2<<20)
	}
	time.Sleep(200 * time.Millisecond) // they are all being read
	start := time.Now()
	status, raw := s.do("POST", "/api/notifications", senderToken, "normal", []byte(`{"type":"like_update","sender":"s","to_users":[1,2]}`))
	if status != http.StatusAccepted || time.Since(start) > 2*time.Second {
		t.Fatalf("a send beside %d stalled uploads: %d after %v: %s", 2*MaxSending, status, time.Since(start), raw)
	}
}

// A large body that stops arriving is cut off after bodyReadTime: 408,
// and its reading turn is free again.
func TestSlowLargeUploadTimesOut(t *testing.T) {
	defer func(d time.Duration) { bodyReadTime = d }(bodyReadTime)
	bodyReadTime = 300 * time.Millisecond
	s := newServer(t)
	var conns []net.Conn
	for range MaxSending + 1 {
		conns = append(conns, stall(t, s.url, 200<<10, 2<<20))
	}
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		// The ninth waits for a reading turn and gets one once the first
		// eight are cut off.
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 408") {
			t.Fatalf("stalled large upload %d: %q, %v; want 408", i, line, err)
		}
	}
}
