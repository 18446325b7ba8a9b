package pebblekit

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/logbook/logbook/engine/priority"
)

// Only table files are wrapped, and a table's write waits while
// foreground work runs.
func TestYieldingFS(t *testing.T) {
	fs := YieldingFS(vfs.Default)
	dir := t.TempDir()
	create := func(name string) vfs.File {
		f, err := fs.Create(filepath.Join(dir, name), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	if _, ok := create("000001.log").(*yieldingFile); ok {
		t.Fatal("the write-ahead log yields: a commit would wait")
	}
	f := create("000002.sst")
	yf, ok := f.(*yieldingFile)
	if !ok {
		t.Fatalf("a table file is a %T, not a yielding one", f)
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if yf.y.Waited() != 0 {
		t.Fatalf("a table's write waited %v with no foreground work", yf.y.Waited())
	}
	priority.Begin()
	defer priority.End()
	start := time.Now()
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < priority.MaxWait || yf.y.Waited() < priority.MaxWait {
		t.Fatalf("a table's write beside foreground work took %v (waited %v), want at least %v", d, yf.y.Waited(), priority.MaxWait)
	}
}
