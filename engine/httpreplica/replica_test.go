package httpreplica_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/httpreplica"
)

func line(pos uint64) string {
	return fmt.Sprintf(`{"stream":"s","seq":%d,"position":%d,"id":"%s","type":"T","version":0,"tags":[],"meta":{},"data":{},"time":"2024-01-01T00:00:00Z"}`+"\n",
		pos, pos, eventstore.NewID().String())
}

// Serves n events, then keeps the live stream open until the client leaves.
func primary(t *testing.T, n int, endAfter bool) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			b.WriteString(line(uint64(i)))
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = w.Write([]byte(b.String()))
		w.(http.Flusher).Flush()
		if endAfter {
			return
		}
		<-r.Context().Done()
	}))
}

// Closing a subscription whose consumer stopped reading must not leave the
// pump goroutine blocked forever on its full channel.
func TestPumpLeaksAfterClose(t *testing.T) {
	srv := primary(t, 6000, false)
	defer srv.Close()
	s := httpreplica.New(srv.URL, "x")
	defer s.Close()
	before := runtime.NumGoroutine()
	sub, err := s.Subscribe(context.Background(), eventstore.All(), 1)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the pump fills its 4096 slots
	_ = sub.Close()
	time.Sleep(300 * time.Millisecond)
	s.Close()
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<16)
		n := runtime.Stack(buf, true)
		if strings.Contains(string(buf[:n]), "httpreplica.(*subscription).pump") {
			t.Fatalf("pump goroutine still running after Close (%d -> %d goroutines)", before, after)
		}
	}
}

// After Close, Next should report eventstore.ErrClosed.
func TestNextAfterClose(t *testing.T) {
	srv := primary(t, 3, false)
	defer srv.Close()
	s := httpreplica.New(srv.URL, "x")
	sub, err := s.Subscribe(context.Background(), eventstore.All(), 1)
	if err != nil {
		t.Fatal(err)
	}
	_ = sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var last error
	for i := 0; i < 10; i++ {
		_, err := sub.Next(ctx)
		if err != nil {
			last = err
			break
		}
	}
	if !errors.Is(last, eventstore.ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", last)
	}
}

// Cursor is read while Next runs (the interface says all methods are
// safe for concurrent use; tailSub's cursor is atomic).
func TestCursorRace(t *testing.T) {
	srv := primary(t, 2000, false)
	defer srv.Close()
	s := httpreplica.New(srv.URL, "x")
	sub, err := s.Subscribe(context.Background(), eventstore.All(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 1000; i++ {
			_ = sub.Cursor()
		}
	}()
	for sub.Cursor() <= 2000 {
		if _, err := sub.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	<-done
}

// TestWritesAndUnofferedReads: writes are refused as read-only, the reads a
// replica does not offer as unsupported, and neither reaches the primary.
func TestWritesAndUnofferedReads(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "unexpected", http.StatusTeapot)
	}))
	defer srv.Close()
	s := httpreplica.New(srv.URL, "tok")
	defer s.Close()
	ctx := t.Context()
	if _, err := s.Append(ctx, "s", eventstore.Any, []eventstore.NewEvent{{Type: "T"}}); !errors.Is(err, eventstore.ErrReadOnly) {
		t.Errorf("Append: %v, want ErrReadOnly", err)
	}
	if err := s.SaveSnapshot(ctx, eventstore.Snapshot{Stream: "s", Seq: 1}); !errors.Is(err, eventstore.ErrReadOnly) {
		t.Errorf("SaveSnapshot: %v, want ErrReadOnly", err)
	}
	_, err := s.ReadStream(ctx, "s", 1, 10)
	if !errors.Is(err, errors.ErrUnsupported) || errors.Is(err, eventstore.ErrReadOnly) {
		t.Errorf("ReadStream: %v, want ErrUnsupported", err)
	}
	if _, err := s.Subscribe(ctx, eventstore.Tagged("x"), 1); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Subscribe to a tag: %v, want ErrUnsupported", err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d requests reached the primary", n)
	}
}
