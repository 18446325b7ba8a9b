package backup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
			if strings.HasPrefix(e.Name(), ".") {
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

// failingView leaves a file in the backup's directory, beside the
// store and views Take cleans up itself (as a failed manifest write
// would), then fails: the backup fails with a non-empty directory.
type failingView struct{}

func (failingView) Backup(dir string) (uint64, error) {
	out := filepath.Dir(filepath.Dir(dir)) // dir is OUT/views/NAME
	if err := os.WriteFile(filepath.Join(out, "part"), []byte("x"), 0o600); err != nil {
		return 0, err
	}
	return 0, errors.New("the view failed")
}

// BackupInto refuses a target inside the store's directory (the next
// backup would copy this one, and a restore of the directory bring it
// along), removes a directory it made for a backup that failed with
// whatever the failure left in it, and writes a backup only its owner
// may read; the socket's temporary path is no longer than the socket's.
func TestBackupIntoTargets(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	store, err := pebblestore.Open(data, pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s := &Service{Store: store, Dir: data}
	for _, out := range []string{data, filepath.Join(data, "b"), filepath.Join(data, "x", "..", "b", "c")} {
		_, err := s.BackupInto(out)
		if !errors.Is(err, ErrInsideStore) || !strings.Contains(err.Error(), "inside the store's directory") {
			t.Errorf("BackupInto(%s): %v, want ErrInsideStore", out, err)
		}
	}
	// Through a symbolic link to the store's directory too.
	link := filepath.Join(root, "link")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BackupInto(filepath.Join(link, "b")); !errors.Is(err, ErrInsideStore) {
		t.Errorf("BackupInto through a link into the store: %v, want ErrInsideStore", err)
	}
	if _, err := os.Stat(filepath.Join(data, "b")); !os.IsNotExist(err) {
		t.Errorf("a refused backup made its directory: %v", err)
	}
	// The server-named backups of --backup-dir are refused inside the
	// store's directory too.
	inside := &Service{Store: store, Dir: data, Root: filepath.Join(data, "backups")}
	if _, err := inside.Backup(); !errors.Is(err, ErrInsideStore) {
		t.Errorf("Backup with its root inside the store: %v, want ErrInsideStore", err)
	}
	// An existing, empty target that others may read is made private.
	open := filepath.Join(root, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BackupInto(open); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(open); err != nil {
		t.Error(err)
	} else if st.Mode().Perm() != 0o700 {
		t.Errorf("an existing target after the backup: mode %v, want 0700", st.Mode().Perm())
	}
	// A sibling whose name starts like the store's is outside it.
	res, err := s.BackupInto(data + "-backup")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(res.Dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("backup directory: %v %v, want mode 0700", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(res.Dir, ManifestFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("manifest: %v %v, want mode 0600", fi, err)
	}

	failing := &Service{Store: store, Dir: data, Views: map[string]View{"v": failingView{}}}
	out := filepath.Join(root, "failed")
	if _, err := failing.BackupInto(out); err == nil || !strings.Contains(err.Error(), "the view failed") {
		t.Fatalf("a failing view: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed backup left its directory: %v", err)
	}

	// The socket's temporary directory: DIR/.sXXXXXX/s is no longer
	// than DIR/backup.sock.
	tmp, err := mkdirShort(data)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(tmp)
	if len(filepath.Join(tmp, "s")) > len(filepath.Join(data, SocketFile)) {
		t.Errorf("temporary socket path %s is longer than %s", filepath.Join(tmp, "s"), filepath.Join(data, SocketFile))
	}
}

// A client that sends a request's header and then its body slowly does
// not keep stop from returning: the handler gives up on the body after
// socketReadTimeout, and stop closes what is left after
// socketShutdownGrace. Each bound alone suffices.
func TestSocketSlowClientDoesNotHoldStop(t *testing.T) {
	for _, c := range []struct {
		name        string
		read, grace time.Duration
	}{
		{"read timeout", 200 * time.Millisecond, time.Hour},
		{"shutdown grace", time.Hour, 200 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func(r, g time.Duration) { socketReadTimeout, socketShutdownGrace = r, g }(socketReadTimeout, socketShutdownGrace)
			socketReadTimeout, socketShutdownGrace = c.read, c.grace
			data := filepath.Join(t.TempDir(), "data")
			store, err := pebblestore.Open(data, pebblestore.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			s := &Service{Store: store}
			stop, err := s.ListenSocket(data, nil)
			if err != nil {
				t.Fatal(err)
			}
			conn, err := net.Dial("unix", filepath.Join(data, SocketFile))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			body := `{"out": "/nowhere"}`
			fmt.Fprintf(conn, "POST /backup HTTP/1.1\r\nHost: logbook\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:3])
			time.Sleep(100 * time.Millisecond) // the handler is reading the body
			stopped := make(chan struct{})
			go func() { stop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(5 * time.Second):
				t.Fatal("stop did not return while a client sends its body slowly")
			}
		})
	}
}
