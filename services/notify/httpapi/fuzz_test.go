package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/internal/httpfuzz"
	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/deliver"
	"github.com/logbook/logbook/services/notify/pipeline"
	"github.com/logbook/logbook/services/notify/sink"
)

// fuzzAPI is the notify API over a real pipeline on a fresh embedded
// store, delivering to a sink, its users those of users{}.
func fuzzAPI(tb testing.TB) http.Handler {
	sk, err := sink.New(sink.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	ss := httptest.NewServer(sk)
	tb.Cleanup(ss.Close)
	d, err := deliver.New(deliver.Config{Endpoints: map[notify.Channel]string{notify.Push: ss.URL + sink.Path, notify.Email: ss.URL + sink.Path}})
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	st, err := pebblestore.Open(dir+"/store", pebblestore.Options{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	svc, err := pipeline.New(context.Background(), st, pipeline.Config{Users: users{}, Deliverer: d, StateDir: dir + "/state", MaxRecipients: 1000})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = svc.Close() })
	tokens := auth.NewTokens(Roles())
	_ = tokens.Add(senderToken, Sender)
	_ = tokens.Add(viewerToken, auth.Viewer)
	return New(svc, tokens)
}

// FuzzSend posts arbitrary send requests — body, content type and
// Idempotency-Key — to the notify API as a sender, and sometimes a
// replay or a read. Whatever the request: no panic, no 5xx (but the 503
// of a send that found every turn taken), every error a problem+json
// document with its status, an answer within a second.
func FuzzSend(f *testing.F) {
	h := fuzzAPI(f)
	for _, s := range []struct{ key, ct, body string }{
		{"k1", "application/json", `{"type":"like_update","club_id":1,"sender":"s","to_users":[1,2,2,3]}`},
		{"k2", "application/json", `{"type":"like_update","club_id":1,"sender":"s","to_club":true}`},
		{"k3", "application/json", `{"type":"like_update","club_id":1,"sender":"s","to_users":[1],"timestamp":"2026-01-02T03:04:05Z"}`},
		{"k4", "application/json", `{"type":"like_update","club_id":1,"sender":"s","to_users":[1],"timestamp":"9999-12-31T23:59:59Z"}`},
		{"k5", "application/json", `{"type":"nope","club_id":-1,"to_users":[-1,0,9223372036854775807]}`},
		{"k6", "application/json", `{"type":"like_update","club_id":2,"to_club":true,"to_users":[1]}`},
		{"k7", "application/json", `{"type":"like_update","club_id":1,"sender":"s","to_users":[]}`},
		{"", "application/json", `{}`},
		{"k8", "text/plain", `{"type":"like_update"}`},
		{"k9", "application/json", `{"type":"like_update"} trailing`},
		{"k10", "application/json", `{"type":1e400}`},
		{"k11", "application/json", `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`},
		{"k12", "application/json", `{"unknown":true}`},
		{"k1", "application/json", `{"type":"like_update","club_id":1,"sender":"t","to_users":[4]}`},
	} {
		f.Add(s.key, s.ct, []byte(s.body), uint8(0))
	}
	f.Add("r1", "application/json", []byte(`{"request":"x"}`), uint8(1))
	f.Add("", "", []byte(nil), uint8(2))
	f.Add("", "", []byte(nil), uint8(3))
	f.Fuzz(func(t *testing.T, key, ct string, body []byte, route uint8) {
		req := httpfuzz.Request{Method: "POST", Target: "/api/notifications", Header: http.Header{}, Body: body}
		token := senderToken
		switch route % 4 {
		case 1:
			req.Target = "/api/dead-letters/replay"
		case 2:
			req.Method, req.Target, token = "GET", "/api/notifications?limit="+key, viewerToken
		case 3:
			req.Method, req.Target, token = "GET", "/api/dead-letters?request="+key+"&after="+key+"&limit="+ct, viewerToken
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", ct)
		httpfuzz.Do(t, h, req, time.Second, func(status int) bool { return status == http.StatusServiceUnavailable })
	})
}
