//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/engine/shred"
	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/pipeline"
	"github.com/logbook/logbook/services/notify/userscdc"
)

// TestNotifyForgetEverywhere: after a user is forgotten, nothing of
// theirs — name, e-mail address, device token — can be read anywhere
// logbook keeps data: in any file of the store's directory (the log, its
// WAL and tables), of the state directory (the users view, the metrics
// windows, the keyring), in the users view rebuilt from scratch (a new
// snapshot of the users' database, which still holds the user: that
// database is the monolith's, outside logbook, and erasing the user there
// is its owner's business), on the Kafka topic the log is published to
// (with LOGBOOK_TEST_KAFKA), in any answer of the HTTP API, and in what
// is delivered: a send to them after the forgetting is refused
// "forgotten" and delivers nothing. The audit event names the user only
// by a keyed hash.
//
// The "clear" run is the control: the same server without a master key
// keeps the users view in clear, and the same scans find the user there
// (and forgetting answers 501), so the scans can see what they look for.
func TestNotifyForgetEverywhere(t *testing.T) {
	t.Run("sealed", func(t *testing.T) { testNotifyForget(t, true) })
	t.Run("clear", func(t *testing.T) { testNotifyForget(t, false) })
}

func testNotifyForget(t *testing.T, sealed bool) {
	ctx := context.Background()
	url, schema, slot, src := usersDB(t, userscdc.Population{Users: 20, Clubs: 2, Seed: 1})
	const id = 1_000_001
	needles := map[string][]byte{
		"name":   []byte("Zerlina Quaxtonbury"),
		"email":  []byte("zerlina.quaxtonbury@example.org"),
		"device": []byte("devtok-zq-5f1c9a77e2"),
	}
	if _, err := src.Write(ctx, func(w *userscdc.Writer) error {
		if err := w.PutUser(&notify.User{ID: id, Name: string(needles["name"]), Language: "en", Email: string(needles["email"])}, 1); err != nil {
			return err
		}
		_, err := w.AddDevice(id, string(needles["device"]))
		return err
	}); err != nil {
		t.Fatal(err)
	}

	// The delivery endpoint records what it is sent.
	var mu sync.Mutex
	var delivered []byte
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		delivered = append(delivered, b...)
		mu.Unlock()
	}))
	defer endpoint.Close()
	takeDelivered := func() []byte {
		mu.Lock()
		defer mu.Unlock()
		b := delivered
		delivered = nil
		return b
	}

	dir := t.TempDir()
	addr := freeAddr(t)
	args := []string{"notify", "serve", "--data", filepath.Join(dir, "data"), "--state", filepath.Join(dir, "state"),
		"--users-db", url, "--users-schema", schema, "--slot", slot,
		"--push-url", endpoint.URL + "/push", "--email-url", endpoint.URL + "/email", "--addr", addr}
	master := shred.NewMasterKey()
	if sealed {
		keyFile := filepath.Join(t.TempDir(), "master")
		if err := os.WriteFile(keyFile, []byte(master+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--master-key-file", keyFile)
	}
	var bus *server.Bus
	if os.Getenv("LOGBOOK_TEST_KAFKA") != "" || testenv.Required() {
		var err error
		if bus, err = server.ParseBus("kafka://" + testenv.Kafka(t)[0] + "/logbook-forget-" + schema); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--bus", "kafka://"+testenv.Kafka(t)[0]+"/"+bus.Topic)
	}
	t.Setenv("LOGBOOK_TOKENS", "sender-token:sender,viewer-token:viewer,admin-token:admin")
	c := notifyClient{t: t, base: "http://" + addr}
	start := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int)
		go func() {
			done <- run(ctx, &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}, args)
		}()
		c.waitUp(nil)
		return func() {
			cancel()
			if code := <-done; code != 0 {
				t.Fatalf("notify serve exited %d", code)
			}
		}
	}
	n := 0
	send := func() pipeline.Status {
		n++
		var acc pipeline.Accepted
		body, _ := json.Marshal(map[string]any{"type": "account_security", "club_id": 1, "sender": "ops", "to_users": []int64{id, 2, 4}})
		if code := c.call("POST", "/api/notifications", "sender-token", fmt.Sprint("k", n), body, &acc); code != 202 {
			t.Fatalf("send: %d", code)
		}
		var st pipeline.Status
		for start := time.Now(); st.State != "done"; time.Sleep(10 * time.Millisecond) {
			path := fmt.Sprintf("/api/notifications/%s?min_position=%d", acc.ID, acc.Position)
			// 503: the state has not reached the send yet (it follows
			// the log from Kafka when there is a bus).
			if code := c.call("GET", path, "viewer-token", "", nil, &st); (code != 200 && code != 503) || time.Since(start) > 60*time.Second {
				t.Fatalf("status %d %+v", code, st)
			}
		}
		return st
	}
	// leaksIn names the needles found in b.
	leaksIn := func(where string, b []byte) []string {
		var out []string
		for what, n := range needles {
			if bytes.Contains(b, n) {
				out = append(out, what+" in "+where)
			}
		}
		return out
	}
	apiLeaks := func() []string {
		var out []string
		for _, path := range []string{"/api/notifications?limit=1000", "/api/dead-letters?limit=1000", "/api/clubs", "/healthz"} {
			req, _ := http.NewRequest("GET", c.base+path, nil)
			req.Header.Set("Authorization", "Bearer viewer-token")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			out = append(out, leaksIn("GET "+path, b)...)
		}
		return out
	}

	stop := start()
	// The user's data reaches their messages: it flows through logbook.
	if st := send(); st.Counts.Delivered == 0 {
		t.Fatalf("nothing delivered: %+v", st.Counts)
	}
	if got := leaksIn("delivered messages", takeDelivered()); len(got) != 3 {
		t.Fatalf("before forgetting, the messages carry %v, want the name, e-mail address and device token", got)
	}
	var f shred.Forgotten
	path := fmt.Sprintf("/api/users/%d/forget", id)
	if code := c.call("POST", path, "sender-token", "", nil, nil); code != http.StatusForbidden {
		t.Fatalf("forget with a sender's token: %d, want 403", code)
	}
	if code := c.call("POST", "/api/users/x/forget", "admin-token", "", nil, nil); code != http.StatusBadRequest {
		t.Fatalf("forget user x: %d, want 400", code)
	}
	// The command: bad usage exits 2; with the admin token it forgets.
	forgetCmd := func(token string, args ...string) (int, string) {
		var out, errOut bytes.Buffer
		getenv := func(k string) string {
			if k == "LOGBOOK_TOKEN" {
				return token
			}
			return ""
		}
		code := run(ctx, &env{stdout: &out, stderr: &errOut, getenv: getenv}, append([]string{"notify", "users", "forget"}, args...))
		return code, out.String() + errOut.String()
	}
	if code, out := forgetCmd("admin-token", "x", "--server", c.base); code != 2 {
		t.Fatalf("forget x: exit %d: %s", code, out)
	}
	if code, out := forgetCmd("", fmt.Sprint(id), "--server", c.base); code != 2 || !strings.Contains(out, "LOGBOOK_TOKEN") {
		t.Fatalf("forget without a token: exit %d: %s", code, out)
	}
	code, out := forgetCmd("admin-token", fmt.Sprint(id), "--server", c.base, "-o", "json")
	switch {
	case sealed && code != 0:
		t.Fatalf("logbook notify users forget: exit %d: %s", code, out)
	case sealed:
		if err := json.Unmarshal([]byte(out), &f); err != nil || f.KeyVersion != 1 || f.Position == 0 || !strings.HasPrefix(f.By, "admin token sha256:") {
			t.Fatalf("forget: %v %s", err, out)
		}
		// Again, through the API: the same answer.
		var again shred.Forgotten
		if code := c.call("POST", path, "admin-token", "", nil, &again); code != 200 || again.SubjectHash != f.SubjectHash || again.KeyVersion != 1 || again.Position != f.Position {
			t.Fatalf("forget again: %d %+v, first %+v", code, again, f)
		}
		// And through the admin page's API: user 2, by its subject.
		if code := c.call("POST", "/admin/api/forget", "admin-token", "", []byte(`{"subject":"user/x"}`), nil); code != http.StatusBadRequest {
			t.Fatalf("admin forget user/x: %d, want 400", code)
		}
		if code := c.call("POST", "/admin/api/forget", "admin-token", "", []byte(`{"subject":"user/2"}`), nil); code != http.StatusNoContent {
			t.Fatalf("admin forget user/2: %d, want 204", code)
		}
	case code != 1 || !strings.Contains(out, "501"):
		t.Fatalf("forget without a keyring: exit %d: %s, want 501", code, out)
	}
	leaks := apiLeaks()
	if sealed {
		// Nothing more goes to them, though the users' database still
		// holds them and a type they cannot opt out of is sent.
		st := send()
		if st.Counts.RefusedBy[string(notify.RefusedForgotten)] != 2 {
			t.Fatalf("a send after forgetting: %+v, want both forgotten users refused", st.Counts)
		}
		leaks = append(leaks, leaksIn("delivered messages", takeDelivered())...)
	}
	stop()
	leaks = append(leaks, scanFiles(t, dir, needles)...)

	// The users view rebuilt: a new snapshot of the users' database,
	// which still holds the user, on a new slot.
	if err := os.RemoveAll(filepath.Join(dir, "state", "users")); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		_, err := src.Pool.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot)
		if err == nil {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("drop the slot: %v", err)
		}
	}
	stop = start()
	if sealed {
		if st := send(); st.Counts.RefusedBy[string(notify.RefusedForgotten)] != 2 {
			t.Fatalf("a send after the view's rebuild: %+v, want both forgotten users refused", st.Counts)
		}
		leaks = append(leaks, leaksIn("delivered messages after the rebuild", takeDelivered())...)
	}
	leaks = append(leaks, apiLeaks()...)
	stop()
	leaks = append(leaks, scanFiles(t, dir, needles)...)

	if bus != nil {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		recs, err := kafkabus.ReadTopic(rctx, bus.Config, bus.Topic)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			t.Fatal("the topic is empty: the log was not published")
		}
		for _, r := range recs {
			b, _ := json.Marshal(r.Event)
			leaks = append(leaks, leaksIn(fmt.Sprintf("topic %s offset %d", bus.Topic, r.Offset), append(b, r.Event.Data...))...)
		}
	}

	// The audit event says who forgot whom, by the keyed hash only.
	store, err := pebblestore.Open(filepath.Join(dir, "data"), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	audit, err := store.ReadStream(ctx, shred.AuditStream, 1, 10)
	store.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !sealed {
		if len(leaks) == 0 {
			t.Fatal("the view kept in clear, yet the scans found nothing of the user: they cannot see a leak")
		}
		t.Logf("control, view in clear: %v", leaks)
		return
	}
	for _, l := range leaks {
		t.Errorf("after forgetting: %s", l)
	}
	mk, _ := shred.ParseMasterKey(master)
	// One audit event per user forgotten (the second through the admin
	// page), naming each by its keyed hash only.
	if len(audit) != 2 || audit[0].Type != shred.TypeSubjectForgotten || audit[1].Type != shred.TypeSubjectForgotten ||
		!bytes.Contains(audit[0].Data, []byte(shred.SubjectHashOf(mk, userscdc.Subject(id)))) ||
		!bytes.Contains(audit[1].Data, []byte(shred.SubjectHashOf(mk, userscdc.Subject(2)))) ||
		bytes.Contains(audit[0].Data, []byte(fmt.Sprint(id))) || !bytes.Contains(audit[1].Data, []byte("the admin page")) {
		t.Fatalf("audit stream: %+v", audit)
	}
}

// scanFiles names the needles found in any file under dir, read raw.
func scanFiles(t *testing.T, dir string, needles map[string][]byte) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		for what, n := range needles {
			if bytes.Contains(b, n) {
				out = append(out, what+" in "+rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
