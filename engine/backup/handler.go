package backup

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/problem"
)

// Path is where a serving command mounts the Service.
const Path = "/admin/backup"

// Service takes backups for the process that has the store open — only
// it can, since Pebble's directory lock keeps every other process out —
// into new directories under Root, on the server's machine. A request
// names no directory: the server names it after the time
// (20261127T012345.123Z), so that a token cannot make the server write
// anywhere else. One backup runs at a time; a request meanwhile is
// answered 409.
type Service struct {
	Store *pebblestore.Store
	Views map[string]View
	Root  string
	// Dir is the store's directory: BackupInto refuses a target inside
	// it. ListenSocket sets it to the directory it serves.
	Dir string

	running sync.Mutex
	// handlers counts the socket's requests under way: its stop waits
	// for them, so that the store is not closed under a backup.
	handlers sync.WaitGroup
}

// Result is the answer to a backup request (and the CLI's output).
type Result struct {
	Dir string `json:"dir"`
	Manifest
}

// Backup takes a backup into a new directory under Root.
func (s *Service) Backup() (*Result, error) {
	if !s.running.TryLock() {
		return nil, errBusy
	}
	defer s.running.Unlock()
	if s.Dir != "" && within(s.Root, s.Dir) {
		return nil, fmt.Errorf("%w: the backup root %s is inside the store's directory %s", ErrInsideStore, s.Root, s.Dir)
	}
	if err := os.MkdirAll(s.Root, 0o700); err != nil {
		return nil, fmt.Errorf("backup: root %s: %w", s.Root, err)
	}
	name := time.Now().UTC().Format("20060102T150405.000Z")
	dir := filepath.Join(s.Root, name)
	for i := 2; ; i++ {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			break
		}
		dir = filepath.Join(s.Root, fmt.Sprintf("%s-%d", name, i))
	}
	m, err := Take(s.Store, s.Views, dir)
	if err != nil {
		_ = os.RemoveAll(dir) // the directory is this backup's own, new
		return nil, err
	}
	return &Result{Dir: dir, Manifest: *m}, nil
}

var errBusy = errors.New("a backup is already running")

// ServeHTTP answers POST with a backup: 201 and the Result as JSON.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		problem.Error(w, http.StatusMethodNotAllowed, "POST takes a backup")
		return
	}
	if r.ContentLength > 0 {
		problem.Error(w, http.StatusBadRequest, "a backup request has no body: the server names the directory under its backup root")
		return
	}
	res, err := s.Backup()
	switch {
	case errors.Is(err, errBusy):
		problem.Error(w, http.StatusConflict, "a backup is already running; try again when it has finished")
		return
	case err != nil:
		problem.Error(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(res)
}

// Handler is the Service behind the admin role: 401 without a valid
// token, 403 for a token without the role.
func (s *Service) Handler(tokens *auth.Tokens) http.Handler {
	return tokens.RequireRole(auth.Admin, s)
}
