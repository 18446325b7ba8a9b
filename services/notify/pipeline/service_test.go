package pipeline

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/services/notify"
)

// A request of 2,500 recipients (three chunks) is delivered to each on
// both channels exactly once, its counts add up, and the metrics equal a
// recount of the outcomes on the log.
func TestSendDeliversEveryRecipientOnce(t *testing.T) {
	h := newHarness(t, population(3000), nil)
	svc := h.start()
	ts := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	acc, err := svc.Send(context.Background(), "k1", SendInput{Type: "like_update", ClubID: 7, Sender: "coach", Timestamp: &ts, ToUsers: ids(1, 2500)})
	if err != nil {
		t.Fatal(err)
	}
	if acc.Recipients != 2500 || acc.ID != RequestID("coach", "k1") || acc.Position == 0 {
		t.Fatalf("accepted %+v", acc)
	}
	st := h.waitDone(acc.ID)
	want := Counts{Requested: 2500, Built: 5000, Delivered: 5000}
	if len(st.Counts.RefusedBy) != 0 {
		t.Errorf("refused %v", st.Counts.RefusedBy)
	}
	st.Counts.RefusedBy = nil
	if !reflect.DeepEqual(st.Counts, want) || st.Chunks != 3 || st.ChunksDone != 3 {
		t.Fatalf("status %+v, want counts %+v", st, want)
	}
	for _, c := range notify.Channels {
		s := h.sinks[c].Stats()
		if s.UniqueKeys != 2500 || s.Duplicates != 0 {
			t.Errorf("%s sink: %+v", c, s)
		}
		for _, id := range []int64{1, 1234, 2500} {
			if n := h.sinks[c].Count(notify.IdempotencyKey(acc.ID, id, c)); n != 1 {
				t.Errorf("%s key of user %d taken %d times", c, id, n)
			}
		}
	}
	h.checkMetrics()
}

// Same key and body: the same answer and no second delivery; same key,
// another body: refused. Another sender's same key is another request.
func TestSendIsIdempotent(t *testing.T) {
	h := newHarness(t, population(100), nil)
	svc := h.start()
	ctx := context.Background()
	in := SendInput{Type: "like_update", ClubID: 1, Sender: "s", ToUsers: ids(1, 50)}
	a1, err := svc.Send(ctx, "key", in)
	if err != nil {
		t.Fatal(err)
	}
	h.waitDone(a1.ID)
	a2, err := svc.Send(ctx, "key", in)
	if err != nil {
		t.Fatal(err)
	}
	if a2.ID != a1.ID || a2.Position != a1.Position || a2.Recipients != 50 || !a2.Duplicate {
		t.Fatalf("retry answered %+v, first %+v", a2, a1)
	}
	other := in
	other.ToUsers = ids(1, 51)
	if _, err := svc.Send(ctx, "key", other); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("another body under the key: %v", err)
	}
	// The timestamp left out is "now" at the first send: a retry
	// without it is the same request.
	if _, err := svc.Send(ctx, "key", in); err != nil {
		t.Fatal(err)
	}
	in.Sender = "t"
	a3, err := svc.Send(ctx, "key", in)
	if err != nil || a3.ID == a1.ID {
		t.Fatalf("another sender: %+v, %v", a3, err)
	}
	h.waitDone(a3.ID)
	if err := svc.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if s := h.sinks[notify.Push].Stats(); s.UniqueKeys != 100 || s.Duplicates != 0 {
		t.Fatalf("push sink %+v: want 50 keys of each request, none twice", s)
	}
	if l := svc.List(10); len(l) != 2 || l[0].ID != a3.ID || l[1].ID != a1.ID {
		t.Fatalf("list %+v", l)
	}
}

// A send's timestamp is the event time of its metrics: one far ahead
// (a wrong clock, or milliseconds read as seconds) would close every
// metrics window before the real outcomes arrive, so only timestamps
// within [now - MaxAge, now + MaxSkew] are accepted; a retry of an
// accepted send is still recognized after the window has moved.
func TestSendRefusesTimestampsOutsideTheWindow(t *testing.T) {
	h := newHarness(t, population(10), nil)
	h.cfg.MaxAge, h.cfg.MaxSkew = time.Hour, time.Minute
	svc := h.start()
	ctx := context.Background()
	now := time.Now()
	for _, ts := range []time.Time{
		now.Add(2 * time.Minute),
		now.Add(-2 * time.Hour),
		time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC),
		time.UnixMilli(now.UnixMilli() * 1000),      // milliseconds read as seconds
		time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), // beyond Unix nanoseconds
		time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		_, err := svc.Send(ctx, "k", SendInput{Type: "like_update", Sender: "s", ToUsers: []int64{1}, Timestamp: &ts})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "timestamp") {
			t.Errorf("timestamp %s: %v, want ErrInvalid about the timestamp", ts, err)
		}
	}
	if head, err := h.store.Head(ctx); head != 0 || err != nil {
		t.Fatalf("log head %d (%v) after refused requests, want nothing appended", head, err)
	}
	for _, ts := range []time.Time{now.Add(30 * time.Second), now.Add(-50 * time.Minute)} {
		in := SendInput{Type: "like_update", Sender: "s", ToUsers: []int64{1}, Timestamp: &ts}
		acc, err := svc.Send(ctx, ts.String(), in)
		if err != nil {
			t.Fatalf("timestamp %s: %v", ts, err)
		}
		// The same send again, once the timestamp has left the window:
		// the first answer, not a refusal.
		svc.cfg.MaxAge, svc.cfg.MaxSkew = time.Nanosecond, time.Nanosecond
		again, err := svc.Send(ctx, ts.String(), in)
		svc.cfg.MaxAge, svc.cfg.MaxSkew = time.Hour, time.Minute
		if err != nil || again.ID != acc.ID {
			t.Fatalf("retry of %s: %+v, %v; want %+v", ts, again, err, acc)
		}
	}
}

// Bad requests are refused before anything is appended.
func TestSendRefusesBadRequests(t *testing.T) {
	h := newHarness(t, population(10), nil)
	h.cfg.MaxRecipients = 5
	svc := h.start()
	ctx := context.Background()
	zero := time.Time{}
	for _, c := range []struct {
		key  string
		in   SendInput
		want error
	}{
		{"", SendInput{Type: "like_update", Sender: "s", ToUsers: []int64{1}}, ErrInvalid},
		{string(make([]byte, 129)), SendInput{Type: "like_update", Sender: "s", ToUsers: []int64{1}}, ErrInvalid},
		{"k", SendInput{Sender: "s", ToUsers: []int64{1}}, ErrInvalid},
		{"k", SendInput{Type: "like_update", ToUsers: []int64{1}}, ErrInvalid},
		{"k", SendInput{Type: "like_update", Sender: "s"}, ErrInvalid},
		{"k", SendInput{Type: "like_update", Sender: "s", ToUsers: []int64{1}, ToClub: true}, ErrInvalid},
		{"k", SendInput{Type: "like_update", Sender: "s", ToUsers: []int64{1}, Timestamp: &zero}, ErrInvalid},
		{"k", SendInput{Type: "no_such_type", Sender: "s", ToUsers: []int64{1}}, ErrUnacceptable},
		{"k", SendInput{Type: "like_update", Sender: "s", ToUsers: ids(1, 6)}, ErrUnacceptable},
		{"k", SendInput{Type: "like_update", Sender: "s", ClubID: 99, ToClub: true}, ErrUnacceptable},
	} {
		if _, err := svc.Send(ctx, c.key, c.in); !errors.Is(err, c.want) {
			t.Errorf("%+v: %v, want %v", c.in, err, c.want)
		}
	}
	if head, err := h.store.Head(ctx); head != 0 || err != nil {
		t.Fatalf("log head %d (%v) after refused requests, want nothing appended", head, err)
	}
	// A club's members, from the users' data: club 1 holds 3, 6 and 9.
	acc, err := svc.Send(ctx, "club", SendInput{Type: "like_update", Sender: "s", ClubID: 1, ToClub: true})
	if err != nil || acc.Recipients != 3 {
		t.Fatalf("to_club: %+v, %v", acc, err)
	}
	h.waitDone(acc.ID)
	for _, id := range []int64{3, 6, 9} {
		if h.sinks[notify.Email].Count(notify.IdempotencyKey(acc.ID, id, notify.Email)) != 1 {
			t.Errorf("member %d not notified", id)
		}
	}
	if s := h.sinks[notify.Email].Stats(); s.UniqueKeys != 3 {
		t.Errorf("email sink %+v: want the 3 members only", s)
	}
}

// allOnly is a store that follows only the whole log, as a Kafka
// replica store does.
type allOnly struct{ eventstore.Store }

func (s allOnly) Subscribe(ctx context.Context, f eventstore.Filter, from uint64) (eventstore.Subscription, error) {
	if f.Kind != eventstore.FilterAll {
		return nil, errors.New("allOnly: only the whole log")
	}
	return s.Store.Subscribe(ctx, f, from)
}

// With Follow set (the log followed elsewhere, e.g. on Kafka), the state
// and the metrics follow the whole log and skip what is not theirs.
func TestFollowTheWholeLog(t *testing.T) {
	h := newHarness(t, population(1500), nil)
	h.cfg.Follow = allOnly{h.store}
	svc := h.start()
	ctx := context.Background()
	if _, err := h.store.Append(ctx, "other-service", eventstore.Any, []eventstore.NewEvent{{Type: "Other", Data: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	a, err := svc.Send(ctx, "k", SendInput{Type: "like_update", Sender: "s", ToUsers: ids(1, 1500)})
	if err != nil {
		t.Fatal(err)
	}
	if st := h.waitDone(a.ID); st.Counts.Delivered != 3000 {
		t.Fatalf("counts %+v", st.Counts)
	}
	h.checkMetrics()
}

// The Prometheus counters follow the outcomes this process appended.
func TestPrometheusCounters(t *testing.T) {
	h := newHarness(t, population(100), nil)
	reg := prometheus.NewRegistry()
	h.cfg.Registerer = reg
	svc := h.start()
	a, err := svc.Send(context.Background(), "k", SendInput{Type: "like_update", Sender: "s", ToUsers: ids(1, 120)})
	if err != nil {
		t.Fatal(err)
	}
	h.waitDone(a.ID)
	for count, want := range map[string]float64{"requested": 120, "refused": 20, "built": 200, "delivered": 200} {
		if got := testutil.ToFloat64(svc.counted.WithLabelValues(count)); got != want {
			t.Errorf("logbook_notify_outcomes_total{count=%q} = %v, want %v", count, got, want)
		}
	}
}
