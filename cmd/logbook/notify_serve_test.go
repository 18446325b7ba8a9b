//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/internal/crashtest"
	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/pipeline"
	"github.com/logbook/logbook/services/notify/sink"
	"github.com/logbook/logbook/services/notify/userscdc"
)

// TestNotifyServeChild is the workload of TestNotifyServeSIGKILL:
// `logbook notify serve` with the arguments in NOTIFY_ARGS, in a process
// the test kills.
func TestNotifyServeChild(t *testing.T) {
	out := crashtest.Child(t)
	if os.Getenv("NOTIFY_HOLD_COPY") != "" {
		// The users' snapshot is copied until the kill: the service
		// answers from the snapshot in the users' database throughout.
		userscdc.TestHookCopy = func(ctx context.Context, _ string) { <-ctx.Done() }
	}
	args := strings.Split(os.Getenv("NOTIFY_ARGS"), "\x1f")
	code := run(context.Background(), &env{stdout: io.Discard, stderr: os.Stderr, getenv: os.Getenv}, args)
	out.Fail("notify serve exited %d", code)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// usersDB makes a users' database in a fresh schema with the population
// p, and names a slot (and publication) for it, dropped at the end.
func usersDB(t *testing.T, p userscdc.Population) (url, schema, slot string, src *userscdc.Source) {
	t.Helper()
	url = testenv.URL(t)
	schema = testenv.Schema(t)
	ctx := context.Background()
	src, err := userscdc.OpenSource(ctx, url, schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close) // after the slot is dropped
	if err := src.Generate(ctx, p); err != nil {
		t.Fatal(err)
	}
	slot = schema + "_slot"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			_, err := src.Pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
			if err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		_, _ = src.Pool.Exec(ctx, `DROP PUBLICATION IF EXISTS `+slot)
	})
	return url, schema, slot, src
}

// notifyClient calls a notify server.
type notifyClient struct {
	t    *testing.T
	base string
}

func (c notifyClient) call(method, path, token, key string, body []byte, v any) int {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if v != nil && res.StatusCode < 300 {
		if err := json.Unmarshal(raw, v); err != nil {
			c.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return res.StatusCode
}

func (c notifyClient) waitUp(*crashtest.Process) {
	c.t.Helper()
	for start := time.Now(); time.Since(start) < 60*time.Second; time.Sleep(20 * time.Millisecond) {
		if c.call("GET", "/api/notification-types", "viewer-token", "", nil, nil) == 200 {
			return
		}
	}
	c.t.Fatal("notify serve did not come up")
}

// `logbook notify serve` SIGKILLed in the middle of a request of 30,000
// recipients, then started again on the same directories: the request
// finishes, every recipient the preferences allow is delivered on each
// allowed channel (the sink holds each expected idempotency key, and no
// other), the request's counts are exact, a retry of the send after the
// restart is answered as the first, and every metrics window equals a
// recount of the outcomes on the log. Users added to the users' database
// while the server was down (one opted out) are seen after the restart.
// The same when the first server is killed while it still copies its
// users' snapshot, answering from the snapshot in the users' database
// (the copy is held until the kill).
func TestNotifyServeSIGKILL(t *testing.T) {
	t.Run("view", func(t *testing.T) { testNotifyServeSIGKILL(t, false) })
	t.Run("copying", func(t *testing.T) { testNotifyServeSIGKILL(t, true) })
}

func testNotifyServeSIGKILL(t *testing.T, holdCopy bool) {
	ctx := context.Background()
	const n = 30_000
	url, schema, slot, src := usersDB(t, userscdc.Population{Users: n, Clubs: 4, Type: "like_update", Refuse: 0.1, OptOut: 0.05, NoEmail: 0.1, NoPush: 0.2, Seed: 9})
	// Who should get what: the preference check on the source's users.
	all, err := src.Users(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := sink.New(sink.Options{Latency: 3 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ss := httptest.NewServer(sk)
	defer ss.Close()

	dir := t.TempDir()
	addr := freeAddr(t)
	args := []string{"notify", "serve", "--data", filepath.Join(dir, "data"), "--state", filepath.Join(dir, "state"),
		"--users-db", url, "--users-schema", schema, "--slot", slot, "--push-url", "http://user:pw@" + strings.TrimPrefix(ss.URL, "http://") + sink.Path + "?key=s3cret-push", "--email-url", ss.URL + sink.Path,
		"--addr", addr, "--chunk", "1000", "--parallel", "2", "--senders", "2"}
	spec := crashtest.Spec{Test: "TestNotifyServeChild", Env: []string{"NOTIFY_ARGS=" + strings.Join(args, "\x1f"),
		"LOGBOOK_TOKENS=sender-token:sender,viewer-token:viewer"}}
	c := notifyClient{t: t, base: "http://" + addr}

	t0 := time.Now()
	first := spec
	if holdCopy {
		first.Env = append(slices.Clone(spec.Env), "NOTIFY_HOLD_COPY=1")
	}
	p := crashtest.Start(t, first)
	c.waitUp(p)
	t.Logf("up after %v", time.Since(t0))
	var h struct{ Users string }
	if code := c.call("GET", "/healthz", "", "", nil, &h); code != 200 || (holdCopy && h.Users != "snapshot") {
		t.Fatalf("healthz after the start (copy held: %v): %d %+v", holdCopy, code, h)
	}
	for start := time.Now(); !holdCopy && h.Users != "view"; time.Sleep(10 * time.Millisecond) {
		// The first server kills with its view in place.
		if code := c.call("GET", "/healthz", "", "", nil, &h); code != 200 || time.Since(start) > time.Minute {
			t.Fatalf("healthz: %d %+v", code, h)
		}
	}
	to := make([]int64, 0, n+100)
	for id := int64(1); id <= n+100; id++ { // 100 unknown users
		to = append(to, id)
	}
	body, _ := json.Marshal(map[string]any{"type": "like_update", "club_id": 3, "sender": "coach", "timestamp": time.Now().UTC().Format(time.RFC3339), "to_users": to})
	var acc pipeline.Accepted
	if code := c.call("POST", "/api/notifications", "sender-token", "crash-1", body, &acc); code != 202 {
		t.Fatalf("send: %d", code)
	}
	want := map[string]bool{}
	var refused int64
	for _, id := range to {
		d := pipeline.DefaultPolicy.Check(all[id], "like_update")
		if d.Refused != "" {
			refused++
		}
		for _, ch := range d.Channels {
			want[notify.IdempotencyKey(acc.ID, id, ch)] = true
		}
	}
	// Kill once about a third of the messages are in.
	for start := time.Now(); sk.Stats().Messages < int64(len(want))/3; time.Sleep(time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the pipeline is stuck: sink %+v", sk.Stats())
		}
	}
	// The startup log names the delivery URLs without their secrets.
	if res := p.Kill(); !strings.Contains(res.Stderr, "push_url") || strings.Contains(res.Stderr, "s3cret-push") || strings.Contains(res.Stderr, ":pw@") {
		t.Errorf("the log shows the push URL's secrets, or no push URL:\n%s", res.Stderr)
	}
	atKill := sk.Stats()
	if holdCopy {
		v, err := userscdc.OpenView(filepath.Join(dir, "state", "users"), userscdc.ViewOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = v.Users(ctx, []int64{1})
		_ = v.Close()
		if !errors.Is(err, userscdc.ErrIncomplete) {
			t.Fatalf("the view the server killed while copying left answers %v, want ErrIncomplete", err)
		}
	}
	if atKill.UniqueKeys >= int64(len(want)) {
		t.Fatalf("everything was delivered before the kill (%+v): slow the sink down", atKill)
	}

	t.Logf("killed after %v: sink %+v", time.Since(t0), atKill)
	// Changes made while logbook is down reach it after the restart.
	if _, err := src.Write(ctx, func(w *userscdc.Writer) error {
		if err := w.PutUser(&notify.User{ID: n + 500, Name: "new", Email: "new@example.org"}, 1); err != nil {
			return err
		}
		return w.PutUser(&notify.User{ID: n + 501, Name: "out", Email: "out@example.org", OptOut: true}, 1)
	}); err != nil {
		t.Fatal(err)
	}
	p = crashtest.Start(t, spec)
	c.waitUp(p)
	t.Logf("up again after %v", time.Since(t0))
	var again pipeline.Accepted
	if code := c.call("POST", "/api/notifications", "sender-token", "crash-1", body, &again); code != 202 || again != acc {
		t.Fatalf("send again after the restart: %d %+v, first %+v", code, again, acc)
	}
	var st pipeline.Status
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if code := c.call("GET", fmt.Sprintf("/api/notifications/%s?min_position=%d", acc.ID, acc.Position), "viewer-token", "", nil, &st); code != 200 {
			t.Fatalf("status: %d", code)
		}
		if st.State == "done" {
			break
		}
		if time.Since(start) > 60*time.Second {
			t.Fatalf("not done: %+v", st)
		}
	}
	t.Logf("done after %v", time.Since(t0))
	s := sk.Stats()
	if s.UniqueKeys != int64(len(want)) {
		t.Errorf("sink holds %d keys, want the %d the preferences allow", s.UniqueKeys, len(want))
	}
	for k := range want {
		if sk.Count(k) < 1 {
			t.Errorf("key %s never delivered", k)
			break
		}
	}
	// Only the chunks in flight at the kill (2 of 1,000 recipients, 2
	// channels each) can have been delivered twice.
	if s.Duplicates > 2*2*1000 {
		t.Errorf("%d duplicate deliveries, more than the chunks in flight at the kill", s.Duplicates)
	}
	if st.Counts.Requested != int64(len(to)) || st.Counts.Refused != refused || st.Counts.Built != int64(len(want)) ||
		st.Counts.Delivered != int64(len(want)) || st.Counts.Failed != 0 || st.Counts.RefusedBy["unknown_user"] != 100 {
		t.Errorf("counts %+v: want %d requested, %d refused, %d built and delivered", st.Counts, len(to), refused, len(want))
	}
	var late pipeline.Accepted
	lateBody, _ := json.Marshal(map[string]any{"type": "like_update", "sender": "coach", "to_users": []int64{n + 500, n + 501}})
	if code := c.call("POST", "/api/notifications", "sender-token", "while-down", lateBody, &late); code != 202 {
		t.Fatalf("send to the users added while down: %d", code)
	}
	var lateSt pipeline.Status
	for start := time.Now(); lateSt.State != "done"; time.Sleep(10 * time.Millisecond) {
		if code := c.call("GET", fmt.Sprintf("/api/notifications/%s?min_position=%d", late.ID, late.Position), "viewer-token", "", nil, &lateSt); code != 200 || time.Since(start) > 20*time.Second {
			t.Fatalf("status %d %+v", code, lateSt)
		}
	}
	if lateSt.Counts.Delivered != 1 || lateSt.Counts.RefusedBy["opt_out"] != 1 || sk.Count(notify.IdempotencyKey(late.ID, n+500, notify.Email)) != 1 {
		t.Errorf("users added while logbook was down: counts %+v", lateSt.Counts)
	}
	var res struct {
		Rows []struct {
			Start  time.Time                        `json:"start"`
			Dims   map[string]string                `json:"dims"`
			Values map[string]struct{ Sum float64 } `json:"values"`
		} `json:"rows"`
	}
	// The metrics follow the log on their own: wait until they hold
	// every recipient.
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if code := c.call("GET", "/api/windows/notifications?group_by=type,club,sender", "viewer-token", "", nil, &res); code != 200 {
			t.Fatalf("windows: %d", code)
		}
		total := 0.0
		for _, r := range res.Rows {
			total += r.Values["requested"].Sum
		}
		if total == float64(len(to)+2) {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the windows hold %v requested, want %d", total, len(to))
		}
	}
	t.Logf("windows after %v", time.Since(t0))
	p.Kill()

	// The recount, from the log the child left.
	store, err := pebblestore.Open(filepath.Join(dir, "data"), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	evs, err := store.ReadTag(ctx, pipeline.Tag, 1, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	recount := map[string]float64{}
	outcomes := 0
	for _, ev := range evs {
		if ev.Type != pipeline.TypeOutcome {
			continue
		}
		outcomes++
		var o pipeline.Outcome
		if err := json.Unmarshal(ev.Data, &o); err != nil {
			t.Fatal(err)
		}
		k := o.Timestamp.Truncate(time.Minute).UTC().Format(time.RFC3339) + fmt.Sprintf("|%s|%d|%s|", o.Type, o.ClubID, o.Sender)
		for i, v := range []int64{o.Requested, o.Refused, o.Built, o.Delivered, o.Failed, o.DeadLettered, o.Retries} {
			recount[k+pipeline.MetricValues[i]] += float64(v)
		}
	}
	if outcomes != st.Chunks+1 {
		t.Errorf("%d outcomes on the log for %d chunks and the late request's one: a chunk counted twice or never", outcomes, st.Chunks)
	}
	got := map[string]float64{}
	for _, r := range res.Rows {
		k := r.Start.UTC().Format(time.RFC3339) + "|" + r.Dims["type"] + "|" + r.Dims["club"] + "|" + r.Dims["sender"] + "|"
		for _, v := range pipeline.MetricValues {
			got[k+v] = r.Values[v].Sum
		}
	}
	if len(got) != len(recount) || len(got) == 0 {
		t.Fatalf("windows %v, recount %v", got, recount)
	}
	for k, v := range recount {
		if got[k] != v {
			t.Errorf("window %s: %v, recount %v", k, got[k], v)
		}
	}
}

// `logbook notify serve --metrics-sink` writes the closed minute windows
// to PostgreSQL: two requests five minutes apart close the first one's
// window (grace 1 s), whose row then holds its counts; a club send goes
// to the club's members in the users' database.
func TestNotifyServeMetricsSink(t *testing.T) {
	url, schema, slot, src := usersDB(t, userscdc.Population{Users: 40, Clubs: 4, Seed: 1})
	sk, err := sink.New(sink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ss := httptest.NewServer(sk)
	defer ss.Close()
	dir := t.TempDir()
	addr := freeAddr(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	t.Setenv("LOGBOOK_TOKENS", "sender-token:sender,viewer-token:viewer") // auth.Load reads it
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- run(ctx, &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}, []string{"notify", "serve", "--data", filepath.Join(dir, "data"), "--state", filepath.Join(dir, "state"),
			"--users-db", url, "--users-schema", schema, "--slot", slot, "--push-url", "http://user:pw@" + strings.TrimPrefix(ss.URL, "http://") + sink.Path + "?key=s3cret-push", "--email-url", ss.URL + sink.Path,
			"--addr", addr, "--metrics-sink", url + sep + "search_path=" + schema, "--metrics-grace", "1s"})
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("notify serve exited %d", code)
		}
	}()
	c := notifyClient{t: t, base: "http://" + addr}
	c.waitUp(nil)
	// Within the last day: older send timestamps are refused.
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Minute).Add(30 * time.Second)
	// The second send, five minutes later in event time, closes the first
	// one's minute (grace 1 s) so that the sink writes its final row. It
	// goes only once the first is done: the pipeline runs requests side by
	// side, and outcomes of the first that came after the second's would
	// be late for their window, counted as late and not in the row.
	send := func(i int, ts time.Time) pipeline.Accepted {
		var acc pipeline.Accepted
		body, _ := json.Marshal(map[string]any{"type": "like_update", "club_id": 2, "sender": "coach", "timestamp": ts, "to_club": true})
		if code := c.call("POST", "/api/notifications", "sender-token", fmt.Sprint("k", i), body, &acc); code != 202 {
			t.Fatalf("send %d: %d", i, code)
		}
		return acc
	}
	// min_position: the state view answers once it has applied the send.
	waitDone := func(acc pipeline.Accepted) pipeline.Status {
		var st pipeline.Status
		for start := time.Now(); st.State != "done"; time.Sleep(10 * time.Millisecond) {
			path := fmt.Sprintf("/api/notifications/%s?min_position=%d", acc.ID, acc.Position)
			if code := c.call("GET", path, "viewer-token", "", nil, &st); code != 200 || time.Since(start) > 20*time.Second {
				t.Fatalf("status %d %+v", code, st)
			}
		}
		return st
	}
	first := send(0, t0)
	if first.Recipients != 10 { // ids 1 + id%4 == 2: 1, 5, …, 37
		t.Fatalf("club 2 has %d members in the send, want 10", first.Recipients)
	}
	st := waitDone(first)
	waitDone(send(1, t0.Add(5*time.Minute)))
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		var requested, delivered float64
		err := src.Pool.QueryRow(context.Background(), `SELECT requested_sum, delivered_sum FROM `+schema+`.notifications_minute
			WHERE window_start = $1 AND type = 'like_update' AND club = '2' AND sender = 'coach'`, t0.Truncate(time.Minute)).Scan(&requested, &delivered)
		if err == nil {
			if requested != 10 || delivered != float64(st.Counts.Delivered) {
				t.Fatalf("sunk window: requested %v, delivered %v; the request's counts %+v", requested, delivered, st.Counts)
			}
			return
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("no sunk window: %v", err)
		}
	}
}

// TestNotifyServeBackup: notify serve's metrics windows are a durable
// view, backed up with its store through POST /admin/backup; the
// backup's windows checkpoint is at or below its log position, and
// restore --views puts them where --state expects them. backup --data,
// through the store directory's socket, copies them too.
func TestNotifyServeBackup(t *testing.T) {
	url, schema, slot, _ := usersDB(t, userscdc.Population{Users: 8, Clubs: 2, Seed: 1})
	sk, err := sink.New(sink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ss := httptest.NewServer(sk)
	defer ss.Close()
	dir := t.TempDir()
	addr := freeAddr(t)
	t.Setenv("LOGBOOK_TOKENS", "sender-token:sender,viewer-token:viewer,admin-token:admin")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- run(ctx, &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}, []string{"notify", "serve", "--data", filepath.Join(dir, "data"), "--state", filepath.Join(dir, "state"),
			"--users-db", url, "--users-schema", schema, "--slot", slot, "--push-url", ss.URL + sink.Path, "--email-url", ss.URL + sink.Path,
			"--addr", addr, "--backup-dir", filepath.Join(dir, "backups")})
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("notify serve exited %d", code)
		}
	}()
	c := notifyClient{t: t, base: "http://" + addr}
	c.waitUp(nil)
	body, _ := json.Marshal(map[string]any{"type": "like_update", "club_id": 1, "sender": "coach", "timestamp": time.Now().UTC().Add(-time.Minute), "to_club": true})
	var acc pipeline.Accepted
	if code := c.call("POST", "/api/notifications", "sender-token", "k0", body, &acc); code != 202 {
		t.Fatalf("send: %d", code)
	}
	var st pipeline.Status
	for start := time.Now(); st.State != "done"; time.Sleep(10 * time.Millisecond) {
		if code := c.call("GET", fmt.Sprintf("/api/notifications/%s?min_position=%d", acc.ID, acc.Position), "viewer-token", "", nil, &st); code != 200 || time.Since(start) > 20*time.Second {
			t.Fatalf("status %d %+v", code, st)
		}
	}
	code, out, stderr := runCLI(t, "backup", "--server", c.base, "--token", "admin-token", "--json")
	var b struct {
		Dir      string `json:"dir"`
		Position uint64 `json:"position"`
		Views    []struct {
			Name       string `json:"name"`
			Checkpoint uint64 `json:"checkpoint"`
		} `json:"views"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil {
		t.Fatalf("backup: %d %s %s", code, out, stderr)
	}
	if b.Position < acc.Position || len(b.Views) != 1 || b.Views[0].Name != "windows" || b.Views[0].Checkpoint == 0 || b.Views[0].Checkpoint > b.Position {
		t.Fatalf("backup %+v, the send at %d", b, acc.Position)
	}
	// The same through the store directory's socket: backup --data.
	viaSocket := filepath.Join(t.TempDir(), "b")
	code, out, stderr = runCLI(t, "backup", "--data", filepath.Join(dir, "data"), "--out", viaSocket, "--json")
	var bs struct {
		Dir      string `json:"dir"`
		Position uint64 `json:"position"`
		Views    []struct {
			Name       string `json:"name"`
			Checkpoint uint64 `json:"checkpoint"`
		} `json:"views"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &bs) != nil || bs.Dir != viaSocket || bs.Position < b.Position || len(bs.Views) != 1 || bs.Views[0].Name != "windows" || bs.Views[0].Checkpoint == 0 || bs.Views[0].Checkpoint > bs.Position {
		t.Fatalf("backup --data of the serving store: %d %s %s", code, out, stderr)
	}
	if code, out, stderr := runCLI(t, "restore", "--from", viaSocket, "--data", filepath.Join(t.TempDir(), "data"), "--views", filepath.Join(t.TempDir(), "state")); code != 0 {
		t.Fatalf("restore of the socket's backup: %d %s %s", code, out, stderr)
	}
	state := filepath.Join(t.TempDir(), "state")
	if code, out, stderr := runCLI(t, "restore", "--from", b.Dir, "--data", filepath.Join(t.TempDir(), "data"), "--views", state); code != 0 {
		t.Fatalf("restore: %d %s %s", code, out, stderr)
	}
	if files, _ := filepath.Glob(filepath.Join(state, "windows", "MANIFEST-*")); len(files) == 0 {
		entries, _ := os.ReadDir(filepath.Join(state, "windows"))
		t.Fatalf("restored windows hold no Pebble manifest: %v", entries)
	}
}
