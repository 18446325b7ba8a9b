package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A token file may give a role of any service the binary serves (one
// file serves every command), and a role no service declares is refused
// when the tokens load, naming the roles there are.
func TestTokenFileTakesEveryServiceRole(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	lines := "# one token per role\n"
	for _, role := range []string{"viewer", "planner", "booker", "sender", "writer", "schema-admin", "admin"} {
		lines += role + "-token-0123 " + role + "\n"
	}
	if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := loadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	if tokens.Len() != 7 {
		t.Fatalf("%d tokens loaded, want 7", tokens.Len())
	}
	for _, role := range []string{"viewer", "planner", "booker", "sender", "writer", "schema-admin", "admin"} {
		if got, ok := tokens.Lookup(role + "-token-0123"); !ok || string(got) != role {
			t.Errorf("token of %s: role %q %v", role, got, ok)
		}
	}
	if err := os.WriteFile(file, []byte("god-token-0123 god\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = loadTokens(file)
	if err == nil || !strings.Contains(err.Error(), `unknown role "god"`) || !strings.Contains(err.Error(), "planner") || !strings.Contains(err.Error(), "writer") {
		t.Fatalf("an unknown role: %v", err)
	}
}

// A role is its service's: kv's writer may not plan flights, and a
// planner may not write kv (TestKVServe). Here the flights node refuses a
// writer's command and takes a planner's.
func TestWriterCannotPlanFlights(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "writer-token:writer,planner-token:planner")
	ctx, cancel := context.WithCancel(context.Background())
	url := startFlightsNode(t, ctx, cancel)
	post := func(token string) int {
		req, _ := http.NewRequest("POST", url+"/api/rotations", strings.NewReader(`{"id":"r1"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		c := http.Client{Timeout: 10 * time.Second}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := post("writer-token"); code != http.StatusForbidden {
		t.Errorf("a kv writer created a rotation: %d, want 403", code)
	}
	if code := post("planner-token"); code != http.StatusCreated {
		t.Errorf("a planner creating a rotation: %d, want 201", code)
	}
}
