package pebblekit

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/logbook/logbook/engine/priority"
)

// A table's write waits while foreground work runs; a write to any other
// file (the write-ahead log) does not.
func TestYieldingFS(t *testing.T) {
	fs := YieldingFS(vfs.Default)
	dir := t.TempDir()
	write := func(name string) time.Duration {
		f, err := fs.Create(filepath.Join(dir, name), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		start := time.Now()
		if _, err := f.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	if d := write("000001.sst"); d >= priority.MaxWait {
		t.Fatalf("a table's write took %v with no foreground work", d)
	}
	priority.Begin()
	defer priority.End()
	if d := write("000002.sst"); d < priority.MaxWait {
		t.Fatalf("a table's write beside foreground work took %v, want at least %v", d, priority.MaxWait)
	}
	if d := write("000003.log"); d >= priority.MaxWait {
		t.Fatalf("a log write beside foreground work took %v: it must not wait", d)
	}
}
