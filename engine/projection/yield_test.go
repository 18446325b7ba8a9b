package projection

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/priority"
)

// A view's tables (its flushes and compactions) are written through
// pebblekit.YieldingFS: a table's write waits beside foreground work.
func TestViewTablesYieldToForeground(t *testing.T) {
	dir := t.TempDir()
	var fs vfs.FS
	v, err := OpenPebbleView(dir, PebbleOptions{Tune: func(o *pebble.Options) { fs = o.FS }},
		func(*pebble.Batch, []eventstore.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	name := filepath.Join(dir, "999999.sst")
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Remove(name)
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
