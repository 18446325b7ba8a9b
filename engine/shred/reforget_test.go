package shred

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
)

// copyDir copies a closed keyring's directory: a backup of it.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

// A keyring restored from a backup taken before a Forget holds the
// destroyed key again — its subject's fields open — until Reforget
// replays the audit stream of the store, which destroys it again (and
// its bytes with it), leaves the others alone, and is idempotent.
func TestReforgetAfterRestore(t *testing.T) {
	ctx := context.Background()
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir, backup := t.TempDir(), filepath.Join(t.TempDir(), "keys")
	open := func() *Keyring {
		k, err := OpenDir(ctx, dir, testMaster, DirOptions{Options: Options{Audit: st}})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k := open()
	a, err := k.SealField(ctx, "user/a", "name", "Ada")
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.SealField(ctx, "user/b", "name", "Bea")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := k.b.(*dirBackend).getOne(dirKey(k.hash("user/a")))
	if err != nil || rec == nil {
		t.Fatal(rec, err)
	}
	wrapped := [][]byte{rec[5:]}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	copyDir(t, dir, backup) // the keyring's backup, before the forgetting

	k = open()
	if _, err := k.Forget(ctx, "user/a", "test"); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}

	// Restore the keyring's backup: A's key is back.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	copyDir(t, backup, dir)
	k = open()
	defer k.Close()
	if v, err := a.Open(ctx, k); err != nil || v != "Ada" {
		t.Fatalf("restored keyring: A's field = %q, %v; the backup should hold A's key", v, err)
	}
	if n := countIn(t, dir, wrapped); n != 1 {
		t.Fatalf("restored keyring: A's wrapped key found %d times on disk: the scan does not see it", n)
	}

	n, err := k.Reforget(ctx, st)
	if err != nil || n != 1 {
		t.Fatalf("Reforget = %d, %v; want 1", n, err)
	}
	if _, err := a.Open(ctx, k); !errors.Is(err, ErrForgotten) {
		t.Errorf("after Reforget, A's field: %v, want ErrForgotten", err)
	}
	if _, err := k.SealField(ctx, "user/a", "name", "Ada"); !errors.Is(err, ErrForgotten) {
		t.Errorf("after Reforget, SealField for A: %v, want ErrForgotten", err)
	}
	if v, err := b.Open(ctx, k); err != nil || v != "Bea" {
		t.Errorf("after Reforget, B's field = %q, %v", v, err)
	}
	if n, err := k.Reforget(ctx, st); err != nil || n != 0 {
		t.Errorf("Reforget again = %d, %v; want 0", n, err)
	}
	if evs, err := st.ReadStream(ctx, AuditStream, 1, 10); err != nil || len(evs) != 1 {
		t.Errorf("audit stream: %d events, %v; Reforget appends none", len(evs), err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if n := countIn(t, dir, wrapped); n != 0 {
		t.Errorf("after Reforget, A's wrapped key still on disk")
	}
	// Reopened, A stays forgotten.
	k = open()
	if _, err := a.Open(ctx, k); !errors.Is(err, ErrForgotten) {
		t.Errorf("reopened after Reforget, A's field: %v, want ErrForgotten", err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}

	// Restored again, and forgotten again from the whole log as a topic
	// would give it: the audit events among others.
	if _, err := st.Append(ctx, "other-1", eventstore.Any, []eventstore.NewEvent{{Type: TypeSubjectForgotten, Data: []byte("not an audit event")}}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	copyDir(t, backup, dir)
	k = open()
	defer k.Close()
	all, err := st.ReadAll(ctx, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := k.ReforgetEvents(ctx, all); err != nil || n != 1 {
		t.Fatalf("ReforgetEvents = %d, %v; want 1", n, err)
	}
	if _, err := a.Open(ctx, k); !errors.Is(err, ErrForgotten) {
		t.Errorf("after ReforgetEvents, A's field: %v, want ErrForgotten", err)
	}
	if v, err := b.Open(ctx, k); err != nil || v != "Bea" {
		t.Errorf("after ReforgetEvents, B's field = %q, %v", v, err)
	}
}
