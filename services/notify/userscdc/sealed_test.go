package userscdc

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/logbook/logbook/engine/shred"
	"github.com/logbook/logbook/services/notify"
)

func openSealedView(t *testing.T, dir string) (*View, *shred.Keyring) {
	t.Helper()
	master, _ := shred.ParseMasterKey(strings.Repeat("ab", 32))
	keys, err := shred.OpenDir(context.Background(), filepath.Join(dir, "keys"), master, shred.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := OpenView(filepath.Join(dir, "view"), ViewOptions{Keyring: keys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close(); _ = keys.Close() })
	return v, keys
}

// TestSealedViewForget: a sealed view keeps no name, address or token
// in clear in its files; once a user is forgotten it answers them
// Forgotten, without them, and keeps them so through later changes in
// the users' database and a new snapshot; the other users are intact.
// A sealed view opened without a keyring, and a clear one with, are
// refused.
func TestSealedViewForget(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	secret := map[string]string{"name": "Ottoline Vexbridge", "email": "ottoline.vexbridge@example.org", "token": "tok-ottoline-91ac"}
	e.write(t, func(w *Writer) error {
		if err := w.PutUser(&notify.User{ID: 1, Name: secret["name"], Language: "en", Email: secret["email"]}, 1); err != nil {
			return err
		}
		if err := w.PutUser(user(2, "Two"), 1); err != nil {
			return err
		}
		_, err := w.AddDevice(1, secret["token"])
		return err
	})
	dir := t.TempDir()
	v, keys := openSealedView(t, dir)
	f := e.start(t, v)
	e.same(t, v) // opened, the sealed view equals the source
	lsn := e.write(t, func(w *Writer) error {
		_, err := w.AddDevice(2, "tok-two")
		return err
	})
	wait(t, v, lsn)
	e.same(t, v)

	if _, err := keys.Forget(ctx, Subject(1), "test"); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		got, err := v.Users(ctx, []int64{1, 2})
		if err != nil {
			t.Fatal(err)
		}
		if u := got[1]; u == nil || !u.Forgotten || u.Name != "" || u.Email != "" || len(u.DeviceTokens) != 0 {
			t.Fatalf("%s: user 1 %+v, want forgotten", when, u)
		}
		if u := got[2]; u == nil || u.Forgotten || u.Name != "Two" || !slices.Equal(u.DeviceTokens, []string{"tok-two"}) {
			t.Fatalf("%s: user 2 %+v", when, u)
		}
	}
	check("forgotten")
	// The users' database still changes the user: a new name, a new
	// device. Nothing of it is kept.
	lsn = e.write(t, func(w *Writer) error {
		if err := w.Exec(`UPDATE ` + w.Table("users") + ` SET name = 'Ottoline V. Vexbridge' WHERE id = 1`); err != nil {
			return err
		}
		_, err := w.AddDevice(1, "tok-ottoline-new")
		return err
	})
	wait(t, v, lsn)
	check("changed after forgetting")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	_ = keys.Close()
	for what, s := range map[string]string{"name": secret["name"], "email": secret["email"], "token": secret["token"], "new name": "Ottoline V.", "new token": "tok-ottoline-new"} {
		if where := grepDir(t, dir, s); where != "" {
			t.Errorf("the %s is in clear in %s", what, where)
		}
	}
	// The opposite modes are refused.
	if _, err := OpenView(filepath.Join(dir, "view"), ViewOptions{}); err == nil || !strings.Contains(err.Error(), "sealed") {
		t.Fatalf("a sealed view opened without a keyring: %v", err)
	}
	clear := t.TempDir()
	_ = openView(t, clear).Close()
	master, _ := shred.ParseMasterKey(strings.Repeat("ab", 32))
	k2, err := shred.OpenDir(ctx, filepath.Join(t.TempDir(), "keys"), master, shred.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Close()
	if _, err := OpenView(clear, ViewOptions{Keyring: k2}); err == nil || !strings.Contains(err.Error(), "in clear") {
		t.Fatalf("a clear view opened with a keyring: %v", err)
	}

	// A new snapshot (the view rebuilt) of the database that still holds
	// the user keeps them forgotten.
	if err := os.RemoveAll(filepath.Join(dir, "view")); err != nil {
		t.Fatal(err)
	}
	dropSlot(t, e)
	v, keys = openSealedView(t, dir)
	f = e.start(t, v)
	check("a new snapshot")

	// And while a new snapshot is copied, the answers come from the
	// users' database, which still holds the user: redacted.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	_ = keys.Close()
	if err := os.RemoveAll(filepath.Join(dir, "view")); err != nil {
		t.Fatal(err)
	}
	dropSlot(t, e)
	_, release := holdCopy(t)
	v, _ = openSealedView(t, dir)
	e.cfg.ServeDuringCopy = true
	e.start(t, v)
	if from, err := v.Ready(); from != "snapshot" || err != nil {
		t.Fatalf("Ready = %q, %v, want the snapshot served", from, err)
	}
	check("served from the users' database's snapshot")
	release()
}

func grepDir(t *testing.T, dir, s string) string {
	t.Helper()
	found := ""
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(s)) {
			found = p
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// BenchmarkUsersSealed reads 10,000 users (name, e-mail, one device
// token each) from a view in clear and from a sealed one.
func BenchmarkUsersSealed(b *testing.B) {
	for _, sealed := range []bool{false, true} {
		b.Run(map[bool]string{false: "clear", true: "sealed"}[sealed], func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			var opts ViewOptions
			if sealed {
				master, _ := shred.ParseMasterKey(strings.Repeat("ab", 32))
				keys, err := shred.OpenDir(ctx, filepath.Join(dir, "keys"), master, shred.DirOptions{})
				if err != nil {
					b.Fatal(err)
				}
				defer keys.Close()
				opts.Keyring = keys
			}
			v, err := OpenView(filepath.Join(dir, "view"), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer v.Close()
			const n = 10_000
			ids := make([]int64, n)
			subjects := make([]string, n)
			for i := range ids {
				ids[i], subjects[i] = int64(i+1), Subject(int64(i+1))
			}
			if sealed {
				if err := opts.Keyring.Prepare(ctx, subjects); err != nil {
					b.Fatal(err)
				}
			}
			bt := v.newBatch()
			for _, id := range ids {
				rec, err := v.sealUser(ctx, id, userRow{Name: "Some Body", Language: "en", Email: "some.body@example.org"})
				if err != nil {
					b.Fatal(err)
				}
				tok, err := v.sealToken(ctx, id, "device-token-0123456789")
				if err != nil {
					b.Fatal(err)
				}
				_ = bt.b.Set(idKey(prefixUser, id), rec, nil)
				_ = bt.b.Set(deviceKey(id, id), tok, nil)
			}
			if err := bt.commit(1, false); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				us, err := v.Users(ctx, ids)
				if err != nil || len(us) != n || us[n].Email != "some.body@example.org" {
					b.Fatal(len(us), err)
				}
			}
		})
	}
}
