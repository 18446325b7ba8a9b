package pebblekit

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

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
		used += spares.Used()
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
	used += spares.Used()
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
	if spares.Used() != 1 {
		t.Errorf("the complete spare made %d logs, want the first", spares.Used())
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
	if _, err := fs.Stat("db/" + SpareName); err == nil || spares.Used() != 0 {
		t.Errorf("a spare of the wrong size was kept (used %d)", spares.Used())
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
