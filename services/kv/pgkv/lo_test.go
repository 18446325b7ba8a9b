package pgkv_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/internal/testenv"
	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/pgkv"
)

// unlinkOnCleanup unlinks the large objects of the schema's kv table when
// the test ends: they belong to the database, not to the schema that the
// test's clean-up drops.
func unlinkOnCleanup(t *testing.T, url string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Logf("unlinking the test's large objects: %v", err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, `SELECT lo_unlink(lo) FROM kv WHERE lo IS NOT NULL`); err != nil {
			t.Logf("unlinking the test's large objects: %v", err)
		}
	})
}

// A value put from a stream over InlineMax is kept in a large object,
// not in its row; replacing it (from a stream or whole) or deleting it
// (or a key above it) unlinks the large object in the same transaction;
// a reader opened before an update reads the value it opened, whole.
func TestLargeObjects(t *testing.T) {
	url, _ := testenv.SchemaURL(t)
	ctx := t.Context()
	b, err := pgkv.Open(ctx, url, pgkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	unlinkOnCleanup(t, url)
	r := kv.New(b, kv.Limits{MaxValueBytes: 8 << 20})
	big := bytes.Repeat([]byte{1, 2, 3, 250}, 3<<18) // 3 MiB
	other := bytes.Repeat([]byte{9, 8}, 1<<20)       // 2 MiB

	lo := func(id string) (oid uint32, inline int) {
		t.Helper()
		var p *uint32
		if err := b.Pool().QueryRow(ctx, `SELECT lo, octet_length(value) FROM kv WHERE id = $1`, id).Scan(&p, &inline); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if p != nil {
			oid = *p
		}
		return oid, inline
	}
	exists := func(oid uint32) bool {
		t.Helper()
		var ok bool
		if err := b.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_largeobject_metadata WHERE oid = $1)`, oid).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	read := func(id string) (kv.Reader, []byte) {
		t.Helper()
		rd, ok, err := r.Open(ctx, id)
		if err != nil || !ok {
			t.Fatalf("Open %s: %v %v", id, ok, err)
		}
		defer rd.Close()
		got, err := io.ReadAll(rd)
		if err != nil {
			t.Fatal(err)
		}
		return rd, got
	}

	if err := r.AddFrom(ctx, "a/big", bytes.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	oid1, inline := lo("a/big")
	if oid1 == 0 || inline != 0 || !exists(oid1) {
		t.Fatalf("a 3 MiB streamed value: large object %d (exists %v), %d bytes in the row", oid1, exists(oid1), inline)
	}
	if rd, got := read("a/big"); rd.Size != int64(len(big)) || rd.Version != 1 || !bytes.Equal(got, big) {
		t.Fatalf("read back: size %d, version %d, %d bytes, equal %v", rd.Size, rd.Version, len(got), bytes.Equal(got, big))
	}
	if e, ok, err := r.Get(ctx, "a/big"); err != nil || !ok || !bytes.Equal(e.Value, big) {
		t.Fatalf("Get of a large object: %v %v", ok, err)
	}
	if err := r.AddFrom(ctx, "small", bytes.NewReader([]byte("x"))); err != nil {
		t.Fatal(err)
	}
	if oid, inline := lo("small"); oid != 0 || inline != 1 {
		t.Fatalf("a small streamed value: large object %d, %d bytes in the row", oid, inline)
	}

	// A reader opened before an update reads what it opened.
	rd, ok, err := r.Open(ctx, "a/big")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	first := make([]byte, 100)
	if _, err := io.ReadFull(rd, first); err != nil {
		t.Fatal(err)
	}
	if v, err := r.UpdateFrom(ctx, "a/big", 1, bytes.NewReader(other)); err != nil || v != 2 {
		t.Fatalf("UpdateFrom: %d %v", v, err)
	}
	rest, err := io.ReadAll(rd)
	_ = rd.Close()
	if err != nil || !bytes.Equal(append(first, rest...), big) {
		t.Fatalf("the reader opened before the update: %d bytes, %v", 100+len(rest), err)
	}
	oid2, _ := lo("a/big")
	if oid2 == 0 || oid2 == oid1 || exists(oid1) {
		t.Fatalf("after the update: large object %d (the old %d still exists: %v)", oid2, oid1, exists(oid1))
	}
	if _, got := read("a/big"); !bytes.Equal(got, other) {
		t.Fatal("the updated value differs")
	}

	// Replaced whole, the large object goes.
	if _, err := r.Update(ctx, "a/big", 2, []byte("whole")); err != nil {
		t.Fatal(err)
	}
	if oid, _ := lo("a/big"); oid != 0 || exists(oid2) {
		t.Fatalf("after Update: large object %d, the old one exists %v", oid, exists(oid2))
	}

	// Deleted with the key above it, the large object goes.
	if _, err := r.UpdateFrom(ctx, "a/big", 3, bytes.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	oid3, _ := lo("a/big")
	if err := r.Add(ctx, "a", []byte("parent")); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(ctx, "a", 1); err != nil {
		t.Fatal(err)
	}
	if oid3 == 0 || exists(oid3) {
		t.Fatalf("after the cascading delete: large object %d exists %v", oid3, exists(oid3))
	}
}

// A large object being read holds a stream slot (and a connection) until
// its reader is closed; with every slot taken, the next large read waits
// as long as its context allows, while values in their rows are read as
// ever.
func TestStreamSlots(t *testing.T) {
	url, _ := testenv.SchemaURL(t)
	ctx := t.Context()
	b, err := pgkv.Open(ctx, url, pgkv.Options{MaxConns: 4, MaxStreams: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	unlinkOnCleanup(t, url)
	r := kv.New(b, kv.Limits{MaxValueBytes: 8 << 20})
	big := bytes.Repeat([]byte{5}, 2<<20)
	for _, id := range []string{"one", "two"} {
		if err := r.AddFrom(ctx, id, bytes.NewReader(big)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Add(ctx, "small", []byte("s")); err != nil {
		t.Fatal(err)
	}
	first, ok, err := r.Open(ctx, "one")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	defer first.Close() // before the pool's Close, which waits for its connection
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if rd, ok, err := r.Open(short, "two"); !errors.Is(err, context.DeadlineExceeded) {
		if ok {
			_ = rd.Close()
		}
		t.Fatalf("a second large read with the only slot taken: %v, want the context's deadline", err)
	}
	if rd, ok, err := r.Open(ctx, "small"); err != nil || !ok || rd.Size != 1 {
		t.Fatalf("a value in its row, with the slot taken: %v %v", ok, err)
	}
	_ = first.Close()
	rd, ok, err := r.Open(ctx, "two")
	if err != nil || !ok {
		t.Fatalf("after the first reader closed: %v %v", ok, err)
	}
	got, err := io.ReadAll(rd)
	_ = rd.Close()
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read %d bytes: %v", len(got), err)
	}
}
