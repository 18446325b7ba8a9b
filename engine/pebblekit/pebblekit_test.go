package pebblekit

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

func TestClaim(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := []byte("\x00format")
	if err := Claim(db, key, "kind-1", "store"); err != nil {
		t.Fatalf("claiming an empty database: %v", err)
	}
	if err := Claim(db, key, "kind-1", "store"); err != nil {
		t.Fatalf("reopening as the same kind: %v", err)
	}
	if err := Claim(db, key, "view-1", "view"); err == nil || !strings.Contains(err.Error(), `view format "kind-1"`) {
		t.Fatalf("opening as another kind: %v", err)
	}
	other := []byte("\x01other-marker")
	if err := Claim(db, other, "x", "view"); err == nil || !strings.Contains(err.Error(), "not a logbook view") {
		t.Fatalf("a database with data but no marker: %v", err)
	}
}

func TestCheckpoint(t *testing.T) {
	db, err := pebble.Open(t.TempDir(), &pebble.Options{Logger: Logger(slog.New(slog.DiscardHandler), "test")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := []byte("\x00checkpoint")
	if pos, err := ReadCheckpoint(db, key); err != nil || pos != 0 {
		t.Fatalf("fresh database: checkpoint %d, %v; want 0, nil", pos, err)
	}
	const want = 1<<40 + 7
	if err := db.Set(key, AppendCheckpoint(nil, want), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if pos, err := ReadCheckpoint(db, key); err != nil || pos != want {
		t.Fatalf("checkpoint %d, %v; want %d", pos, err, want)
	}
	if err := db.Set(key, []byte("short"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCheckpoint(db, key); !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("5-byte checkpoint: %v, want ErrBadCheckpoint", err)
	}
}

func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	l := Logger(slog.New(slog.NewTextHandler(&buf, nil)), "view")
	l.Infof("opened WAL %d", 1)
	if buf.Len() != 0 {
		t.Fatalf("Infof logged %q; informational messages should be dropped", buf.String())
	}
	l.Errorf("disk %s", "full")
	if got := buf.String(); !strings.Contains(got, "level=ERROR") || !strings.Contains(got, `"pebble (view): disk full"`) {
		t.Fatalf("Errorf logged %q", got)
	}
	buf.Reset()
	defer func() {
		if r := recover(); r != "pebble (view): corrupt 3" {
			t.Fatalf("Fatalf panicked with %v", r)
		}
		if !strings.Contains(buf.String(), "corrupt 3") {
			t.Fatalf("Fatalf logged %q", buf.String())
		}
	}()
	l.Fatalf("corrupt %d", 3)
	t.Fatal("Fatalf returned")
}
