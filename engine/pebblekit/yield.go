package pebblekit

import (
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/logbook/logbook/engine/priority"
)

// YieldingFS wraps fs so that the tables a database writes (its flushes
// and compactions, the *.sst files) are throughput work: each of their
// writes first yields to foreground work (engine/priority). A compaction
// is up to a processor's worth of CPU that Go's scheduler preempts only
// every 10 ms; on two cores a query waited behind it. Every other file
// (the write-ahead log, the manifest) is fs's own: a commit never waits.
func YieldingFS(fs vfs.FS) vfs.FS { return yieldingFS{fs} }

type yieldingFS struct{ vfs.FS }

func (fs yieldingFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	return &yieldingFile{File: f}, nil
}

// yieldingFile is a table being written. Pebble (v2.1) writes it through
// a bufio.Writer (objstorageprovider), from the compaction's goroutine
// or its sstable writer's queue, one at a time; the Yielder would be
// safe even if not.
type yieldingFile struct {
	vfs.File
	y priority.Yielder
}

func (f *yieldingFile) Write(p []byte) (int, error) {
	f.y.Yield()
	return f.File.Write(p)
}
