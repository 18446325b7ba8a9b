package backup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logbook/logbook/engine/eventstore/pebblestore"
)

// The socket: one backup at a time (shared with the HTTP service), an
// absolute and empty target, a stale socket replaced, a file that is not
// a socket left alone, the socket removed by stop.
func TestSocket(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	store, err := pebblestore.Open(data, pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s := &Service{Store: store}

	if _, err := AskSocket(t.Context(), data, filepath.Join(root, "b0")); err != ErrNoServer {
		t.Fatalf("no socket: %v, want ErrNoServer", err)
	}
	path := filepath.Join(data, SocketFile)
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListenSocket(data, nil); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("a regular file at the socket's path: %v", err)
	}
	os.Remove(path)

	stop, err := s.ListenSocket(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket %v %v", fi, err)
	}
	if entries, _ := os.ReadDir(data); len(entries) == 0 || func() bool {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".sock") {
				return true
			}
		}
		return false
	}() {
		t.Fatalf("the socket's temporary directory is left in %s", data)
	}
	res, err := AskSocket(t.Context(), data, filepath.Join(root, "b1"))
	if err != nil || res.Dir != filepath.Join(root, "b1") {
		t.Fatalf("backup through the socket: %+v %v", res, err)
	}
	if _, err := ReadManifest(res.Dir); err != nil {
		t.Fatal(err)
	}
	if _, err := AskSocket(t.Context(), data, res.Dir); err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("backup into a full directory: %v", err)
	}
	s.running.Lock()
	_, err = AskSocket(t.Context(), data, filepath.Join(root, "b2"))
	s.running.Unlock()
	if err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("backup while one runs: %v, want 409", err)
	}
	if _, err := os.Stat(filepath.Join(root, "b2")); !os.IsNotExist(err) {
		t.Fatalf("a refused backup made its directory: %v", err)
	}
	if _, err := s.BackupInto("relative"); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("relative target: %v", err)
	}
	stop()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("socket after stop: %v", err)
	}

	// A stale socket (its process died without removing it): nothing
	// listens, the client says so, and a new server replaces it.
	stop, err = s.ListenSocket(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".keep"); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := os.Rename(path+".keep", path); err != nil {
		t.Fatal(err)
	}
	if _, err := AskSocket(context.Background(), data, filepath.Join(root, "b3")); err != ErrNoServer {
		t.Fatalf("stale socket: %v, want ErrNoServer", err)
	}
	stop, err = s.ListenSocket(data, nil)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	defer stop()
	if _, err := AskSocket(t.Context(), data, filepath.Join(root, "b3")); err != nil {
		t.Fatal(err)
	}
}
