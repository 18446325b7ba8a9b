package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
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
	"strings"
	"sync"
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
// with Backup. out may not lie inside the store's own directory (Dir,
// when set). A directory it made for a backup that failed
// is removed, with whatever the failure left in it.
func (s *Service) BackupInto(out string) (*Result, error) {
	if !filepath.IsAbs(out) {
		return nil, fmt.Errorf("backup: %q is not an absolute path", out)
	}
	out = filepath.Clean(out)
	if s.Dir != "" && within(out, s.Dir) {
		return nil, fmt.Errorf("%w: %s is inside the store's directory %s: give a directory outside it", ErrInsideStore, out, s.Dir)
	}
	if !s.running.TryLock() {
		return nil, errBusy
	}
	defer s.running.Unlock()
	_, statErr := os.Stat(out)
	m, err := Take(s.Store, s.Views, out)
	if err != nil {
		if errors.Is(statErr, os.ErrNotExist) {
			_ = os.RemoveAll(out)
		}
		return nil, err
	}
	return &Result{Dir: out, Manifest: *m}, nil
}

// ErrInsideStore is BackupInto's error for a target inside the store's
// own directory: the backup would copy itself into the next one, and a
// restore of the store's directory would take it along.
var ErrInsideStore = errors.New("backup: target inside the store's directory")

// within says whether path is dir or lies under it, symbolic links of
// either resolved as far as they exist.
func within(path, dir string) bool {
	resolve := func(p string) string {
		// The longest existing prefix is resolved; the rest is appended.
		rest := ""
		for {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				return filepath.Join(r, rest)
			}
			parent := filepath.Dir(p)
			if parent == p {
				return filepath.Join(p, rest)
			}
			rest = filepath.Join(filepath.Base(p), rest)
			p = parent
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(resolve(abs), resolve(path))
	return err == nil && (rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))))
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
	// The temporary directory's path (DIR/.sXXXXXX/s) is no longer than
	// the socket's (DIR/backup.sock): a unix socket's path is limited to
	// about 100 bytes, and the bind should fail only where the socket
	// could not be anyway.
	tmp, err := mkdirShort(dir)
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
	if s.Dir == "" {
		s.Dir = dir
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /backup", func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		// The body (a short JSON object) must arrive within
		// socketReadTimeout: a client that sends it slowly does not hold
		// the handler. The backup itself has no deadline.
		_ = rc.SetReadDeadline(time.Now().Add(socketReadTimeout))
		var req socketRequest
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			// The deadline stays: the server reads no further.
			w.Header().Set("Connection", "close")
			problem.Error(w, http.StatusBadRequest, "want {\"out\": \"/absolute/path\"}: "+err.Error())
			return
		}
		_ = rc.SetReadDeadline(time.Time{})
		if req.Out == "" || !filepath.IsAbs(req.Out) {
			problem.Error(w, http.StatusBadRequest, fmt.Sprintf("out %q: want an absolute path", req.Out))
			return
		}
		res, err := s.BackupInto(filepath.Clean(req.Out))
		// However long the backup took, the answer (a few hundred
		// bytes) must be taken within socketWriteTimeout.
		_ = rc.SetWriteDeadline(time.Now().Add(socketWriteTimeout))
		switch {
		case errors.Is(err, errBusy):
			problem.Error(w, http.StatusConflict, "a backup is already running; try again when it has finished")
			return
		case errors.Is(err, ErrNotEmpty), errors.Is(err, ErrInsideStore):
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
	// No WriteTimeout or ReadTimeout on the server: both run from the
	// request's start, and a backup of a large store may take minutes —
	// the handler sets its own deadlines around the reading of the body
	// and the writing of the answer instead.
	// stopping, once set, turns requests away before they count in
	// s.handlers, so that none is added while stop waits for them.
	var stopMu sync.Mutex
	stopping := false
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			stopMu.Lock()
			if stopping {
				stopMu.Unlock()
				http.Error(w, "the server is stopping", http.StatusServiceUnavailable)
				return
			}
			s.handlers.Add(1)
			stopMu.Unlock()
			defer s.handlers.Done()
			mux.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: socketReadTimeout,
		IdleTimeout:       socketReadTimeout,
		MaxHeaderBytes:    16 << 10,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	return func() {
		// A backup under way finishes first. Shutdown waits for every
		// request for socketShutdownGrace; then Close drops the
		// connections left (a client slow to send its request), and
		// stop still waits for the handlers, so that the caller does not
		// close the store under a backup.
		stopMu.Lock()
		stopping = true
		stopMu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), socketShutdownGrace)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			// A backup still running keeps its connection until it
			// has answered; the others are dropped.
			s.running.Lock()
			//lint:ignore SA2001 the empty section waits for the backup under way
			s.running.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if srv.Shutdown(ctx) != nil {
				log.Warn("closing the backup socket's connections left after the grace period", "grace", socketShutdownGrace)
				_ = srv.Close()
			}
		}
		<-done
		s.handlers.Wait()
		_ = os.Remove(path)
	}, nil
}

// The backup socket's deadlines (variables for the tests).
var (
	// socketReadTimeout bounds the wait for a request's header and body,
	// and an idle connection.
	socketReadTimeout = 10 * time.Second
	// socketWriteTimeout bounds the writing of the answer, once the
	// backup is taken.
	socketWriteTimeout = 10 * time.Second
	// socketShutdownGrace is how long stop lets requests under way
	// finish before it closes their connections (a backup running in one
	// still finishes: stop waits for it).
	socketShutdownGrace = 5 * time.Second
)

// mkdirShort makes a new directory of mode 0700 in dir named .sXXXXXX.
func mkdirShort(dir string) (string, error) {
	for range 100 {
		var b [3]byte
		_, _ = rand.Read(b[:])
		p := filepath.Join(dir, ".s"+hex.EncodeToString(b[:]))
		err := os.Mkdir(p, 0o700)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return p, err
	}
	return "", errors.New("no free name for a temporary directory")
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
