package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/sink"
)

// Preferences: each refusal is counted by its reason; a mandatory type
// (account_security) reaches a user who opted out globally and turned
// the type off, on every channel they have an address for; a channel
// turned off keeps only the other.
func TestPreferenceEdgeCases(t *testing.T) {
	u := &users{m: map[int64]*notify.User{}, club: map[int64]int64{}}
	add := func(x *notify.User) { x.Language = "en"; u.m[x.ID] = x }
	both := func(id int64) *notify.User {
		return &notify.User{ID: id, Name: "n", Email: "e@x", DeviceTokens: []string{"t"}}
	}
	add(both(1)) // everything on
	x := both(2) // global opt-out
	x.OptOut = true
	add(x)
	x = both(3) // like_update off on both channels
	x.Disabled = map[notify.Setting]bool{{Type: "like_update", Channel: notify.Push}: true, {Type: "like_update", Channel: notify.Email}: true}
	add(x)
	x = both(4) // like_update off on push only
	x.Disabled = map[notify.Setting]bool{{Type: "like_update", Channel: notify.Push}: true}
	add(x)
	add(&notify.User{ID: 5, Name: "n"}) // no address
	add(&notify.User{ID: 6, Name: "n", DeviceTokens: []string{"t"}})
	// 7 is unknown
	h := newHarness(t, u, nil)
	svc := h.start()
	ctx := context.Background()
	a, err := svc.Send(ctx, "k", SendInput{Type: "like_update", Sender: "s", ToUsers: []int64{1, 2, 3, 4, 5, 6, 7, 1, 6}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Recipients != 7 || a.Duplicates != 2 {
		t.Fatalf("accepted %+v", a)
	}
	st := h.waitDone(a.ID)
	want := Counts{Requested: 9, Refused: 6, RefusedBy: map[string]int64{"opt_out": 1, "settings": 1, "no_address": 1, "unknown_user": 1, "duplicate": 2},
		Built: 4, Delivered: 4} // 1: push+email, 4: email, 6: push
	if !reflect.DeepEqual(st.Counts, want) {
		t.Fatalf("counts %+v, want %+v", st.Counts, want)
	}
	for _, c := range []struct {
		id int64
		ch notify.Channel
		n  int
	}{{1, notify.Push, 1}, {1, notify.Email, 1}, {2, notify.Push, 0}, {3, notify.Email, 0}, {4, notify.Push, 0}, {4, notify.Email, 1}, {6, notify.Push, 1}} {
		if got := h.sinks[c.ch].Count(notify.IdempotencyKey(a.ID, c.id, c.ch)); got != c.n {
			t.Errorf("user %d on %s: %d deliveries, want %d", c.id, c.ch, got, c.n)
		}
	}
	// Mandatory: 2 (opted out) and 3 (type off) get it anyway; 5 has no
	// address still.
	m, err := svc.Send(ctx, "m", SendInput{Type: "account_security", Sender: "s", ToUsers: []int64{2, 3, 5}})
	if err != nil {
		t.Fatal(err)
	}
	st = h.waitDone(m.ID)
	want = Counts{Requested: 3, Refused: 1, RefusedBy: map[string]int64{"no_address": 1}, Built: 4, Delivered: 4}
	if !reflect.DeepEqual(st.Counts, want) {
		t.Fatalf("mandatory counts %+v, want %+v", st.Counts, want)
	}
	h.checkMetrics()
}

// failing is an endpoint that answers 503 while down is set, then hands
// calls to the sink.
type failing struct {
	down atomic.Bool
	next http.Handler
}

func (f *failing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	f.next.ServeHTTP(w, r)
}

// The e-mail endpoint fails every call: its batches become dead letters
// after the retries, push is delivered. Once it is back, a replay of the
// request's dead letters delivers each e-mail once, with its original
// idempotency key, and the dead letters show as replayed.
func TestDeadLettersAndReplay(t *testing.T) {
	h := newHarness(t, population(1200), nil)
	f := &failing{next: h.sinks[notify.Email]}
	f.down.Store(true)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	h.opt.Endpoints = map[notify.Channel]string{notify.Push: h.urls[notify.Push], notify.Email: srv.URL + sink.Path}
	h.opt.Attempts = 3
	svc := h.start()
	ctx := context.Background()
	a, err := svc.Send(ctx, "k", SendInput{Type: "event_waiting_list", Sender: "s", ToUsers: ids(1, 1200)})
	if err != nil {
		t.Fatal(err)
	}
	st := h.waitDone(a.ID)
	// Chunks of 1,000 and 200: e-mail batches of 500, 500 and 200.
	want := Counts{Requested: 1200, RefusedBy: map[string]int64{}, Built: 2400, Delivered: 1200, Failed: 1200, DeadLettered: 1200, Retries: 3 * 2}
	if !reflect.DeepEqual(st.Counts, want) || st.OpenDeadLetters != 3 {
		t.Fatalf("counts %+v (open dead letters %d), want %+v", st.Counts, st.OpenDeadLetters, want)
	}
	dls, err := svc.DeadLetters(a.ID, "", 10)
	if err != nil || len(dls) != 3 {
		t.Fatalf("dead letters %+v, %v", dls, err)
	}
	n := 0
	for _, d := range dls {
		n += len(d.UserIDs)
		if d.Channel != notify.Email || d.State != "open" || d.Attempts != 3 || d.Reason == "" {
			t.Errorf("dead letter %+v", d)
		}
	}
	if n != 1200 {
		t.Fatalf("dead letters hold %d recipients, want 1200", n)
	}
	page, err := svc.DeadLetters("", dls[0].ID, 1)
	if err != nil || len(page) != 1 || page[0].ID != dls[1].ID {
		t.Fatalf("the page after %s: %+v, %v", dls[0].ID, page, err)
	}
	if s := h.sinks[notify.Email].Stats(); s.Messages != 0 {
		t.Fatalf("email sink took %+v while down", s)
	}
	f.down.Store(false)
	r, err := svc.Replay(ctx, "r1", ReplayInput{Request: a.ID})
	if err != nil || len(r.DeadLetters) != 3 {
		t.Fatalf("replay %+v, %v", r, err)
	}
	again, err := svc.Replay(ctx, "r1", ReplayInput{Request: a.ID})
	if err != nil || again.ID != r.ID {
		t.Fatalf("replay retried: %+v, %v", again, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err = svc.Get(ctx, a.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if st.OpenDeadLetters == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead letters still open: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st.Counts.Delivered != 2400 {
		t.Fatalf("delivered %d after the replay, want 2400", st.Counts.Delivered)
	}
	s := h.sinks[notify.Email].Stats()
	if s.UniqueKeys != 1200 || s.Duplicates != 0 {
		t.Fatalf("email sink after the replay %+v", s)
	}
	if h.sinks[notify.Email].Count(notify.IdempotencyKey(a.ID, 777, notify.Email)) != 1 {
		t.Fatal("the replay did not use the original idempotency key")
	}
	dls, _ = svc.DeadLetters(a.ID, "", 10)
	for _, d := range dls {
		if d.State != "replayed" || d.ReplayedBy != r.ID {
			t.Errorf("dead letter after the replay: %+v", d)
		}
	}
	if _, err := svc.Replay(ctx, "", ReplayInput{Request: a.ID}); err == nil {
		t.Error("a replay with nothing open was accepted")
	}
	if _, err := svc.Replay(ctx, "", ReplayInput{IDs: []string{"nope"}}); err == nil {
		t.Error("a replay of an unknown dead letter was accepted")
	}
	h.checkMetrics()
}

// With 5 % of the calls failing, every message is still delivered once:
// the retries are counted, nothing is dead-lettered.
func TestFailingCallsAreRetried(t *testing.T) {
	h := newHarness(t, population(20_000), map[notify.Channel]sink.Options{
		notify.Push: {ErrorRate: 0.05, Seed: 1}, notify.Email: {ErrorRate: 0.05, Seed: 2}})
	h.cfg.ChunkSize = 5000
	h.opt.Attempts = 20
	svc := h.start()
	a, err := svc.Send(context.Background(), "k", SendInput{Type: "like_update", Sender: "s", ToUsers: ids(1, 20_000)})
	if err != nil {
		t.Fatal(err)
	}
	st := h.waitDone(a.ID)
	var failed int64
	for _, c := range notify.Channels {
		s := h.sinks[c].Stats()
		if s.UniqueKeys != 20_000 || s.Duplicates != 0 {
			t.Errorf("%s sink %+v", c, s)
		}
		failed += s.FailedCalls
	}
	if st.Counts.Delivered != 40_000 || st.Counts.Failed != 0 || st.Counts.DeadLettered != 0 || st.Counts.Retries != failed || failed == 0 {
		t.Fatalf("counts %+v, the sinks failed %d calls (%+v, %+v)", st.Counts, failed, h.sinks[notify.Push].Stats(), h.sinks[notify.Email].Stats())
	}
	h.checkMetrics()
}

// Closed mid-run and started again on the same store: the chunks without
// an outcome are done again, every recipient ends up delivered, the
// counts are exact (each chunk counted once), and no key is missing.
func TestRestartMidRun(t *testing.T) {
	opt := sink.Options{Latency: 2 * time.Millisecond}
	h := newHarness(t, population(30_000), map[notify.Channel]sink.Options{notify.Push: opt, notify.Email: opt})
	h.cfg.ChunkSize = 1000
	h.cfg.Parallel = 2
	svc := h.start()
	a, err := svc.Send(context.Background(), "k", SendInput{Type: "like_update", Sender: "s", ToUsers: ids(1, 30_000)})
	if err != nil {
		t.Fatal(err)
	}
	for {
		st, err := svc.Get(context.Background(), a.ID, a.Position)
		if err != nil {
			t.Fatal(err)
		}
		if st.ChunksDone >= 3 {
			if st.State == "done" {
				t.Fatal("done before the restart: make it larger")
			}
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	h.start()
	st := h.waitDone(a.ID)
	if st.Counts.Requested != 30_000 || st.Counts.Delivered != 60_000 || st.Counts.Built != 60_000 {
		t.Fatalf("counts after the restart %+v", st.Counts)
	}
	for _, c := range notify.Channels {
		if s := h.sinks[c].Stats(); s.UniqueKeys != 30_000 {
			t.Errorf("%s sink %+v", c, s)
		}
	}
	h.checkMetrics()
}

// With Exclusive set, nothing is delivered until the lock is held; a
// request accepted meanwhile is delivered once it is. An outcome of a
// chunk appended twice (a second process on the store) counts once.
func TestPipelineWaitsForItsLock(t *testing.T) {
	h := newHarness(t, population(100), nil)
	granted := make(chan struct{})
	h.cfg.Exclusive = func(ctx context.Context, run func(context.Context) error) error {
		select {
		case <-granted:
		case <-ctx.Done():
			return nil
		}
		return run(ctx)
	}
	svc := h.start()
	ctx := context.Background()
	a, err := svc.Send(ctx, "k", SendInput{Type: "like_update", Sender: "s", ToUsers: ids(1, 100)})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if st, err := svc.Get(ctx, a.ID, a.Position); err != nil || st.State != "accepted" || h.sinks[notify.Push].Stats().Calls != 0 {
		t.Fatalf("before the lock: %+v, %v, sink %+v", st, err, h.sinks[notify.Push].Stats())
	}
	close(granted)
	st := h.waitDone(a.ID)
	if st.Counts.Delivered != 200 {
		t.Fatalf("counts %+v", st.Counts)
	}
	evs, err := h.store.ReadStream(ctx, outcomeStream(a.ID), 1, 1)
	if err != nil || len(evs) != 1 {
		t.Fatal(evs, err)
	}
	res, err := h.store.Append(ctx, outcomeStream(a.ID), eventstore.Any, []eventstore.NewEvent{{Type: evs[0].Type, Tags: evs[0].Tags, Data: evs[0].Data}})
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.Get(ctx, a.ID, res.LastPosition)
	if err != nil || !reflect.DeepEqual(again.Counts, st.Counts) || svc.Err() != nil {
		t.Fatalf("after a repeated outcome: %+v (was %+v), %v, %v", again.Counts, st.Counts, err, svc.Err())
	}
}

// When the state view stops (here: an event it cannot apply), the
// pipeline stops scheduling: a step whose outcome the state never shows
// is not picked again from the stale state and delivered again, and the
// service reports the failure (for /healthz).
func TestStoppedStateStopsThePipeline(t *testing.T) {
	opt := sink.Options{Latency: 300 * time.Millisecond}
	h := newHarness(t, population(300), map[notify.Channel]sink.Options{notify.Push: opt, notify.Email: opt})
	h.cfg.ChunkSize = 100
	h.cfg.Parallel = 1
	svc := h.start()
	ctx := context.Background()
	a, err := svc.Send(ctx, "k", SendInput{Type: "like_update", Sender: "s", ToUsers: ids(1, 300)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Get(ctx, a.ID, a.Position); err != nil {
		t.Fatal(err)
	}
	// The first chunk is being delivered; its outcome will come after an
	// event the state cannot apply.
	poison, _ := json.Marshal(Outcome{Request: "no-such-request", Chunk: 0})
	if _, err := h.store.Append(ctx, "poison", eventstore.Any, []eventstore.NewEvent{{Type: TypeOutcome, Tags: []string{Tag}, Data: poison}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for svc.Err() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the state stopped, the service reports no failure")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Long enough for the old pipeline to have picked the chunk again
	// (it paused 1 s after a failed step).
	time.Sleep(2500 * time.Millisecond)
	for _, c := range notify.Channels {
		if s := h.sinks[c].Stats(); s.Duplicates != 0 || s.UniqueKeys > 100 {
			t.Errorf("%s sink %+v: a chunk delivered again after the state stopped, or a later chunk started", c, s)
		}
	}
}

// deadLettered sends a request whose e-mails all fail for good, and
// brings the e-mail endpoint back: its dead letters are open.
func deadLettered(t *testing.T, h *harness, n int64) (string, []DeadLetterInfo) {
	t.Helper()
	f := &failing{next: h.sinks[notify.Email]}
	f.down.Store(true)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	h.opt.Endpoints = map[notify.Channel]string{notify.Push: h.urls[notify.Push], notify.Email: srv.URL + sink.Path}
	h.opt.Attempts = 1
	svc := h.start()
	a, err := svc.Send(context.Background(), "k", SendInput{Type: "event_waiting_list", Sender: "s", ToUsers: ids(1, n)})
	if err != nil {
		t.Fatal(err)
	}
	h.waitDone(a.ID)
	dls, err := svc.DeadLetters(a.ID, "", 100)
	if err != nil || len(dls) == 0 {
		t.Fatalf("dead letters %+v, %v", dls, err)
	}
	f.down.Store(false)
	return a.ID, dls
}

// waitReplayed waits until the request has no open dead letter.
func (h *harness) waitReplayed(id string) Status {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := h.svc.Get(context.Background(), id, 0)
		if err != nil {
			h.t.Fatal(err)
		}
		if st.OpenDeadLetters == 0 {
			return st
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("dead letters still open: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Two replays of the same dead letters, accepted before either ran (two
// clicks, two operators, no key or different keys): each message is
// delivered once, and the request's counts add it once.
func TestConcurrentReplaysDeliverOnce(t *testing.T) {
	opt := sink.Options{Latency: 50 * time.Millisecond}
	h := newHarness(t, population(600), map[notify.Channel]sink.Options{notify.Email: opt})
	h.cfg.ChunkSize = 300
	req, dls := deadLettered(t, h, 600)
	ctx := context.Background()
	var names []string
	for _, d := range dls {
		names = append(names, d.ID)
	}
	r1, err1 := h.svc.Replay(ctx, "", ReplayInput{IDs: names})
	r2, err2 := h.svc.Replay(ctx, "", ReplayInput{Request: req})
	if err1 != nil {
		t.Fatal(err1)
	}
	// The second is refused (every letter is held by the first) or
	// accepted to no effect; it never delivers again.
	if err2 == nil && len(r2.DeadLetters) != 0 {
		t.Errorf("second replay accepted %+v while %s holds its letters", r2, r1.ID)
	}
	st := h.waitReplayed(req)
	if err := h.svc.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a second replay would be delivering now
	s := h.sinks[notify.Email].Stats()
	if s.UniqueKeys != 600 || s.Duplicates != 0 {
		t.Fatalf("email sink %+v after two replays: want each of 600 messages once", s)
	}
	st, _ = h.svc.Get(ctx, req, 0)
	if st.Counts.Delivered != 1200 {
		t.Fatalf("delivered %d, want 1200 (600 push, 600 e-mails replayed once)", st.Counts.Delivered)
	}
	for _, d := range mustDLs(t, h.svc, req) {
		if d.ReplayedBy != r1.ID {
			t.Errorf("dead letter %s replayed by %q, want %s", d.ID, d.ReplayedBy, r1.ID)
		}
	}
}

func mustDLs(t *testing.T, svc *Service, req string) []DeadLetterInfo {
	t.Helper()
	dls, err := svc.DeadLetters(req, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	return dls
}

// A replay's Idempotency-Key names it: the same key and body answer as
// the first time, even once it is done; the same key with another body
// is refused (not answered with the first replay). A replay naming
// letters another replay holds is refused, saying which.
func TestReplayIdempotencyAndClaims(t *testing.T) {
	h := newHarness(t, population(600), map[notify.Channel]sink.Options{notify.Email: {Latency: 200 * time.Millisecond}})
	h.cfg.ChunkSize = 300
	h.cfg.Parallel = 1
	req, dls := deadLettered(t, h, 600)
	if len(dls) != 2 {
		t.Fatalf("%d dead letters, want 2", len(dls))
	}
	ctx := context.Background()
	r1, err := h.svc.Replay(ctx, "key", ReplayInput{IDs: []string{dls[0].ID}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Replay(ctx, "key", ReplayInput{IDs: []string{dls[1].ID}}); !errors.Is(err, ErrKeyReused) {
		t.Errorf("the key with another body: %v, want ErrKeyReused", err)
	}
	_, err = h.svc.Replay(ctx, "other", ReplayInput{IDs: []string{dls[0].ID}})
	if !errors.Is(err, ErrUnacceptable) || !strings.Contains(err.Error(), dls[0].ID) || !strings.Contains(err.Error(), r1.ID) {
		t.Errorf("a letter held by replay %s named again: %v, want it refused naming the letter and the replay", r1.ID, err)
	}
	// Both named, one held: the other is replayed, the held one skipped.
	r3, err := h.svc.Replay(ctx, "third", ReplayInput{IDs: []string{dls[0].ID, dls[1].ID}})
	if err != nil || !slices.Equal(r3.DeadLetters, []string{dls[1].ID}) || len(r3.Skipped) != 1 || r3.Skipped[0].ID != dls[0].ID || r3.Skipped[0].Replay != r1.ID {
		t.Fatalf("replay of a held and an open letter: %+v, %v", r3, err)
	}
	h.waitReplayed(req)
	again, err := h.svc.Replay(ctx, "key", ReplayInput{IDs: []string{dls[0].ID}})
	if err != nil || again.ID != r1.ID || !slices.Equal(again.DeadLetters, r1.DeadLetters) {
		t.Fatalf("the key retried after the replay: %+v, %v; first %+v", again, err, r1)
	}
	if s := h.sinks[notify.Email].Stats(); s.UniqueKeys != 600 || s.Duplicates != 0 {
		t.Fatalf("email sink %+v", s)
	}
}

// Dead letters' reasons name the endpoint without its user info or
// query, as stored and as listed, also for a letter stored before
// reasons were redacted.
func TestDeadLetterReasonsAreRedacted(t *testing.T) {
	h := newHarness(t, population(10), nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusBadRequest)
	}))
	t.Cleanup(srv.Close)
	h.opt.Endpoints = map[notify.Channel]string{notify.Push: h.urls[notify.Push], notify.Email: "http://user:pw@" + srv.Listener.Addr().String() + "/x?token=s3cret"}
	srv.Close() // a transport error: Go's error names the URL
	svc := h.start()
	ctx := context.Background()
	a, err := svc.Send(ctx, "k", SendInput{Type: "like_update", Sender: "s", ToUsers: ids(1, 10)})
	if err != nil {
		t.Fatal(err)
	}
	h.waitDone(a.ID)
	old, _ := json.Marshal(DeadLetter{ID: a.ID + "/old", Request: a.ID, Channel: notify.Email, UserIDs: []int64{1},
		Reason: `Post "https://push.example.org/v1?key=s3cret": 400 Bad Request`, Attempts: 1})
	res, err := h.store.Append(ctx, "legacy", eventstore.Any, []eventstore.NewEvent{{Type: TypeDeadLettered, Tags: []string{Tag}, Data: old}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Get(ctx, a.ID, res.LastPosition); err != nil {
		t.Fatal(err)
	}
	dls := mustDLs(t, svc, a.ID)
	if len(dls) != 2 {
		t.Fatalf("dead letters %+v", dls)
	}
	for _, d := range dls {
		if strings.Contains(d.Reason, "s3cret") || strings.Contains(d.Reason, "pw@") || !strings.Contains(d.Reason, "***") {
			t.Errorf("dead letter %s reason %q: want the URL redacted", d.ID, d.Reason)
		}
	}
	evs, err := h.store.ReadStream(ctx, outcomeStream(a.ID), 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if strings.Contains(string(ev.Data), "s3cret") {
			t.Errorf("stored %s holds the secret: %s", ev.Type, ev.Data)
		}
	}
}
