package pebblestore

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/logbook/logbook/engine/eventstore"
)

// failCopiesFS fails the creation of WAL files under dir.
type failCopiesFS struct {
	vfs.FS
	dir string
}

func (fs failCopiesFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if strings.HasPrefix(name, fs.dir) && strings.HasSuffix(name, ".log") {
		return nil, errors.New("injected: cannot create " + name)
	}
	return fs.FS.Create(name, c)
}

// A checkpoint that cannot copy a WAL file fails, and the store goes on:
// the file is the copy's, not the store's WAL, whose loss would fail the
// store (countingFS.walCreate).
func TestCheckpointFailureLeavesStoreHealthy(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "ckpt")
	s, err := Open(filepath.Join(root, "data"), Options{FS: failCopiesFS{FS: vfs.Default, dir: out}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append(t.Context(), "s", eventstore.NoStream, []eventstore.NewEvent{{Type: "T"}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.Checkpoint(out); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("checkpoint succeeded though its WAL copy could not be created")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("checkpoint hangs: the copy's WAL was taken for the store's")
	}
	if err := s.Healthy(); err != nil {
		t.Fatalf("store failed by a failed checkpoint: %v", err)
	}
	if _, err := s.Append(t.Context(), "s", eventstore.Exactly(1), []eventstore.NewEvent{{Type: "T"}}); err != nil {
		t.Fatalf("append after a failed checkpoint: %v", err)
	}
	// And a checkpoint that works holds what was appended.
	pos, err := s.Checkpoint(filepath.Join(root, "ok"))
	if err != nil || pos != 2 {
		t.Fatalf("checkpoint: %d, %v", pos, err)
	}
}
