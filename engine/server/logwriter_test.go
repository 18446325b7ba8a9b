package server

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer counts the writes it takes.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *lockedBuffer) get() (string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String(), l.writes
}

func TestLogWriterKeepsInformationAndFlushesWarnings(t *testing.T) {
	out := &lockedBuffer{}
	lw := NewLogWriter(out)
	log, err := NewLogger(lw, "text", slog.LevelInfo)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		log.Info("http request", "n", i)
	}
	if s, _ := out.get(); s != "" {
		t.Fatalf("information lines written at once: %q", s[:min(len(s), 80)])
	}
	log.Warn("something is off")
	s, writes := out.get()
	if strings.Count(s, "http request") != 100 || !strings.Contains(s, "something is off") || writes != 1 {
		t.Fatalf("after a warning: %d writes, %d lines", writes, strings.Count(s, "\n"))
	}
	log.Info("later")
	deadline := time.Now().Add(5 * time.Second)
	for {
		if s, _ := out.get(); strings.Contains(s, "later") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an information line was never written")
		}
		time.Sleep(10 * time.Millisecond)
	}
	log.Info("at exit")
	lw.Flush()
	if s, _ := out.get(); !strings.Contains(s, "at exit") {
		t.Fatal("Flush left a line behind")
	}
}
