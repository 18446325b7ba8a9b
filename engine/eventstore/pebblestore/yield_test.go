package pebblestore

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/logbook/logbook/engine/priority"
)

// The store's tables (its flushes and compactions) are written through
// pebblekit.YieldingFS: a table's write waits beside foreground work.
func TestTablesYieldToForeground(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	name := filepath.Join(dir, "999999.sst")
	f, err := s.fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer s.fs.Remove(name)
	defer f.Close()
	priority.Begin()
	defer priority.End()
	start := time.Now()
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < priority.MaxWait {
		t.Fatalf("a table's write beside foreground work took %v, want at least %v", d, priority.MaxWait)
	}
}
