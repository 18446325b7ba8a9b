package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The flights server mounts the admin API over its store: a viewer reads
// the streams a command wrote and the validation view's position, may not
// delete, and the admin page is served at /admin.
func TestFlightsServesTheAdminAPI(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer,planner-token:planner,admin-token:admin")
	ctx, cancel := context.WithCancel(context.Background())
	url := startFlightsNode(t, ctx, cancel)
	c := http.Client{Timeout: 10 * time.Second}
	call := func(method, path, token, body string) (int, string) {
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
	if code, body := call("GET", "/admin/api/me", "admin-token", ""); code != http.StatusOK || !strings.Contains(body, `"role":"admin"`) {
		t.Errorf("an admin's /me: %d %s", code, body)
	}
	if code, body := call("GET", "/admin", "viewer-token", ""); code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Errorf("the admin page: %d %.200s", code, body)
	}
}
