package shred

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/internal/testenv"
)

var testMaster = mustMaster("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")

func mustMaster(s string) MasterKey {
	k, err := ParseMasterKey(s)
	if err != nil {
		panic(err)
	}
	return k
}

// opener opens the keyring under test afresh on the same storage.
type opener func(t *testing.T, master MasterKey) (*Keyring, error)

func dirOpener(dir string) opener {
	return func(t *testing.T, master MasterKey) (*Keyring, error) {
		return OpenDir(context.Background(), dir, master, DirOptions{})
	}
}

func pgOpener(t *testing.T) opener {
	url := testenv.URL(t)
	schema := testenv.Schema(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	return func(t *testing.T, master MasterKey) (*Keyring, error) {
		return OpenPostgres(context.Background(), pool, master, PostgresOptions{Table: schema + ".keys"})
	}
}

func backends(t *testing.T, fn func(t *testing.T, open opener)) {
	t.Run("dir", func(t *testing.T) { fn(t, dirOpener(t.TempDir())) })
	t.Run("postgres", func(t *testing.T) { fn(t, pgOpener(t)) })
}

func mustOpen(t *testing.T, open opener) *Keyring {
	t.Helper()
	k, err := open(t, testMaster)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// memAudit is an audit stream in memory.
type memAudit struct {
	mu     sync.Mutex
	events []eventstore.NewEvent
	ids    map[eventstore.ID]bool
}

func (a *memAudit) Append(_ context.Context, stream string, _ eventstore.ExpectedVersion, evs []eventstore.NewEvent) (eventstore.AppendResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ids == nil {
		a.ids = map[eventstore.ID]bool{}
	}
	for _, e := range evs {
		if !a.ids[e.ID] {
			a.ids[e.ID] = true
			a.events = append(a.events, e)
		}
	}
	return eventstore.AppendResult{Stream: stream, LastPosition: uint64(len(a.events))}, nil
}

func TestSealOpenForget(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		k := mustOpen(t, open)
		defer k.Close()
		audit := &memAudit{}
		k.opts.Audit = audit

		env, err := k.Seal(ctx, "user/7", "name", []byte("Ada Lovelace"))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(env, []byte("Ada")) || !IsSealed(env) || len(env) != len("Ada Lovelace")+Overhead {
			t.Fatalf("envelope %x", env)
		}
		e, _ := ParseEnvelope(env)
		if e.KeyVersion != 1 || fmt.Sprintf("%x", e.SubjectTag) != k.SubjectHash("user/7")[:32] {
			t.Fatalf("envelope header %+v, subject hash %s", e, k.SubjectHash("user/7"))
		}
		pt, err := k.Open(ctx, "user/7", "name", env)
		if err != nil || string(pt) != "Ada Lovelace" {
			t.Fatalf("Open = %q, %v", pt, err)
		}
		// The additional data binds subject and field.
		if _, err := k.Open(ctx, "user/7", "email", env); !errors.Is(err, ErrTampered) {
			t.Fatalf("other field: %v", err)
		}
		if _, err := k.Open(ctx, "user/8", "name", env); !errors.Is(err, ErrTampered) {
			t.Fatalf("other subject: %v", err)
		}
		for i := range env {
			bad := bytes.Clone(env)
			bad[i] ^= 0x01
			if _, err := k.Open(ctx, "user/7", "name", bad); err == nil {
				t.Fatalf("byte %d flipped: opened", i)
			}
		}
		if _, err := k.Open(ctx, "user/7", "name", env[:len(env)-1]); !errors.Is(err, ErrTampered) {
			t.Fatalf("truncated: %v", err)
		}
		if _, err := k.Open(ctx, "user/7", "name", []byte("plain")); !errors.Is(err, ErrNotSealed) {
			t.Fatalf("plain: %v", err)
		}
		s, err := k.SealString(ctx, "user/7", "email", "ada@example.org")
		if err != nil || !strings.HasPrefix(s, StringPrefix) {
			t.Fatal(s, err)
		}
		if got, err := k.OpenString(ctx, "user/7", "email", s); err != nil || got != "ada@example.org" {
			t.Fatal(got, err)
		}
		other, _ := k.Seal(ctx, "user/8", "name", []byte("Grace"))

		f, err := k.Forget(ctx, "user/7", "admin:test")
		if err != nil {
			t.Fatal(err)
		}
		if f.KeyVersion != 1 || f.SubjectHash != k.SubjectHash("user/7") || f.By != "admin:test" || f.Position != 1 {
			t.Fatalf("Forgotten %+v", f)
		}
		if _, err := k.Open(ctx, "user/7", "name", env); !errors.Is(err, ErrForgotten) {
			t.Fatalf("Open after Forget: %v", err)
		}
		if _, err := k.OpenString(ctx, "user/7", "email", s); !errors.Is(err, ErrForgotten) {
			t.Fatalf("OpenString after Forget: %v", err)
		}
		if _, err := k.Seal(ctx, "user/7", "name", []byte("again")); !errors.Is(err, ErrForgotten) {
			t.Fatalf("Seal after Forget: %v", err)
		}
		if err := k.Prepare(ctx, []string{"user/7", "user/9"}); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Seal(ctx, "user/7", "name", []byte("again")); !errors.Is(err, ErrForgotten) {
			t.Fatalf("Seal after Prepare after Forget: %v", err)
		}
		if pt, err := k.Open(ctx, "user/8", "name", other); err != nil || string(pt) != "Grace" {
			t.Fatalf("another subject: %q, %v", pt, err)
		}
		// Again: no error, the same event (appended once).
		if _, err := k.Forget(ctx, "user/7", "admin:test"); err != nil {
			t.Fatal(err)
		}
		if len(audit.events) != 1 {
			t.Fatalf("%d audit events", len(audit.events))
		}
		ev := audit.events[0]
		if ev.Type != TypeSubjectForgotten || bytes.Contains(ev.Data, []byte("user/7")) || bytes.Contains(ev.Data, []byte("Ada")) {
			t.Fatalf("audit event %s %s", ev.Type, ev.Data)
		}
		var got Forgotten
		if err := json.Unmarshal(ev.Data, &got); err != nil || got.SubjectHash != SubjectHashOf(testMaster, "user/7") || got.At.IsZero() {
			t.Fatalf("audit data %s: %v", ev.Data, err)
		}
		// A subject that never had a key is forgotten too (a tombstone).
		if f, err := k.Forget(ctx, "user/99", "x"); err != nil || f.KeyVersion != 0 {
			t.Fatal(f, err)
		}
		if _, err := k.Seal(ctx, "user/99", "name", []byte("new")); !errors.Is(err, ErrForgotten) {
			t.Fatalf("Seal of a subject forgotten without a key: %v", err)
		}
	})
}

func TestRestartAndWrongMasterKey(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		k := mustOpen(t, open)
		env, err := k.Seal(ctx, "c/1", "address", []byte("1 Main St"))
		if err != nil {
			t.Fatal(err)
		}
		env2, _ := k.Seal(ctx, "c/2", "address", []byte("2 Side St"))
		if _, err := k.Forget(ctx, "c/2", "t"); err != nil {
			t.Fatal(err)
		}
		k.Close()

		other := mustMaster(NewMasterKey())
		if _, err := open(t, other); !errors.Is(err, ErrWrongMasterKey) {
			t.Fatalf("another master key: %v", err)
		}
		k = mustOpen(t, open)
		defer k.Close()
		if pt, err := k.Open(ctx, "c/1", "address", env); err != nil || string(pt) != "1 Main St" {
			t.Fatalf("after restart: %q, %v", pt, err)
		}
		if _, err := k.Open(ctx, "c/2", "address", env2); !errors.Is(err, ErrForgotten) {
			t.Fatalf("forgotten, after restart: %v", err)
		}
	})
}

// TestConcurrentSealForget seals and opens for many subjects while
// others forget them: once Forget has returned, no envelope of the
// subject opens and no Seal succeeds, whenever it started.
func TestConcurrentSealForget(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		k := mustOpen(t, open)
		defer k.Close()
		const subjects = 40
		var forgotten [subjects]atomic.Bool
		var sealedAfter atomic.Int64
		var wg sync.WaitGroup
		errc := make(chan error, 100)
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 200 {
					s := (i*7 + w) % subjects
					subj := fmt.Sprintf("u/%d", s)
					was := forgotten[s].Load()
					env, err := k.Seal(ctx, subj, "name", []byte(subj))
					switch {
					case errors.Is(err, ErrForgotten):
						continue
					case err != nil:
						errc <- err
						return
					case was:
						sealedAfter.Add(1)
					}
					was = forgotten[s].Load()
					pt, err := k.Open(ctx, subj, "name", env)
					switch {
					case errors.Is(err, ErrForgotten):
					case err != nil:
						errc <- err
						return
					case was:
						errc <- fmt.Errorf("%s opened after it was forgotten", subj)
						return
					case string(pt) != subj:
						errc <- fmt.Errorf("%s opened as %q", subj, pt)
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := 0; s < subjects; s += 2 {
				if _, err := k.Forget(ctx, fmt.Sprintf("u/%d", s), "t"); err != nil {
					errc <- err
					return
				}
				forgotten[s].Store(true)
			}
		}()
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}
		if n := sealedAfter.Load(); n > 0 {
			t.Errorf("%d seals succeeded after their subject was forgotten", n)
		}
	})
}

// TestForgetSurvivesPowerCut forgets, then cuts the power (a clone of
// the file system with only what was synced): after reopening, the key
// is gone; keys made before the cut are there.
func TestForgetSurvivesPowerCut(t *testing.T) {
	ctx := context.Background()
	mem := vfs.NewCrashableMem()
	k, err := OpenDir(ctx, "keys", testMaster, DirOptions{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := k.Seal(ctx, "s/1", "f", []byte("kept"))
	if err != nil {
		t.Fatal(err)
	}
	lost, _ := k.Seal(ctx, "s/2", "f", []byte("lost"))
	if _, err := k.Forget(ctx, "s/2", "t"); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	_ = k.Close()
	k, err = OpenDir(ctx, "keys", testMaster, DirOptions{FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if pt, err := k.Open(ctx, "s/1", "f", kept); err != nil || string(pt) != "kept" {
		t.Fatalf("a key made before the cut: %q, %v", pt, err)
	}
	if _, err := k.Open(ctx, "s/2", "f", lost); !errors.Is(err, ErrForgotten) {
		t.Fatalf("a key forgotten before the cut: %v", err)
	}
}

// TestForgottenKeyLeavesNoBytes: after Forget, the destroyed key's
// stored bytes (its wrapping) are in no file of the keyring's
// directory.
func TestForgottenKeyLeavesNoBytes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	k, err := OpenDir(ctx, dir, testMaster, DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wrapped [][]byte
	for i := range 50 {
		if _, err := k.Seal(ctx, fmt.Sprintf("s/%d", i), "f", []byte("x")); err != nil {
			t.Fatal(err)
		}
		rec, err := k.b.(*dirBackend).getOne(dirKey(k.hash(fmt.Sprintf("s/%d", i))))
		if err != nil || rec == nil {
			t.Fatal(rec, err)
		}
		if i%5 == 0 {
			wrapped = append(wrapped, rec[5:])
		}
	}
	if n := countIn(t, dir, wrapped); n != len(wrapped) {
		t.Fatalf("before forgetting, %d of %d wrapped keys found on disk: the scan does not see them", n, len(wrapped))
	}
	for i := 0; i < 50; i += 5 {
		if _, err := k.Forget(ctx, fmt.Sprintf("s/%d", i), "t"); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Close(); err != nil { // obsolete tables are deleted by then
		t.Fatal(err)
	}
	if n := countIn(t, dir, wrapped); n != 0 {
		t.Fatalf("%d destroyed keys' bytes still on disk", n)
	}
}

func countIn(t *testing.T, dir string, needles [][]byte) int {
	t.Helper()
	found := map[int]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, n := range needles {
			if bytes.Contains(b, n) {
				found[i] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(found)
}

func TestMasterKey(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "master")
	if err := os.WriteFile(p, []byte(NewMasterKey()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadMasterKey(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable key file: %v", err)
	}
	_ = os.Chmod(p, 0o600)
	if _, err := LoadMasterKey(p); err != nil {
		t.Fatal(err)
	}
	t.Setenv(MasterKeyEnv, "")
	if _, err := LoadMasterKey(""); !errors.Is(err, ErrNoMasterKey) {
		t.Fatal(err)
	}
	t.Setenv(MasterKeyEnv, "short")
	if _, err := LoadMasterKey(""); err == nil {
		t.Fatal("a short key was taken")
	}
}

// BenchmarkSealOpen seals and opens a 32-byte field of one of 10,000
// subjects whose keys are in memory, and of subjects whose keys are
// read from the directory (a cache of 100 keys).
func BenchmarkSealOpen(b *testing.B) {
	for _, cacheKeys := range []int{100_000, 100} {
		b.Run(fmt.Sprintf("cache=%d", cacheKeys), func(b *testing.B) {
			ctx := context.Background()
			k, err := OpenDir(ctx, b.TempDir(), testMaster, DirOptions{Options: Options{CacheKeys: cacheKeys}})
			if err != nil {
				b.Fatal(err)
			}
			defer k.Close()
			subjects := make([]string, 10_000)
			for i := range subjects {
				subjects[i] = fmt.Sprintf("user/%d", i)
			}
			if err := k.Prepare(ctx, subjects); err != nil {
				b.Fatal(err)
			}
			pt := []byte("someone@example.org, 1 Main St.")
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				s := subjects[i%len(subjects)]
				env, err := k.Seal(ctx, s, "email", pt)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := k.Open(ctx, s, "email", env); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
