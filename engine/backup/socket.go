package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/logbook/logbook/engine/problem"
)

// SocketFile is the name of the unix socket a serving process listens on
// in its store's directory, so that `logbook backup --data DIR --out OUT`
// can ask the process that holds DIR's lock for a backup into OUT.
//
// The socket is mode 0600, owned by the server's user, inside the store's
// directory: whoever may connect to it may already read and write the
// store's files, so the socket grants nothing that the directory's
// permissions do not. It asks no token. OUT is written by the server's
// user, like the store itself.
const SocketFile = "backup.sock"

// socketRequest is the body of POST /backup on the socket.
type socketRequest struct {
	// Out is the backup's directory: an absolute path, new or empty.
	Out string `json:"out"`
}

// BackupInto takes a backup into out, an absolute path to a new or empty
// directory, as Backup does under Root. One backup runs at a time, shared
// with Backup.
func (s *Service) BackupInto(out string) (*Result, error) {
	if !filepath.IsAbs(out) {
		return nil, fmt.Errorf("backup: %q is not an absolute path", out)
	}
	if !s.running.TryLock() {
		return nil, errBusy
	}
	defer s.running.Unlock()
	_, statErr := os.Stat(out)
	m, err := Take(s.Store, s.Views, out)
	if err != nil {
		if errors.Is(statErr, os.ErrNotExist) {
			_ = os.Remove(out)
		}
		return nil, err
	}
	return &Result{Dir: out, Manifest: *m}, nil
}

// ListenSocket serves BackupInto on SocketFile in dir, the store's
// directory, until the returned stop is called; stop removes the socket.
//
// The caller must hold the store open: Pebble's lock on dir then proves
// that no other process serves it, so a socket found at the path is a
// stale one, left by a process that died, and is replaced. The socket is
// bound in a new directory of mode 0700 and moved into place only once it
// is mode 0600, so that it is never reachable with wider permissions.
func (s *Service) ListenSocket(dir string, log *slog.Logger) (stop func(), err error) {
	if log == nil {
		log = slog.Default()
	}
	path := filepath.Join(dir, SocketFile)
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("backup: %s exists and is not a socket; remove it", path)
		}
		// Stale: the rename below replaces it.
		log.Info("replacing a stale backup socket", "path", path)
	}
	tmp, err := os.MkdirTemp(dir, ".sock")
	if err != nil {
		return nil, fmt.Errorf("backup: socket: %w", err)
	}
	defer os.RemoveAll(tmp)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(tmp, "s"), Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("backup: socket in %s (a unix socket's path is limited to about 100 bytes): %w", dir, err)
	}
	l.SetUnlinkOnClose(false)
	if err := os.Chmod(filepath.Join(tmp, "s"), 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("backup: socket: %w", err)
	}
	if err := os.Rename(filepath.Join(tmp, "s"), path); err != nil {
		l.Close()
		return nil, fmt.Errorf("backup: socket: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /backup", func(w http.ResponseWriter, r *http.Request) {
		var req socketRequest
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			problem.Error(w, http.StatusBadRequest, "want {\"out\": \"/absolute/path\"}: "+err.Error())
			return
		}
		if req.Out == "" || !filepath.IsAbs(req.Out) {
			problem.Error(w, http.StatusBadRequest, fmt.Sprintf("out %q: want an absolute path", req.Out))
			return
		}
		res, err := s.BackupInto(filepath.Clean(req.Out))
		switch {
		case errors.Is(err, errBusy):
			problem.Error(w, http.StatusConflict, "a backup is already running; try again when it has finished")
			return
		case errors.Is(err, ErrNotEmpty):
			problem.Error(w, http.StatusBadRequest, err.Error())
			return
		case err != nil:
			problem.Error(w, http.StatusInternalServerError, err.Error())
			return
		}
		log.Info("backup taken", "dir", res.Dir, "position", res.Position)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(res)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 16 << 10}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	return func() {
		// A backup under way finishes first: Shutdown waits for it.
		_ = srv.Shutdown(context.Background())
		<-done
		_ = os.Remove(path)
	}, nil
}

// ErrNoServer is AskSocket's error when no process serves dir's socket:
// there is none, or a stale one that nothing listens on.
var ErrNoServer = errors.New("backup: no server listens on the store's socket")

// AskSocket asks the process serving the store in dir, through its
// SocketFile, for a backup into out (made absolute here, in the caller's
// working directory).
func AskSocket(ctx context.Context, dir, out string) (*Result, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, SocketFile)
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoServer
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	defer client.CloseIdleConnections()
	body, _ := json.Marshal(socketRequest{Out: abs})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://logbook/backup", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoServer
	}
	if err != nil {
		return nil, fmt.Errorf("backup: %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusCreated {
		var p struct {
			Detail string `json:"detail"`
		}
		if json.Unmarshal(b, &p) == nil && p.Detail != "" {
			return nil, fmt.Errorf("the server of %s answered %s: %s", dir, resp.Status, p.Detail)
		}
		return nil, fmt.Errorf("the server of %s answered %s", dir, resp.Status)
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("the server's answer: %w", err)
	}
	return &res, nil
}
