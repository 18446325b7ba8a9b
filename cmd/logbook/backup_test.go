package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
)

// makeStore writes n single-event appends into a new store and closes it.
func makeStore(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	s, err := pebblestore.Open(dir, pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := s.Append(t.Context(), fmt.Sprintf("s-%d", i%3), eventstore.Any, []eventstore.NewEvent{{Type: "T", Tags: []string{"t"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

type verifyJSON struct {
	Head     uint64            `json:"head"`
	Events   uint64            `json:"events"`
	Streams  uint64            `json:"streams"`
	Problems []json.RawMessage `json:"problems"`
}

func TestBackupRestoreVerifyCommands(t *testing.T) {
	data := makeStore(t, 10)
	code, out, stderr := runCLI(t, "verify", "--data", data, "--json")
	var v verifyJSON
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Head != 10 || v.Events != 10 || v.Streams != 3 || v.Problems == nil || len(v.Problems) != 0 {
		t.Fatalf("verify: %d %s %s", code, out, stderr)
	}
	backupDir := filepath.Join(t.TempDir(), "backup")
	code, out, stderr = runCLI(t, "backup", "--data", data, "--out", backupDir, "--json")
	var b struct {
		Position uint64 `json:"position"`
		Dir      string `json:"dir"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil || b.Position != 10 || b.Dir != backupDir {
		t.Fatalf("backup: %d %s %s", code, out, stderr)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	if code, out, stderr := runCLI(t, "restore", "--from", backupDir, "--data", restored, "--json"); code != 0 || !strings.Contains(out, `"position":10`) {
		t.Fatalf("restore: %d %s %s", code, out, stderr)
	}
	if code, out, stderr := runCLI(t, "verify", "--data", restored); code != 0 || !strings.Contains(out, "head") {
		t.Fatalf("verify of the restored store: %d %s %s", code, out, stderr)
	}

	// A corrupt store: verify exits 1 and says what is wrong.
	db, err := pebble.Open(restored, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(append([]byte{'e'}, 0, 0, 0, 0, 0, 0, 0, 4), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, out, stderr = runCLI(t, "verify", "--data", restored, "--json")
	if code != 1 || json.Unmarshal([]byte(out), &v) != nil || len(v.Problems) == 0 || !strings.Contains(out, "position-gap") || !strings.Contains(stderr, "problem") {
		t.Fatalf("verify of a corrupt store: %d %s %s", code, out, stderr)
	}
	if code, out, _ := runCLI(t, "verify", "--data", restored); code != 1 || !strings.Contains(out, "position-gap at position 4") {
		t.Fatalf("verify's table of a corrupt store: %d %s", code, out)
	}

	// Bad input.
	notEmpty := t.TempDir()
	os.WriteFile(filepath.Join(notEmpty, "x"), nil, 0o644)
	missing := filepath.Join(t.TempDir(), "missing")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"backup", "--data", data}, 2, "give --out DIR"},
		{[]string{"backup", "--data", missing, "--out", t.TempDir()}, 1, "no such directory"},
		{[]string{"backup", "--data", t.TempDir(), "--out", filepath.Join(t.TempDir(), "b")}, 1, "not a logbook event store"},
		{[]string{"backup", "--data", data, "--out", notEmpty}, 1, "directory not empty"},
		{[]string{"backup", "--server", "http://127.0.0.1:1", "--out", "x"}, 2, "give neither --data nor --out"},
		{[]string{"backup", "--server", "http://127.0.0.1:1"}, 2, "--server needs --token"},
		{[]string{"restore", "--from", backupDir}, 2, `required flag(s) "data" not set`},
		{[]string{"restore", "--from", backupDir, "--data", notEmpty}, 1, "restore only into an empty or new directory"},
		{[]string{"restore", "--from", data, "--data", filepath.Join(t.TempDir(), "r")}, 1, "not a logbook backup"},
		{[]string{"restore", "--from", missing, "--data", filepath.Join(t.TempDir(), "r")}, 1, "no such directory"},
		{[]string{"verify"}, 2, "give --data DIR or --store"},
		{[]string{"verify", "--store", "http://x"}, 2, "want a postgres:// URL"},
		{[]string{"verify", "--data", data, "--store", "postgres://x/y"}, 2, "none of the others can be"},
		{[]string{"verify", "--data", missing}, 1, "no such directory"},
		{[]string{"verify", "--data", notEmpty}, 1, "not a logbook event store"},
	} {
		code, out, stderr := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d (want %d), stderr %q (want %q), stdout %q", c.args, code, c.code, stderr, c.msg, out)
		}
	}

	// A store a process has open is locked: backup says to go through
	// its server.
	s, err := pebblestore.Open(data, pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if code, _, stderr := runCLI(t, "backup", "--data", data, "--out", filepath.Join(t.TempDir(), "b")); code != 1 || !strings.Contains(stderr, "--server URL") {
		t.Errorf("backup of a store in use: %d %s", code, stderr)
	}
}

// TestBackupThroughServer asks a running flights server for a backup of
// its store: only a token of role admin may; the backup lands under the
// server's --backup-dir, restores and verifies at the position it gave.
func TestBackupThroughServer(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer,planner-token:planner,admin-token:admin")
	root := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	url := startFlightsNode(t, ctx, cancel, "--backup-dir", root)
	for i := range 5 {
		req, _ := http.NewRequest(http.MethodPost, url+"/api/airplanes", strings.NewReader(fmt.Sprintf(`{"registration":"D-AB%02d","type":"A320","min_ground_time":30}`, i)))
		req.Header.Set("Authorization", "Bearer planner-token")
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode >= 300 {
			t.Fatalf("create airplane: %s", res.Status)
		}
	}
	code, out, stderr := runCLI(t, "backup", "--server", url, "--token", "admin-token", "--json")
	var b struct {
		Position uint64 `json:"position"`
		Dir      string `json:"dir"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil || b.Position < 5 || filepath.Dir(b.Dir) != root {
		t.Fatalf("backup through the server: %d %s %s", code, out, stderr)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	if code, out, stderr := runCLI(t, "restore", "--from", b.Dir, "--data", restored, "--json"); code != 0 || !strings.Contains(out, fmt.Sprintf(`"position":%d`, b.Position)) {
		t.Fatalf("restore: %d %s %s", code, out, stderr)
	}
	if code, _, stderr := runCLI(t, "backup", "--server", url, "--token", "viewer-token"); code != 1 || !strings.Contains(stderr, "403") {
		t.Errorf("backup with a viewer's token: %d %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "backup", "--server", url, "--token", "wrong"); code != 1 || !strings.Contains(stderr, "401") {
		t.Errorf("backup with a wrong token: %d %s", code, stderr)
	}
	for _, c := range []struct {
		method, body string
		want         int
	}{
		{http.MethodGet, "", http.StatusMethodNotAllowed},
		{http.MethodPost, `{"dir":"/etc"}`, http.StatusBadRequest},
	} {
		req, _ := http.NewRequest(c.method, url+"/admin/backup", strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer admin-token")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.want || res.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s with body %q: %s %s, want %d problem+json", c.method, c.body, res.Status, res.Header.Get("Content-Type"), c.want)
		}
	}
	// A server without --backup-dir says how to turn backups on.
	ctx2, cancel2 := context.WithCancel(context.Background())
	url2 := startFlightsNode(t, ctx2, cancel2)
	if code, _, stderr := runCLI(t, "backup", "--server", url2, "--token", "admin-token"); code != 1 || !strings.Contains(stderr, "--backup-dir") {
		t.Errorf("backup from a server without --backup-dir: %d %s", code, stderr)
	}
}

// TestTicketsServeBackup: tickets serve takes backups too.
func TestTicketsServeBackup(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "admin-token:admin")
	root := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &env{stdout: &syncBuffer{}, stderr: &stderr, getenv: os.Getenv}, []string{"tickets", "serve", "--data", t.TempDir(), "--tickets-per-sport", "5",
			"--addr", "127.0.0.1:0", "--log-format", "json", "--backup-dir", root})
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("tickets serve exited %d: %s", code, stderr.String())
		}
	}()
	var url string
	for deadline := time.Now().Add(30 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, line := range strings.Split(stderr.String(), "\n") {
			var l struct{ Msg, URL string }
			if json.Unmarshal([]byte(line), &l) == nil && strings.HasSuffix(l.Msg, "serving") && l.URL != "" {
				url = l.URL
			}
		}
	}
	if url == "" {
		t.Fatalf("tickets serve is not serving: %s", stderr.String())
	}
	code, out, errs := runCLI(t, "backup", "--server", url, "--token", "admin-token", "--json")
	var b struct {
		Dir string `json:"dir"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil || filepath.Dir(b.Dir) != root {
		t.Fatalf("backup: %d %s %s", code, out, errs)
	}
	if code, out, errs := runCLI(t, "verify", "--data", filepath.Join(b.Dir, "store")); code != 0 {
		t.Fatalf("verify of the backup: %d %s %s", code, out, errs)
	}
}
