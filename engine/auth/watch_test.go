//go:build unix

package auth

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a log destination safe for the watcher's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatchRevokes: editing the token file revokes a token and adds
// another without a restart; a file that does not parse, or that holds no
// token, leaves the tokens as they were and says why in the log, without
// any token in it; SIGHUP reloads too.
func TestWatchRevokes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	write := func(s string) {
		// As an editor or a configuration manager: a new file renamed
		// over the old.
		tmp := filepath.Join(dir, ".tokens.tmp")
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write("old-editor-token editor\nkept-viewer-token viewer\n")
	toks, err := Load(file, testRoles)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := toks.Watch(ctx, file, slog.New(slog.NewTextHandler(&logs, nil)), WatchOptions{Settle: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	has := func(tok string) bool { _, ok := toks.Lookup(tok); return ok }

	write("new-editor-token editor\nkept-viewer-token viewer\n" + Digest("digest-admin-token") + " admin\n")
	eventually(t, "the edited file is loaded", func() bool { return has("new-editor-token") })
	if has("old-editor-token") {
		t.Fatal("a token removed from the file still authenticates")
	}
	if !has("kept-viewer-token") || !has("digest-admin-token") {
		t.Fatal("a token kept in the file no longer authenticates")
	}

	write("new-editor-token editor\nsecret-in-a-bad-line god\n")
	eventually(t, "the refusal is logged", func() bool { return strings.Contains(logs.String(), "not reloaded") })
	if !has("new-editor-token") || !has("digest-admin-token") {
		t.Fatal("a file that does not parse replaced the tokens")
	}
	if strings.Contains(logs.String(), "secret-in-a-bad-line") || strings.Contains(logs.String(), "new-editor-token") {
		t.Fatalf("the log shows a token:\n%s", logs.String())
	}

	write("# nothing\n")
	eventually(t, "the empty file is refused", func() bool { return strings.Contains(logs.String(), "holds no token") })
	if !has("new-editor-token") {
		t.Fatal("an empty file revoked every token")
	}

}

// TestSIGHUPReloads: with no notice of changes from the system (and no
// polling within the test), SIGHUP reloads the file.
func TestSIGHUPReloads(t *testing.T) {
	systemWatch = false
	defer func() { systemWatch = true }()
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("before-hup-token editor\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := Load(file, testRoles)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := toks.Watch(ctx, file, nil, WatchOptions{Poll: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("after-hup-token editor\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if _, ok := toks.Lookup("after-hup-token"); ok {
		t.Fatal("reloaded before SIGHUP: the test does not test SIGHUP")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	has := func(tok string) bool { _, ok := toks.Lookup(tok); return ok }
	eventually(t, "SIGHUP reloads", func() bool { return has("after-hup-token") && !has("before-hup-token") })
}
