package notifymonolith

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/deliver"
	"github.com/logbook/logbook/services/notify/sink"
	"github.com/logbook/logbook/services/notify/userscdc"
)

const typ = "like_update"

type env struct {
	m    *Monolith
	src  *userscdc.Source
	sink *sink.Sink
}

// newEnv makes the users' tables in a fresh schema with users generated
// users, a sink failing errorRate of its calls, and a monolith on both.
func newEnv(t *testing.T, users int, errorRate float64) *env {
	t.Helper()
	ctx := context.Background()
	url, schema := testenv.URL(t), testenv.Schema(t)
	src, err := userscdc.OpenSource(ctx, url, schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	if err := src.Generate(ctx, userscdc.Population{Users: users, Type: typ, Refuse: 0.1, OptOut: 0.05, NoEmail: 0.2, NoPush: 0.3, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	s, err := sink.New(sink.Options{ErrorRate: errorRate, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	d, err := deliver.New(deliver.Config{
		Endpoints:   map[notify.Channel]string{notify.Push: srv.URL + sink.Path, notify.Email: srv.URL + sink.Path},
		BaseBackoff: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	m := &Monolith{Pool: src.Pool, Schema: schema, Deliverer: d,
		Templates: notify.Templates{typ: {"en": {Title: "Hi {name}", Body: "news in club {club}"}}}}
	return &env{m: m, src: src, sink: s}
}

// expected is the set of keys request id should deliver to ids, worked
// out from the source tables by hand, not by notify.Policy.
func (e *env) expected(t *testing.T, id string, ids []int64) map[string]bool {
	t.Helper()
	all, err := e.src.Users(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, uid := range ids {
		u := all[uid]
		if u == nil || u.OptOut {
			continue
		}
		if len(u.DeviceTokens) > 0 && !u.Disabled[notify.Setting{Type: typ, Channel: notify.Push}] {
			want[notify.IdempotencyKey(id, uid, notify.Push)] = true
		}
		if u.Email != "" && !u.Disabled[notify.Setting{Type: typ, Channel: notify.Email}] {
			want[notify.IdempotencyKey(id, uid, notify.Email)] = true
		}
	}
	return want
}

func request(id string, ids []int64) *notify.Request {
	return &notify.Request{ID: id, Type: typ, ClubID: 4, Sender: "coach", Timestamp: time.Now(), ToUsers: ids}
}

func span(from, to int64) []int64 {
	var ids []int64
	for id := from; id <= to; id++ {
		ids = append(ids, id)
	}
	return ids
}

func TestSendDeliversWhatPreferencesAllowOnce(t *testing.T) {
	e := newEnv(t, 2000, 0.2)
	ids := append(span(1, 2000), 5, 7, 999_999) // two listed twice, one unknown
	res, err := e.m.Send(context.Background(), request("r1", ids))
	if err != nil {
		t.Fatal(err)
	}
	want := e.expected(t, "r1", ids)
	st := e.sink.Stats()
	if st.UniqueKeys != int64(len(want)) || st.Duplicates != 0 || res.Delivered != int64(len(want)) || res.Built != res.Delivered || res.Failed != 0 {
		t.Fatalf("result %+v, sink %+v, want %d deliveries", res, st, len(want))
	}
	for k := range want {
		if e.sink.Count(k) != 1 {
			t.Fatalf("key %s received %d times", k, e.sink.Count(k))
		}
	}
	var refused int64
	for _, n := range res.Refused {
		refused += n
	}
	if res.Refused[notify.RefusedDuplicate] != 2 || res.Refused[notify.RefusedUnknownUser] != 1 || res.Refused[notify.RefusedSettings] == 0 || res.Refused[notify.RefusedOptOut] == 0 {
		t.Fatalf("refused %v", res.Refused)
	}
	if built := res.Requested - refused; built <= 0 || built > res.Built {
		t.Fatalf("%d recipients built into %d messages", built, res.Built)
	}
	if st.FailedCalls == 0 || res.Retries != st.FailedCalls {
		t.Fatalf("%d retries for %d injected failures", res.Retries, st.FailedCalls)
	}
}

// The study's monolith failed at 100,000 recipients; ours fails from
// 65,536, the most bind parameters a statement can carry, on the
// driver's own error.
func TestOneQueryFailsBeyondTheParameterLimit(t *testing.T) {
	e := newEnv(t, 300, 0)
	ctx := context.Background()
	// 65,535 recipients: one parameter each, the most there can be. All but
	// 300 are unknown users, refused and counted.
	res, err := e.m.Send(ctx, request("at-limit", span(1, 65_535)))
	if err != nil {
		t.Fatalf("65,535 recipients: %v", err)
	}
	if res.Refused[notify.RefusedUnknownUser] != 65_535-300 || res.Delivered != int64(len(e.expected(t, "at-limit", span(1, 300)))) {
		t.Fatalf("65,535 recipients: %+v", res)
	}
	before := e.sink.Stats()

	srv := httptest.NewServer(e.m.Handler())
	defer srv.Close()
	body, _ := json.Marshal(SendBody{Type: typ, ClubID: 4, Sender: "coach", Timestamp: time.Now(), ToUsers: span(1, 100_000)})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+Path, bytes.NewReader(body))
	req.Header.Set("Idempotency-Key", "beyond")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p struct{ Detail string }
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(p.Detail, "limited to 65535 parameters") {
		t.Fatalf("100,000 recipients: %d %q", resp.StatusCode, p.Detail)
	}
	if _, err := e.m.Send(ctx, request("one-over", span(1, 65_536))); err == nil || !strings.Contains(err.Error(), "65535") {
		t.Fatalf("65,536 recipients: %v", err)
	}
	if after := e.sink.Stats(); after.Calls != before.Calls {
		t.Fatalf("a failed request delivered: %+v, before %+v", after, before)
	}
}

func TestHandlerAnswersWithTheCounts(t *testing.T) {
	e := newEnv(t, 50, 0)
	srv := httptest.NewServer(e.m.Handler())
	defer srv.Close()
	post := func(key string, body any) *http.Response {
		data, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+Path, bytes.NewReader(data))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post("h1", SendBody{Type: typ, ClubID: 1, Sender: "s", Timestamp: time.Now(), ToUsers: span(1, 50)})
	var a Answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if a.ID != "h1" || a.Recipients != 50 || a.Delivered != int64(len(e.expected(t, "h1", span(1, 50)))) || a.Delivered != e.sink.Stats().UniqueKeys {
		t.Fatalf("answer %+v, sink %+v", a, e.sink.Stats())
	}
	for _, c := range []struct {
		key  string
		body any
	}{
		{"", SendBody{Type: typ, Sender: "s", Timestamp: time.Now(), ToUsers: []int64{1}}},
		{"h2", SendBody{Type: typ, Sender: "s", Timestamp: time.Now()}},
		{"h3", map[string]any{"type": typ, "unknown": 1}},
	} {
		resp := post(c.key, c.body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%v: status %d", c, resp.StatusCode)
		}
	}
}
