package pebblekv_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"

	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/kvtest"
	"github.com/logbook/logbook/services/kv/pebblekv"
)

func TestConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.Backend {
		b, err := pebblekv.Open(t.TempDir(), pebblekv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, kvtest.Full(kvtest.Options{}))
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	b, err := pebblekv.Open(dir, pebblekv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := kv.New(b, kv.Limits{})
	if err := r.Add(t.Context(), "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Update(t.Context(), "a/b", 1, nil); err == nil {
		t.Fatal("update after close succeeded")
	}
	b, err = pebblekv.Open(dir, pebblekv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r = kv.New(b, kv.Limits{})
	defer r.Close()
	if e, ok, err := r.Get(t.Context(), "a/b"); err != nil || !ok || e.Version != 1 || string(e.Value) != "x" {
		t.Fatalf("after reopen: %+v %v %v", e, ok, err)
	}
}

// Values of 1 MiB or more live in files of their own: read back whole;
// an update, a small value, a cascading delete or a refused write leaves
// no file behind; a file no record names (a crash before its commit) is
// removed at the next open.
func TestLargeValues(t *testing.T) {
	dir := t.TempDir()
	b, err := pebblekv.Open(dir, pebblekv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := kv.New(b, kv.Limits{})
	ctx := t.Context()
	big := func(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }
	files := func() int {
		t.Helper()
		es, err := os.ReadDir(filepath.Join(dir, "blobs"))
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	check := func(id string, want []byte, version uint64) {
		t.Helper()
		e, ok, err := r.Get(ctx, id)
		if err != nil || !ok || e.Version != version || !bytes.Equal(e.Value, want) {
			t.Fatalf("%s: %v %v version %d, %d bytes; want version %d, %d bytes", id, ok, err, e.Version, len(e.Value), version, len(want))
		}
	}
	if err := r.Add(ctx, "a", big('a', 3<<20)); err != nil {
		t.Fatal(err)
	}
	if err := r.AddBatch(ctx, []kv.Item{{ID: "a/1", Value: big('b', 1<<20)}, {ID: "a/2", Value: []byte("small")}, {ID: "c", Value: big('c', 2<<20)}}); err != nil {
		t.Fatal(err)
	}
	check("a", big('a', 3<<20), 1)
	check("a/1", big('b', 1<<20), 1)
	check("a/2", []byte("small"), 1)
	if n := files(); n != 3 {
		t.Fatalf("%d blob files, want 3", n)
	}
	if _, err := r.Update(ctx, "a", 1, big('d', 4<<20)); err != nil {
		t.Fatal(err)
	}
	check("a", big('d', 4<<20), 2)
	if _, err := r.Update(ctx, "c", 7, big('x', 2<<20)); !errors.Is(err, kv.ErrStale) {
		t.Fatalf("stale update: %v", err)
	}
	if err := r.Add(ctx, "c", big('y', 2<<20)); !errors.Is(err, kv.ErrExists) {
		t.Fatalf("add of an existing key: %v", err)
	}
	if n := files(); n != 3 {
		t.Fatalf("%d blob files after an update and two refused writes, want 3", n)
	}
	if _, err := r.Update(ctx, "c", 1, []byte("now small")); err != nil {
		t.Fatal(err)
	}
	check("c", []byte("now small"), 2)
	if err := r.Delete(ctx, "a", 2); err != nil {
		t.Fatal(err)
	}
	if n := files(); n != 0 {
		t.Fatalf("%d blob files after deleting a and its subtree, want 0", n)
	}
	if _, ok, _ := r.Get(ctx, "a/1"); ok {
		t.Fatal("a/1 survived the cascading delete")
	}
	if err := r.Add(ctx, "e", big('e', 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// A crash between a file's write and its commit leaves an orphan.
	if err := os.WriteFile(filepath.Join(dir, "blobs", "0123456789abcdef0123456789abcdef"), big('o', 10), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err = pebblekv.Open(dir, pebblekv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r = kv.New(b, kv.Limits{})
	defer r.Close()
	if n := files(); n != 1 {
		t.Fatalf("%d blob files after reopening with an orphan, want 1 (e's)", n)
	}
	check("e", big('e', 1<<20), 1)
}

// TestOpenStreamsAcrossReplace: a large value opened as a stream reads
// whole, at the version it was opened at, even when an update replaces
// it (and removes its file) before it is read; a small value too.
func TestOpenStreamsAcrossReplace(t *testing.T) {
	b, err := pebblekv.Open(t.TempDir(), pebblekv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	r := kv.New(b, kv.Limits{})
	defer r.Close()
	ctx := t.Context()
	big := bytes.Repeat([]byte("a"), 3<<20)
	if err := r.Add(ctx, "big", big); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(ctx, "small", []byte("s")); err != nil {
		t.Fatal(err)
	}
	rd, ok, err := r.Open(ctx, "big")
	if err != nil || !ok || rd.Version != 1 || rd.Size != int64(len(big)) {
		t.Fatalf("open: %+v %v %v", rd, ok, err)
	}
	if _, err := r.Update(ctx, "big", 1, bytes.Repeat([]byte("b"), 2<<20)); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rd)
	rd.Close()
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read %d bytes (%v), want the %d opened", len(got), err, len(big))
	}
	rd, ok, err = r.Open(ctx, "small")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	got, _ = io.ReadAll(rd)
	rd.Close()
	if string(got) != "s" || rd.Size != 1 {
		t.Fatalf("small: %q size %d", got, rd.Size)
	}
	if _, ok, err := r.Open(ctx, "none"); ok || err != nil {
		t.Fatalf("absent: %v %v", ok, err)
	}
	if ok, err := r.Exist(ctx, "big"); !ok || err != nil {
		t.Fatalf("exist: %v %v", ok, err)
	}
	if err := r.Healthy(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestStreamedValuesLeaveNoFiles: a value streamed into its blob file
// that is then refused — over the limit, a stream that broke, a key that
// exists, a stale version — leaves no file behind; a stored one leaves
// exactly one, and its update replaces it.
func TestStreamedValuesLeaveNoFiles(t *testing.T) {
	dir := t.TempDir()
	b, err := pebblekv.Open(dir, pebblekv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := kv.New(b, kv.Limits{MaxValueBytes: 4 << 20})
	defer r.Close()
	ctx := t.Context()
	files := func() int {
		t.Helper()
		es, err := os.ReadDir(filepath.Join(dir, "blobs"))
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	big := bytes.Repeat([]byte{9}, 3<<20)
	if err := r.AddFrom(ctx, "k", bytes.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	if err := r.AddFrom(ctx, "k", bytes.NewReader(big)); !errors.Is(err, kv.ErrExists) {
		t.Fatalf("AddFrom of an existing key: %v", err)
	}
	if _, err := r.UpdateFrom(ctx, "k", 5, bytes.NewReader(big)); !errors.Is(err, kv.ErrStale) {
		t.Fatalf("stale UpdateFrom: %v", err)
	}
	var tl *kv.TooLargeError
	if err := r.AddFrom(ctx, "over", bytes.NewReader(make([]byte, 4<<20+1))); !errors.As(err, &tl) {
		t.Fatalf("AddFrom over the limit: %v", err)
	}
	if err := r.AddFrom(ctx, "broken", io.MultiReader(bytes.NewReader(big), iotest.ErrReader(io.ErrClosedPipe))); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("AddFrom of a broken stream: %v", err)
	}
	if n := files(); n != 1 {
		t.Fatalf("%d blob files after one stored value and four refused, want 1", n)
	}
	if _, err := r.UpdateFrom(ctx, "k", 1, bytes.NewReader(big[:2<<20])); err != nil {
		t.Fatal(err)
	}
	if n := files(); n != 1 {
		t.Fatalf("%d blob files after an update, want 1", n)
	}
}
