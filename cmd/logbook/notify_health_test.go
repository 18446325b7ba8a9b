package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/services/notify/userscdc"
)

type readyView struct{}

func (readyView) Ready() (string, error) { return "view", nil }
func (readyView) Position() userscdc.LSN { return 0 }

type failable struct{ err atomic.Pointer[error] }

func (f *failable) Err() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

// notify serve's /healthz answers 503 once the service itself has failed
// (its state or pipeline stopped), without the error's text, though the
// store and the users view answer.
func TestNotifyHealthzReportsServiceFailure(t *testing.T) {
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	svc := &failable{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Config{Name: "notify test", Addr: addr, Check: notifyCheck(store, readyView{}, svc),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, http.NotFoundHandler())
	}()
	defer func() { cancel(); <-done }()
	get := func() (int, string) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			res, err := http.Get("http://" + addr + "/healthz")
			if err == nil {
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				return res.StatusCode, string(b)
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if code, body := get(); code != 200 {
		t.Fatalf("healthy: %d %s", code, body)
	}
	failure := errors.New("secret detail of the state's failure")
	svc.err.Store(&failure)
	code, body := get()
	if code != http.StatusServiceUnavailable || strings.Contains(body, "secret") {
		t.Fatalf("after the service failed: %d %q, want 503 without the error's text", code, body)
	}
}
