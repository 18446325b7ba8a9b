package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/window"
	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/deliver"
	"github.com/logbook/logbook/services/notify/sink"
	"github.com/logbook/logbook/services/notify/userscdc"
)

// users is an in-memory users' data: what the view would answer.
type users struct {
	mu   sync.Mutex
	m    map[int64]*notify.User
	club map[int64]int64
}

func (u *users) Users(_ context.Context, ids []int64) (map[int64]*notify.User, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := map[int64]*notify.User{}
	for _, id := range ids {
		if x := u.m[id]; x != nil {
			c := *x
			out[id] = &c
		}
	}
	return out, nil
}

func (u *users) Members(_ context.Context, club int64, max int) ([]int64, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []int64
	for id, c := range u.club {
		if c == club {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	if max > 0 && len(out) > max {
		return nil, userscdc.ErrTooManyMembers
	}
	return out, nil
}

func (u *users) Clubs(context.Context) ([]userscdc.Club, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := map[int64]int64{}
	for _, c := range u.club {
		n[c]++
	}
	var out []userscdc.Club
	for c, k := range n {
		out = append(out, userscdc.Club{ID: c, Members: k})
	}
	slices.SortFunc(out, func(a, b userscdc.Club) int { return int(a.ID - b.ID) })
	return out, nil
}

// population makes n users, ids 1..n, in clubs 1..3 (id%3+1), each with
// a device and an e-mail address.
func population(n int) *users {
	u := &users{m: map[int64]*notify.User{}, club: map[int64]int64{}}
	for id := int64(1); id <= int64(n); id++ {
		u.m[id] = &notify.User{ID: id, Name: "U", Language: "en", Email: "u@example.org", DeviceTokens: []string{"tok"}}
		u.club[id] = id%3 + 1
	}
	return u
}

// harness is a service on a fresh embedded store with a sink per
// channel.
type harness struct {
	t     *testing.T
	dir   string
	store *pebblestore.Store
	users *users
	sinks map[notify.Channel]*sink.Sink
	urls  map[notify.Channel]string
	opt   deliver.Config
	cfg   Config
	svc   *Service
}

func newHarness(t *testing.T, u *users, sinkOpt map[notify.Channel]sink.Options) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), users: u, sinks: map[notify.Channel]*sink.Sink{}, urls: map[notify.Channel]string{}}
	for _, c := range notify.Channels {
		s, err := sink.New(sinkOpt[c])
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		h.sinks[c], h.urls[c] = s, srv.URL+sink.Path
	}
	st, err := pebblestore.Open(h.dir+"/store", pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	h.store = st
	t.Cleanup(func() { _ = st.Close() })
	h.opt = deliver.Config{Endpoints: h.urls, Attempts: 6, BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	h.cfg = Config{Users: u, StateDir: h.dir + "/state", ChunkSize: 1000}
	return h
}

func (h *harness) start() *Service {
	h.t.Helper()
	d, err := deliver.New(h.opt)
	if err != nil {
		h.t.Fatal(err)
	}
	cfg := h.cfg
	cfg.Deliverer = d
	svc, err := New(context.Background(), h.store, cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.svc = svc
	h.t.Cleanup(func() { _ = svc.Close() })
	return svc
}

// waitDone waits until the request's every chunk is done.
func (h *harness) waitDone(id string) Status {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := h.svc.Get(context.Background(), id, 0)
		if err != nil && !errors.Is(err, ErrNotFound) {
			h.t.Fatal(err)
		}
		if st.State == "done" {
			return st
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("request %s not done: %+v", id, st)
		}
		if err := h.svc.Err(); err != nil {
			h.t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ids(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// recount sums the outcome events of the log by (type, club, sender)
// and minute: what the metrics windows must hold.
func recount(t *testing.T, s eventstore.Store) map[string][]float64 {
	t.Helper()
	out := map[string][]float64{}
	evs, err := s.ReadTag(context.Background(), Tag, 1, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type != TypeOutcome {
			continue
		}
		var o Outcome
		if err := json.Unmarshal(ev.Data, &o); err != nil {
			t.Fatal(err)
		}
		if o.Request == "" {
			continue
		}
		k := o.Timestamp.Truncate(time.Minute).UTC().Format(time.RFC3339) + "|" + o.Type + "|" + itoa64(o.ClubID) + "|" + o.Sender
		if out[k] == nil {
			out[k] = make([]float64, len(MetricValues))
		}
		for i, v := range []int64{o.Requested, o.Refused, o.Built, o.Delivered, o.Failed, o.DeadLettered, o.Retries} {
			out[k][i] += float64(v)
		}
	}
	return out
}

// checkMetrics compares every minute window with a recount from the log.
func (h *harness) checkMetrics() {
	h.t.Helper()
	ctx := context.Background()
	if err := h.svc.WaitCaughtUp(ctx); err != nil {
		h.t.Fatal(err)
	}
	want := recount(h.t, h.store)
	res, err := h.svc.Aggregation().Query(ctx, window.Query{GroupBy: []string{"type", "club", "sender"}})
	if err != nil {
		h.t.Fatal(err)
	}
	got := map[string][]float64{}
	for _, r := range res.Rows {
		k := r.Start.UTC().Format(time.RFC3339) + "|" + r.Dims["type"] + "|" + r.Dims["club"] + "|" + r.Dims["sender"]
		for _, v := range MetricValues {
			got[k] = append(got[k], r.Values[v].Sum)
		}
	}
	if len(want) == 0 {
		h.t.Fatal("no outcome on the log")
	}
	if len(got) != len(want) {
		h.t.Fatalf("metrics windows %v, recount %v", got, want)
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			h.t.Errorf("window %s: %v, recount from the log %v (windows %v)", k, got[k], w, got)
		}
	}
}
