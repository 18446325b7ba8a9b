package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/logbook/logbook/engine/backup"
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

// TestBackupDataWhileServing: logbook backup --data DIR --out OUT on a
// store a flights server holds open and appends to under load. The
// server takes the backup, asked through the socket in DIR; restored, the
// log holds every append acknowledged before the backup began, every
// acknowledged append at or below the backup's position whole, none
// above it, and verifies.
func TestBackupDataWhileServing(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "planner-token:planner")
	data := filepath.Join(t.TempDir(), "data")
	// A stale socket, as a killed server leaves: the server replaces it.
	os.MkdirAll(data, 0o755)
	if l, err := net.Listen("unix", filepath.Join(data, backup.SocketFile)); err != nil {
		t.Fatal(err)
	} else {
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		l.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	url := startFlightsNode(t, ctx, cancel, "--data", data)
	sock := filepath.Join(data, backup.SocketFile)
	if fi, err := os.Lstat(sock); err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the server's socket: %v %v", fi, err)
	}

	var (
		mu           sync.Mutex
		acks         []loadAck
		backupCalled bool
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				reg := fmt.Sprintf("W%d-%d", w, i)
				req, _ := http.NewRequest(http.MethodPost, url+"/api/airplanes", strings.NewReader(fmt.Sprintf(`{"registration":%q,"type":"A320","min_ground_time":30}`, reg)))
				req.Header.Set("Authorization", "Bearer planner-token")
				req.Header.Set("Content-Type", "application/json")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				res.Body.Close()
				pos, err := strconv.ParseUint(res.Header.Get("X-Logbook-Position"), 10, 64)
				if res.StatusCode != http.StatusCreated || err != nil {
					t.Errorf("create airplane %s: %s, position %q", reg, res.Status, res.Header.Get("X-Logbook-Position"))
					return
				}
				mu.Lock()
				acks = append(acks, loadAck{stream: "airplane-" + reg, first: pos, before: !backupCalled})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	backupCalled = true
	mu.Unlock()
	// --out relative to the client's working directory: made absolute.
	t.Chdir(t.TempDir())
	code, out, stderr := runCLI(t, "backup", "--data", data, "--out", "backup", "--json")
	time.Sleep(200 * time.Millisecond) // appends go on after the backup
	close(stop)
	wg.Wait()
	var b struct {
		Position uint64 `json:"position"`
		Dir      string `json:"dir"`
	}
	wd, _ := os.Getwd()
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil || b.Position == 0 || b.Dir != filepath.Join(wd, "backup") {
		t.Fatalf("backup --data of a serving store: %d %s %s", code, out, stderr)
	}
	// A second backup into the same directory: not empty.
	if code, _, stderr := runCLI(t, "backup", "--data", data, "--out", "backup"); code != 1 || !strings.Contains(stderr, "not empty") {
		t.Errorf("backup into a directory that is not empty: %d %s", code, stderr)
	}
	// Into the store's own directory: refused by the server.
	if code, _, stderr := runCLI(t, "backup", "--data", data, "--out", filepath.Join(data, "inner")); code != 1 || !strings.Contains(stderr, "inside the store's directory") {
		t.Errorf("backup into the store's directory: %d %s", code, stderr)
	}
	if t.Failed() {
		return
	}

	restored := filepath.Join(t.TempDir(), "restored")
	if code, out, stderr := runCLI(t, "restore", "--from", b.Dir, "--data", restored, "--json"); code != 0 || !strings.Contains(out, fmt.Sprintf(`"position":%d`, b.Position)) {
		t.Fatalf("restore: %d %s %s", code, out, stderr)
	}
	if code, out, stderr := runCLI(t, "verify", "--data", restored, "--json"); code != 0 || !strings.Contains(out, fmt.Sprintf(`"head":%d`, b.Position)) {
		t.Fatalf("verify of the restored store: %d %s %s", code, out, stderr)
	}
	rs, err := pebblestore.Open(restored, pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	checkBackupUnderLoad(t, logByPosition(t, rs), b.Position, acks, false)
}

// TestBackupSocketGone: the server removes its socket when it stops;
// backup --data then backs up the stopped store itself.
func TestBackupSocketGone(t *testing.T) {
	t.Setenv("LOGBOOK_TOKENS", "viewer-token:viewer")
	data := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithCancel(context.Background())
	startFlightsNode(t, ctx, cancel, "--data", data)
	sock := filepath.Join(data, backup.SocketFile)
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("no socket while serving: %v", err)
	}
	cancel()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Lstat(sock); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("socket left after shutdown")
		}
	}
	// The socket goes just before the store closes: wait for its lock.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, out, stderr := runCLI(t, "backup", "--data", data, "--out", filepath.Join(t.TempDir(), "b"), "--json")
		if code == 0 && strings.Contains(out, `"position"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backup of the stopped store: %d %s %s", code, out, stderr)
		}
	}
	// Into the store's own directory: refused by the command too.
	if code, _, stderr := runCLI(t, "backup", "--data", data, "--out", filepath.Join(data, "inner")); code != 1 || !strings.Contains(stderr, "inside the store's directory") {
		t.Errorf("backup of the stopped store into its directory: %d %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(data, "inner")); !os.IsNotExist(err) {
		t.Errorf("a refused backup made its directory: %v", err)
	}
}
