package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/internal/testenv"
)

// The flights server mounts the admin API over its store: a viewer reads
// the streams a command wrote and the validation view's position, may not
// delete, and the admin page is served at /admin.
func TestFlightsServesTheAdminAPI(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer,planner-token:planner,admin-token:admin")
	ctx, cancel := context.WithCancel(context.Background())
	url := startFlightsNode(t, ctx, cancel)
	call := caller(t, url)
	if code, body := call("POST", "/api/rotations", "planner-token", `{"id":"r1"}`); code != http.StatusCreated {
		t.Fatalf("creating a rotation: %d %s", code, body)
	}
	code, body := call("GET", "/admin/api/streams", "viewer-token", "")
	var page struct {
		Streams []struct {
			ID      string `json:"id"`
			Version uint64 `json:"version"`
		} `json:"streams"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &page) != nil || len(page.Streams) != 1 || page.Streams[0].Version != 1 || !strings.Contains(page.Streams[0].ID, "r1") {
		t.Fatalf("streams: %d %s", code, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body = call("GET", "/admin/api/positions", "viewer-token", "")
		if code == http.StatusOK && strings.Contains(body, `"name":"validation","position":1,`) && strings.Contains(body, `"head":1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("positions: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := call("DELETE", "/admin/api/streams/"+page.Streams[0].ID, "viewer-token", ""); code != http.StatusForbidden {
		t.Errorf("a viewer's delete: %d %s", code, body)
	}
	// The embedded store deletes and truncates: an admin is offered both
	// (found through the opened store's and the metrics' Unwrap).
	if code, body := call("GET", "/admin/api/me", "admin-token", ""); code != http.StatusOK || !strings.Contains(body, `"role":"admin"`) ||
		!strings.Contains(body, `"delete":true`) || !strings.Contains(body, `"truncate":true`) {
		t.Errorf("an admin's /me: %d %s", code, body)
	}
	if code, body := call("GET", "/admin", "viewer-token", ""); code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Errorf("the admin page: %d %.200s", code, body)
	}
}

// caller calls the server at url: method, path, token, body → status, body.
func caller(t *testing.T, url string) func(method, path, token, body string) (int, string) {
	c := http.Client{Timeout: 10 * time.Second}
	return func(method, path, token, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
}

// A flights server with a bus shows its Kafka publisher on the admin
// API: running, and caught up with the head once it has published.
func TestAdminShowsThePublisher(t *testing.T) {
	brokers := testenv.Kafka(t)
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer,planner-token:planner")
	var b [4]byte
	_, _ = rand.Read(b[:])
	topic := "logbook-admin-" + hex.EncodeToString(b[:])
	tctx, tcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer tcancel()
	if err := kafkabus.EnsureTopic(tctx, kafkabus.Config{Brokers: brokers}, topic, 1, -1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
		if err != nil {
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteTopic(ctx, topic)
	})
	ctx, cancel := context.WithCancel(context.Background())
	url := startFlightsNode(t, ctx, cancel, "--bus", "kafka://"+strings.Join(brokers, ",")+"/"+topic)
	call := caller(t, url)
	for _, id := range []string{"r1", "r2", "r3"} {
		if code, body := call("POST", "/api/rotations", "planner-token", `{"id":"`+id+`"}`); code != http.StatusCreated {
			t.Fatalf("creating a rotation: %d %s", code, body)
		}
	}
	var p struct {
		Head       uint64 `json:"head"`
		Publishers []struct {
			Topic     string `json:"topic"`
			Running   bool   `json:"running"`
			Position  uint64 `json:"position"`
			Lag       uint64 `json:"lag"`
			Published uint64 `json:"published"`
		} `json:"publishers"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := call("GET", "/admin/api/positions", "viewer-token", "")
		if code != http.StatusOK || json.Unmarshal([]byte(body), &p) != nil {
			t.Fatalf("positions: %d %s", code, body)
		}
		if len(p.Publishers) == 1 && p.Head == 3 && p.Publishers[0].Position == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the publisher does not reach the head: %s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if pub := p.Publishers[0]; pub.Topic != topic || !pub.Running || pub.Lag != 0 || pub.Published != 3 {
		t.Fatalf("publisher %+v", pub)
	}
}

// A read replica (--read-only on a shared store) browses but never
// removes: its admin API offers no delete or truncate, while a write
// node on the same PostgreSQL store offers both.
func TestReadReplicaAdminDoesNotRemove(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer,planner-token:planner,admin-token:admin")
	pgURL, _ := testenv.SchemaURL(t)
	ctx, cancel := context.WithCancel(context.Background())
	writer := startFlightsNode(t, ctx, cancel, "--store", pgURL)
	if code, body := caller(t, writer)("POST", "/api/rotations", "planner-token", `{"id":"r1"}`); code != http.StatusCreated {
		t.Fatalf("creating a rotation: %d %s", code, body)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	replica := startFlightsNode(t, rctx, rcancel, "--store", pgURL, "--read-only")
	for _, c := range []struct {
		url    string
		offers bool
	}{{writer, true}, {replica, false}} {
		code, body := caller(t, c.url)("GET", "/admin/api/me", "admin-token", "")
		want := fmt.Sprintf(`"delete":%v`, c.offers)
		if code != http.StatusOK || !strings.Contains(body, want) || !strings.Contains(body, fmt.Sprintf(`"truncate":%v`, c.offers)) {
			t.Errorf("%s: an admin's /me: %d %s, want %s", c.url, code, body, want)
		}
	}
	code, body := caller(t, replica)("GET", "/admin/api/streams", "viewer-token", "")
	var page struct {
		Streams []struct{ ID string } `json:"streams"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &page) != nil || len(page.Streams) != 1 {
		t.Fatalf("the replica's streams: %d %s", code, body)
	}
	if code, body := caller(t, replica)("DELETE", "/admin/api/streams/"+page.Streams[0].ID, "admin-token", ""); code < 400 {
		t.Errorf("an admin's delete through the replica: %d %s", code, body)
	}
	if code, _ := caller(t, writer)("GET", "/admin/api/streams/"+page.Streams[0].ID, "viewer-token", ""); code != http.StatusOK {
		t.Errorf("the stream after the replica's refused delete: %d", code)
	}
}
