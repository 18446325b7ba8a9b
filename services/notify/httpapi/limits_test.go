package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
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

// A send at every limit at once — the most recipients a request may
// have (a million, logbook notify serve's default), each id the longest
// an int64 has, a body near MaxBody — is answered within 30 seconds,
// allocating at most 256 MiB, about 13 times its body. It is refused
// with a clear 413: its event is beyond the store's largest append (16
// MiB), which MaxBody's 24 MiB does not take into account. A million
// recipients with ids of 10 digits is accepted.
func TestSendAtEveryLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("a 20 MB send")
	}
	const recipients = 1_000_000
	sk, err := sink.New(sink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ss := httptest.NewServer(sk)
	defer ss.Close()
	d, err := deliver.New(deliver.Config{Endpoints: map[notify.Channel]string{notify.Push: ss.URL + sink.Path, notify.Email: ss.URL + sink.Path}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := pebblestore.Open(dir+"/store", pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc, err := pipeline.New(context.Background(), st, pipeline.Config{Users: users{}, Deliverer: d, StateDir: dir + "/state", MaxRecipients: recipients})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	tokens := auth.NewTokens(Roles())
	_ = tokens.Add(senderToken, Sender)
	h := New(svc, tokens)

	for _, c := range []struct {
		first int64
		want  int
	}{{9_000_000_000_000_000_000, http.StatusRequestEntityTooLarge}, {1_000_000_000, http.StatusAccepted}} {
		body := make([]byte, 0, MaxBody)
		body = append(body, `{"type":"like_update","club_id":1,"sender":"s","to_users":[`...)
		for i := range recipients {
			if i > 0 {
				body = append(body, ',')
			}
			body = strconv.AppendInt(body, c.first+int64(i), 10)
		}
		body = append(body, "]}"...)
		if len(body) > MaxBody {
			t.Fatalf("the body is %d bytes, over MaxBody", len(body))
		}
		req := httpfuzz.Request{Method: "POST", Target: "/api/notifications", Header: http.Header{}, Body: body}
		req.Header.Set("Authorization", "Bearer "+senderToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "send-"+strconv.FormatInt(c.first, 10))
		httpfuzz.Bounded(t, "a send of a million recipients, "+strconv.Itoa(len(body))+" bytes", 30*time.Second, 256<<20, func() {
			rec := httpfuzz.Do(t, h, req, 30*time.Second, nil)
			if rec.Code != c.want {
				t.Errorf("%d %.300s, want %d", rec.Code, rec.Body, c.want)
			}
		})
	}
}
