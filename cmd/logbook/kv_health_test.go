package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/pebblekv"
)

// startKV runs serveKV on repo and returns its address once /healthz
// answers at all.
func startKV(t *testing.T, repo *kv.Repository) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveKV(ctx, &env{stdout: io.Discard, stderr: io.Discard, log: slog.New(slog.NewTextHandler(io.Discard, nil))}, repo, server.Config{Addr: addr})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveKV: %v", err)
		}
	})
	for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(20 * time.Millisecond) {
		if res, err := http.Get("http://" + addr + "/healthz"); err == nil {
			res.Body.Close()
			return addr
		}
	}
	t.Fatal("kv serve did not answer /healthz")
	return ""
}

func healthz(t *testing.T, addr string) (int, string) {
	t.Helper()
	res, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// valueCounter is a backend that counts the value bytes its Gets return.
type valueCounter struct {
	kv.Backend
	bytes atomic.Int64
}

func (c *valueCounter) Get(ctx context.Context, id string) (kv.Entry, bool, error) {
	e, ok, err := c.Backend.Get(ctx, id)
	c.bytes.Add(int64(len(e.Value)))
	return e, ok, err
}

// TestKVHealthzReadsNoValue: /healthz, which anyone may ask, does not
// read a value — not even one a writer stored under "healthz" at the
// size limit.
func TestKVHealthzReadsNoValue(t *testing.T) {
	b, err := pebblekv.Open(t.TempDir(), pebblekv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	c := &valueCounter{Backend: b}
	repo := kv.New(c, kv.Limits{})
	defer repo.Close()
	if err := repo.Add(context.Background(), "healthz", bytes.Repeat([]byte("h"), 8<<20)); err != nil {
		t.Fatal(err)
	}
	addr := startKV(t, repo)
	c.bytes.Store(0)
	for range 5 {
		if code, body := healthz(t, addr); code != 200 {
			t.Fatalf("/healthz %d %s", code, body)
		}
	}
	if n := c.bytes.Load(); n != 0 {
		t.Fatalf("5 /healthz requests read %d value bytes through the backend", n)
	}
}

// TestKVHealthzAfterFailedCommit: once a commit fails (here the WAL's
// sync), the embedded backend refuses every later write; /healthz says
// so with 503, without the error's text.
func TestKVHealthzAfterFailedCommit(t *testing.T) {
	fault := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".log") && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo || op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt) {
			return errorfs.ErrInjected
		}
		return nil
	})}
	b, err := pebblekv.Open(t.TempDir(), pebblekv.Options{FS: errorfs.Wrap(vfs.Default, fault)})
	if err != nil {
		t.Fatal(err)
	}
	repo := kv.New(b, kv.Limits{})
	defer repo.Close()
	ctx := context.Background()
	if err := repo.Add(ctx, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	addr := startKV(t, repo)
	if code, body := healthz(t, addr); code != 200 {
		t.Fatalf("/healthz before the failure: %d %s", code, body)
	}
	fault.On()
	if err := repo.Add(ctx, "b", []byte("2")); err == nil {
		t.Fatal("an add whose commit failed was acknowledged")
	}
	fault.Off()
	if err := repo.Add(ctx, "c", []byte("3")); err == nil {
		t.Fatal("an add after a failed commit was acknowledged")
	}
	code, body := healthz(t, addr)
	if code != 503 {
		t.Fatalf("/healthz after a failed commit: %d %s, want 503", code, body)
	}
	if strings.Contains(body, "injected") || strings.Contains(body, "commit") {
		t.Fatalf("/healthz shows the error: %s", body)
	}
}
