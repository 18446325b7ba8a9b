package pebblekit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

const spareTestMemTable = 1 << 20

func openWithSpares(t *testing.T, fs vfs.FS) (*pebble.DB, *SpareWALs) {
	t.Helper()
	spares, err := NewSpareWALs(fs, "db", WALBytes(spareTestMemTable), nil)
	if err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open("db", &pebble.Options{FS: spares, MemTableSize: spareTestMemTable, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := spares.Tidy(); err != nil {
		t.Fatal(err)
	}
	return db, spares
}

type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

func value(i int) []byte {
	return bytes.Repeat([]byte{byte(i), byte(i >> 8), byte(i >> 16)}, 300)
}

// TestSpareWALsSurviveCrashes writes synced keys through logs made from
// spares and cuts the power at random points (the crashable file system
// keeps only what was synced, and a random part of what was not): every
// key acknowledged before a cut is read back after it. Recovery then ends
// each log at its zeroed tail, as it does for Pebble's own preallocated
// logs. It fails if no log came from a spare.
func TestSpareWALsSurviveCrashes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fs := vfs.NewCrashableMem()
	db, spares := openWithSpares(t, fs)
	acked := 0
	used := uint64(0)
	for cut := range 12 {
		n := 200 + rng.IntN(3000)
		for range n {
			if err := db.Set([]byte(fmt.Sprintf("k%07d", acked)), value(acked), pebble.Sync); err != nil {
				t.Fatal(err)
			}
			acked++
		}
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rand.New(rand.NewPCG(uint64(cut), 7))})
		_ = db.Close()
		spares.Close()
		used += spares.used.Load()
		fs = crashed
		db, spares = openWithSpares(t, fs)
		for i := range acked {
			got, closer, err := db.Get([]byte(fmt.Sprintf("k%07d", i)))
			if err != nil {
				t.Fatalf("cut %d: key %d of %d acknowledged: %v", cut, i, acked, err)
			}
			if !bytes.Equal(got, value(i)) {
				t.Fatalf("cut %d: key %d: wrong value", cut, i)
			}
			_ = closer.Close()
		}
	}
	_ = db.Close()
	spares.Close()
	used += spares.used.Load()
	if used == 0 {
		t.Fatal("no log was made from a spare")
	}
	t.Logf("%d keys, %d logs from spares", acked, used)
}

// TestSpareWALsIdleDatabase: a database that writes less than a
// sixteenth of a log's size gets no spare.
func TestSpareWALsIdleDatabase(t *testing.T) {
	fs := vfs.NewMem()
	db, spares := openWithSpares(t, fs)
	for i := range 10 {
		if err := db.Set([]byte{byte(i)}, value(i), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	spares.Close()
	if _, err := fs.Stat("db/" + SpareName); err == nil {
		t.Fatal("an idle database got a spare")
	}
}

// TestSpareWALsAtOpen: a complete spare becomes the first log; once the
// database is open (Tidy) a half-written spare is removed, and so is one
// of another size. Before, nothing is removed: the directory may still
// be another process's.
func TestSpareWALsAtOpen(t *testing.T) {
	write := func(fs vfs.FS, name string, size int64) {
		f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(make([]byte, size)); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	fs := vfs.NewMem()
	_ = fs.MkdirAll("db", 0o755)
	write(fs, "db/"+SpareName+".tmp", 100)
	write(fs, "db/"+SpareName, WALBytes(spareTestMemTable))
	if _, err := NewSpareWALs(fs, "db", 4096, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{SpareName, SpareName + ".tmp"} {
		if _, err := fs.Stat("db/" + n); err != nil {
			t.Errorf("%s removed before the database was opened: %v", n, err)
		}
	}
	db, spares := openWithSpares(t, fs)
	if _, err := fs.Stat("db/" + SpareName + ".tmp"); err == nil {
		t.Error("the half-written spare is still there")
	}
	if spares.used.Load() != 1 {
		t.Errorf("the complete spare made %d logs, want the first", spares.used.Load())
	}
	if err := db.Set([]byte("k"), []byte("v"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	spares.Close()
	logs := 0
	names, _ := fs.List("db")
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			fi, _ := fs.Stat("db/" + n)
			if fi.Size() == WALBytes(spareTestMemTable) {
				logs++
			}
		}
	}
	if logs == 0 {
		t.Errorf("no log has the spare's size: %v", names)
	}

	fs = vfs.NewMem()
	_ = fs.MkdirAll("db", 0o755)
	write(fs, "db/"+SpareName, 4096)
	db, spares = openWithSpares(t, fs)
	if _, err := fs.Stat("db/" + SpareName); err == nil || spares.used.Load() != 0 {
		t.Errorf("a spare of the wrong size was kept (used %d)", spares.used.Load())
	}
	_ = db.Close()
	spares.Close()
}

// TestSpareIsZeros: a spare is walBytes of zeros, synced, under its name.
func TestSpareIsZeros(t *testing.T) {
	fs := vfs.NewCrashableMem()
	_ = fs.MkdirAll("db", 0o755)
	s, err := NewSpareWALs(fs, "db", 3<<20+5, nil)
	if err != nil {
		t.Fatal(err)
	}
	root, err := fs.OpenDir("")
	if err != nil {
		t.Fatal(err)
	}
	_ = root.Sync() // the directory db itself
	_ = root.Close()
	s.prepare()
	s.writers.Wait()
	s.Close()
	crashed := fs.CrashClone(vfs.CrashCloneCfg{}) // only what was synced
	f, err := crashed.Open("db/" + SpareName)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != 3<<20+5 || bytes.Count(data, []byte{0}) != len(data) {
		t.Fatalf("spare of %d bytes, %d of them zeros; want %d zeros", len(data), bytes.Count(data, []byte{0}), 3<<20+5)
	}
}

// readySpare writes a spare for s and waits for it.
func readySpare(t *testing.T, s *SpareWALs) {
	t.Helper()
	s.prepare()
	s.writers.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != spareReady {
		t.Fatal("no spare was made")
	}
}

// TestSpareReplacesSmallReusedLog: a reused log file smaller than the
// spare is replaced by the spare and removed; one as large is reused as
// Pebble asked, and the spare kept.
func TestSpareReplacesSmallReusedLog(t *testing.T) {
	fs := vfs.NewMem()
	_ = fs.MkdirAll("db", 0o755)
	const size = 1 << 20
	s, err := NewSpareWALs(fs, "db", size, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	small := func(name string, n int) {
		f, _ := fs.Create(name, vfs.WriteCategoryUnspecified)
		_, _ = f.Write(bytes.Repeat([]byte{7}, n))
		_ = f.Close()
	}
	small("db/000001.log", 4096)
	readySpare(t, s)
	f, err := s.ReuseForWrite("db/000001.log", "db/000002.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if _, err := fs.Stat("db/000001.log"); err == nil {
		t.Error("the replaced log file is still there")
	}
	if fi, err := fs.Stat("db/000002.log"); err != nil || fi.Size() != size {
		t.Errorf("the new log: %v, want the spare's %d bytes", err, size)
	}
	if s.used.Load() != 1 || s.replaced.Load() != 1 {
		t.Errorf("used %d, replaced %d; want 1, 1", s.used.Load(), s.replaced.Load())
	}

	small("db/000003.log", size)
	readySpare(t, s)
	f, err = s.ReuseForWrite("db/000003.log", "db/000004.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if _, err := fs.Stat("db/" + SpareName); err != nil || s.replaced.Load() != 1 {
		t.Errorf("a reused file as large as the spare was replaced (%v, replaced %d)", err, s.replaced.Load())
	}
}

// gatedFS blocks the spare's writes after the first until released.
type gatedFS struct {
	vfs.FS
	writes chan struct{}
}

func (g gatedFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.Create(name, c)
	if err != nil || !strings.HasSuffix(name, ".tmp") {
		return f, err
	}
	return gatedFile{File: f, writes: g.writes}, nil
}

type gatedFile struct {
	vfs.File
	writes chan struct{}
}

func (f gatedFile) Write(p []byte) (int, error) {
	<-f.writes
	return f.File.Write(p)
}

// TestSpareCloseStopsWriter: Close stops a spare being written; its
// half-written file is removed, and no spare is made after.
func TestSpareCloseStopsWriter(t *testing.T) {
	mem := vfs.NewMem()
	_ = mem.MkdirAll("db", 0o755)
	writes := make(chan struct{})
	s, err := NewSpareWALs(gatedFS{FS: mem, writes: writes}, "db", 8<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.prepare()
	writes <- struct{}{} // the first MiB is written; the writer waits in the second
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	for {
		s.mu.Lock()
		c := s.closed
		s.mu.Unlock()
		if c {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(writes) // the second write goes through; the writer then sees Close
	<-closed
	for _, n := range []string{SpareName, SpareName + ".tmp"} {
		if _, err := mem.Stat("db/" + n); err == nil {
			t.Errorf("%s is there after Close", n)
		}
	}
	s.prepare()
	s.writers.Wait()
	if _, err := mem.Stat("db/" + SpareName + ".tmp"); err == nil || s.state != spareNone {
		t.Error("a spare was started after Close")
	}
}

// TestSpareCutBeforeFirstWrite: the power is cut right after a log is
// made from a spare, before Pebble writes to it, and again after a few
// writes to the next incarnation: every acknowledged key survives both.
func TestSpareCutBeforeFirstWrite(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db, spares := openWithSpares(t, fs)
	n := 0
	put := func() {
		if err := db.Set([]byte(fmt.Sprintf("k%07d", n)), value(n), pebble.Sync); err != nil {
			t.Fatal(err)
		}
		n++
	}
	for range 200 { // over a sixteenth of a log: a spare is written
		put()
	}
	spares.writers.Wait()
	used := spares.used.Load()
	if err := db.Flush(); err != nil { // a new log, from the spare
		t.Fatal(err)
	}
	if spares.used.Load() != used+1 {
		t.Fatalf("the flush's new log did not take the spare (used %d → %d)", used, spares.used.Load())
	}
	check := func(fs *vfs.MemFS) {
		t.Helper()
		_ = db.Close()
		spares.Close()
		db, spares = openWithSpares(t, fs)
		for i := range n {
			got, closer, err := db.Get([]byte(fmt.Sprintf("k%07d", i)))
			if err != nil || !bytes.Equal(got, value(i)) {
				t.Fatalf("key %d of %d: %v", i, n, err)
			}
			_ = closer.Close()
		}
	}
	fs1 := fs.CrashClone(vfs.CrashCloneCfg{})
	check(fs1)
	for range 20 {
		put()
	}
	check(fs1.CrashClone(vfs.CrashCloneCfg{}))
	_ = db.Close()
	spares.Close()
}

// failOnceFS fails the first spare it is asked to create.
type failOnceFS struct {
	vfs.FS
	failed *bool
}

func (f failOnceFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if strings.HasSuffix(name, ".tmp") && !*f.failed {
		*f.failed = true
		return nil, errors.New("injected: no space left on device")
	}
	return f.FS.Create(name, c)
}

// TestSpareRetriedAtNextLog: a spare that could not be written is asked
// for again when the next log is made.
func TestSpareRetriedAtNextLog(t *testing.T) {
	mem := vfs.NewMem()
	_ = mem.MkdirAll("db", 0o755)
	var failed bool
	s, err := NewSpareWALs(failOnceFS{FS: mem, failed: &failed}, "db", 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, err := s.Create("db/000001.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 1<<20/16)); err != nil { // busy: a spare is asked for, and fails
		t.Fatal(err)
	}
	s.writers.Wait()
	if !failed {
		t.Fatal("no spare was asked for")
	}
	if _, err := mem.Stat("db/" + SpareName); err == nil {
		t.Fatal("a spare despite the failure")
	}
	if _, err := s.Create("db/000002.log", vfs.WriteCategoryUnspecified); err != nil {
		t.Fatal(err)
	}
	s.writers.Wait()
	if _, err := mem.Stat("db/" + SpareName); err != nil {
		t.Fatalf("the next log did not ask again: %v", err)
	}
}

type lowDiskFS struct{ vfs.FS }

func (lowDiskFS) GetDiskUsage(string) (vfs.DiskUsage, error) {
	return vfs.DiskUsage{AvailBytes: 3 << 20, TotalBytes: 1 << 30}, nil
}

// TestSpareNeedsFreeSpace: no spare is written with less than four
// spares' worth of space free.
func TestSpareNeedsFreeSpace(t *testing.T) {
	mem := vfs.NewMem()
	_ = mem.MkdirAll("db", 0o755)
	s, err := NewSpareWALs(lowDiskFS{mem}, "db", 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.prepare()
	s.writers.Wait()
	for _, n := range []string{SpareName, SpareName + ".tmp"} {
		if _, err := mem.Stat("db/" + n); err == nil {
			t.Errorf("%s written with 3 MiB free", n)
		}
	}
}
