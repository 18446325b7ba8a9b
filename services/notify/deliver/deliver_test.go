package deliver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/sink"
)

func messages(n int, c notify.Channel) []notify.Message {
	msgs := make([]notify.Message, n)
	for i := range msgs {
		msgs[i] = notify.Message{Key: notify.IdempotencyKey("r", int64(i), c), UserID: int64(i), Channel: c, To: []string{"x"}}
	}
	return msgs
}

// With the sink failing 30% of calls, every message arrives exactly
// once and the retries are counted.
func TestRetriesDeliverExactlyOnce(t *testing.T) {
	s, _ := sink.New(sink.Options{ErrorRate: 0.3, Seed: 7})
	srv := httptest.NewServer(s)
	defer srv.Close()
	d, err := New(Config{Endpoints: map[notify.Channel]string{notify.Push: srv.URL + sink.Path}, Attempts: 20, BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	msgs := messages(5000, notify.Push)
	var retries atomic.Int64
	var wg sync.WaitGroup
	for _, b := range notify.Batches(msgs, 100) {
		wg.Go(func() {
			r, err := d.Deliver(context.Background(), b)
			if err != nil {
				t.Error(err)
			}
			retries.Add(int64(r))
		})
	}
	wg.Wait()
	st := s.Stats()
	if st.UniqueKeys != 5000 || st.Duplicates != 0 || st.Messages != 5000 {
		t.Fatalf("sink stats %+v", st)
	}
	if retries.Load() == 0 || retries.Load() != st.FailedCalls {
		t.Fatalf("retries %d, the sink failed %d calls", retries.Load(), st.FailedCalls)
	}
}

func TestFailsForGood(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path == "/bad" {
			http.Error(w, "no such device", http.StatusBadRequest)
			return
		}
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	d, _ := New(Config{Endpoints: map[notify.Channel]string{notify.Push: srv.URL + "/down", notify.Email: srv.URL + "/bad"}, Attempts: 4, BaseBackoff: time.Millisecond})

	retries, err := d.Deliver(context.Background(), messages(3, notify.Push))
	var fe *FailedError
	if !errors.As(err, &fe) || fe.Attempts != 4 || retries != 3 || calls.Load() != 4 {
		t.Fatalf("temporary failure: retries %d, calls %d, err %v", retries, calls.Load(), err)
	}
	calls.Store(0)
	retries, err = d.Deliver(context.Background(), messages(3, notify.Email))
	if !errors.As(err, &fe) || fe.Attempts != 1 || retries != 0 || calls.Load() != 1 {
		t.Fatalf("permanent failure retried: retries %d, calls %d, err %v", retries, calls.Load(), err)
	}
}

func TestRateLimitPerChannel(t *testing.T) {
	s, _ := sink.New(sink.Options{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	url := srv.URL + sink.Path
	d, _ := New(Config{Endpoints: map[notify.Channel]string{notify.Push: url, notify.Email: url}, Rate: map[notify.Channel]float64{notify.Push: 50}})
	start := time.Now()
	for i := range 11 {
		if _, err := d.Deliver(context.Background(), []notify.Message{{Key: fmt.Sprint("p", i), Channel: notify.Push}}); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Fatalf("11 calls at 50/s took %v, under 200ms", el)
	}
	start = time.Now() // e-mail has no limit
	for i := range 11 {
		if _, err := d.Deliver(context.Background(), []notify.Message{{Key: fmt.Sprint("e", i), Channel: notify.Email}}); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("unlimited channel took %v", el)
	}
}

func TestBadBatches(t *testing.T) {
	d, _ := New(Config{Endpoints: map[notify.Channel]string{notify.Push: "http://127.0.0.1:1/"}})
	mixed := append(messages(1, notify.Push), messages(1, notify.Email)...)
	for name, b := range map[string][]notify.Message{
		"empty": nil, "over 500": messages(notify.MaxBatch+1, notify.Push), "mixed": mixed, "no endpoint": messages(1, notify.Email),
	} {
		if _, err := d.Deliver(context.Background(), b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(Config{}); err == nil {
		t.Error("no endpoints accepted")
	}
}

type users map[int64]*notify.User

func (m users) Users(_ context.Context, ids []int64) (map[int64]*notify.User, error) {
	out := map[int64]*notify.User{}
	for _, id := range ids {
		if u := m[id]; u != nil {
			out[id] = u
		}
	}
	return out, nil
}

// A request processed end to end over HTTP with the sink failing 5% of
// calls: every allowed (recipient, channel) reaches the sink exactly
// once.
func TestProcessOverHTTPExactlyOnce(t *testing.T) {
	s, _ := sink.New(sink.Options{ErrorRate: 0.05, Seed: 3})
	srv := httptest.NewServer(s)
	defer srv.Close()
	url := srv.URL + sink.Path
	d, _ := New(Config{Endpoints: map[notify.Channel]string{notify.Push: url, notify.Email: url}, Attempts: 30, BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	us := users{}
	var ids []int64
	allowed := 0
	for id := range int64(30_000) {
		ids = append(ids, id)
		u := &notify.User{ID: id, DeviceTokens: []string{"t"}, Email: "e@x", OptOut: id%7 == 0}
		us[id] = u
		if !u.OptOut {
			allowed += 2
		}
	}
	p := &notify.Processor{Templates: notify.Templates{"t": {"en": {Title: "hi {name}"}}}}
	r := &notify.Request{ID: "req", Type: "t", Sender: "s", Timestamp: time.Now(), ToUsers: ids}
	var retries atomic.Int64
	c, err := p.Process(context.Background(), r, us, func(ctx context.Context, b []notify.Message) error {
		n, err := d.Deliver(ctx, b)
		retries.Add(int64(n))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if c.Delivered != int64(allowed) || c.Failed != 0 || st.UniqueKeys != int64(allowed) || st.Duplicates != 0 || retries.Load() != st.FailedCalls || st.FailedCalls == 0 {
		t.Fatalf("counts %+v, sink %+v, retries %d, allowed %d", c, st, retries.Load(), allowed)
	}
}

// A redirect is not followed: Go would re-send a POST answered 301 or
// 302 as a GET without its body, and the 200 of that GET would count
// the batch delivered. A 3xx fails the batch for good at once, with a
// reason that says so and names no secret of the target.
func TestRedirectIsAPermanentFailure(t *testing.T) {
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		var posts, others atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/old" {
				http.Redirect(w, r, "/new?token=s3cret", code)
				return
			}
			if r.Method == http.MethodPost {
				posts.Add(1)
			} else {
				others.Add(1)
			}
		}))
		d, err := New(Config{Endpoints: map[notify.Channel]string{notify.Push: srv.URL + "/old"}, Attempts: 3, BaseBackoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		retries, err := d.Deliver(context.Background(), messages(2, notify.Push))
		srv.Close()
		var fe *FailedError
		if !errors.As(err, &fe) || fe.Attempts != 1 || retries != 0 {
			t.Fatalf("%d: err %v, retries %d: want a permanent failure after one call", code, err, retries)
		}
		if !strings.Contains(fe.Reason, "redirect") || strings.Contains(fe.Reason, "s3cret") {
			t.Errorf("%d: reason %q: want it to say redirect, without the query's secret", code, fe.Reason)
		}
		if posts.Load()+others.Load() != 0 {
			t.Errorf("%d: the redirect was followed (%d POSTs, %d other calls)", code, posts.Load(), others.Load())
		}
	}
}

// A caller's own client is used without following redirects either.
func TestRedirectNotFollowedWithOwnClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusFound)
		}
	}))
	defer srv.Close()
	client := &http.Client{Timeout: time.Second}
	d, err := New(Config{Endpoints: map[notify.Channel]string{notify.Push: srv.URL + "/old"}, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Deliver(context.Background(), messages(1, notify.Push)); err == nil {
		t.Fatal("a redirect counted as delivered")
	}
	if client.CheckRedirect != nil {
		t.Error("the caller's client was changed")
	}
}

// Endpoints must be absolute http or https URLs with a host; the error
// hides the URL's secrets.
func TestEndpointsAreChecked(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8084/deliver", "/deliver", "ftp://h/x", "http://", "http:///x", "http://u:pw@%zz/?token=s3cret", "mailto:a@b"} {
		_, err := New(Config{Endpoints: map[notify.Channel]string{notify.Push: u}})
		if err == nil {
			t.Errorf("endpoint %q accepted", u)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), ":pw@") {
			t.Errorf("endpoint %q: error %q shows a secret", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:8084/deliver", "https://push.example.org/v1?key=x"} {
		if _, err := New(Config{Endpoints: map[notify.Channel]string{notify.Push: u}}); err != nil {
			t.Errorf("endpoint %q: %v", u, err)
		}
	}
}

// A failure's reason names the endpoint without its user info or query.
func TestReasonsAreRedacted(t *testing.T) {
	d, err := New(Config{Endpoints: map[notify.Channel]string{notify.Push: "http://user:pw@127.0.0.1:1/deliver?token=s3cret"}, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Deliver(context.Background(), messages(1, notify.Push))
	var fe *FailedError
	if !errors.As(err, &fe) {
		t.Fatalf("err %v", err)
	}
	if strings.Contains(fe.Reason, "s3cret") || strings.Contains(fe.Reason, "pw") || !strings.Contains(fe.Reason, "127.0.0.1:1") {
		t.Fatalf("reason %q: want the host without user info or query", fe.Reason)
	}
	for in, want := range map[string]string{
		"http://u:pw@h:1/p?token=x&a=b#f": "http://***@h:1/p?a=***&token=***",
		"https://h/p":                     "https://h/p",
		"not a url %zz":                   "***",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedactReason(t *testing.T) {
	in := `Post "https://u:pw@push.example.org/v1?key=s3cret": EOF; see http://h/x?a=1 too`
	want := `Post "https://***@push.example.org/v1?key=***": EOF; see http://h/x?a=*** too`
	if got := RedactReason(in); got != want {
		t.Fatalf("RedactReason:\n got %s\nwant %s", got, want)
	}
}
