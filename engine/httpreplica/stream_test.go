package httpreplica_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/httpreplica"
)

// A primary (or anything in its place) that sends a line without end must
// not make the replica hold it: reading stops with an error at the limit.
func TestLongLineIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(line(1)))
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		_, _ = w.Write([]byte(`{"stream":"`))
		for i := 0; i < 100; i++ { // 100 MiB, no line break
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	s := httpreplica.New(srv.URL, "x")
	defer s.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	evs, err := s.ReadAll(context.Background(), 1, 10)
	runtime.ReadMemStats(&after)
	if err == nil || !errors.Is(err, httpreplica.ErrLineTooLong) {
		t.Fatalf("ReadAll: %d events, %v; want ErrLineTooLong", len(evs), err)
	}
	if len(evs) != 1 {
		t.Fatalf("%d events before the long line, want 1", len(evs))
	}
	// The line buffer doubles up to MaxLine: about 2×MaxLine in all.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 3*httpreplica.MaxLine {
		t.Fatalf("reading allocated %d MiB for one line", grew>>20)
	}
}

// gapPrimary serves events 1–5 and then 7, and keeps a live stream open.
func gapPrimary() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range []uint64{1, 2, 3, 4, 5, 7} {
			_, _ = w.Write([]byte(line(p)))
		}
		w.(http.Flusher).Flush()
		if r.URL.Query().Get("live") == "true" {
			<-r.Context().Done()
		}
	}))
}

// The log has no gaps: a stream that jumps from 5 to 7 lost an event, and
// a replica that went on would serve a view without it.
func TestGapIsAnError(t *testing.T) {
	srv := gapPrimary()
	defer srv.Close()
	s := httpreplica.New(srv.URL, "x")
	defer s.Close()
	evs, err := s.ReadAll(context.Background(), 1, 100)
	if !errors.Is(err, httpreplica.ErrGap) || len(evs) != 5 {
		t.Fatalf("ReadAll: %d events, %v; want 5 and ErrGap", len(evs), err)
	}

	sub, err := s.Subscribe(context.Background(), eventstore.All(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got []uint64
	for {
		b, err := sub.Next(ctx)
		if err != nil {
			if !errors.Is(err, httpreplica.ErrGap) {
				t.Fatalf("Next after %v: %v, want ErrGap", got, err)
			}
			break
		}
		for _, ev := range b {
			got = append(got, ev.Position)
		}
	}
	if len(got) != 5 || got[4] != 5 {
		t.Fatalf("delivered %v before the gap, want 1–5", got)
	}
}

// logBuffer collects log records.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// A malformed line is logged as a warning, and so is the reconnect that
// follows it; the stream then goes on from the next position.
func TestMalformedLineAndReconnectAreLogged(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if conns.Add(1) == 1 {
			_, _ = w.Write([]byte(line(1) + "{not json\n"))
			return
		}
		from := r.URL.Query().Get("from")
		if from != "2" {
			t.Errorf("reconnected from %s, want 2", from)
		}
		_, _ = w.Write([]byte(line(2)))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	var logs logBuffer
	s := httpreplica.New(srv.URL, "x")
	s.Log = slog.New(slog.NewTextHandler(&logs, nil))
	defer s.Close()
	sub, err := s.Subscribe(context.Background(), eventstore.All(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for sub.Cursor() <= 2 {
		if _, err := sub.Next(ctx); err != nil {
			t.Fatalf("Next: %v (log: %s)", err, logs.String())
		}
	}
	out := logs.String()
	malformed := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "malformed") {
			malformed++
		}
	}
	if malformed != 1 || !strings.Contains(out, "level=WARN") || !strings.Contains(out, "reconnect") {
		t.Fatalf("log does not report the malformed line and the reconnect once:\n%s", out)
	}
}
