package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// LogWriter keeps what a process logs for up to logFlushDelay (50 ms) or
// logFlushSize bytes (32 KiB) and writes it in one system call. A server
// logs a line per request (the access log); written one by one, those
// lines are a large share of its system calls under load. A logger made
// by NewLogger writes warnings and errors at once, and the process calls
// Flush when it ends. What a process killed outright had kept — at most
// logFlushDelay of information lines — is lost.
type LogWriter struct {
	mu    sync.Mutex
	w     io.Writer
	buf   []byte
	timer *time.Timer
}

// logFlushDelay bounds how long a line is kept; logFlushSize how much.
const (
	logFlushDelay = 50 * time.Millisecond
	logFlushSize  = 32 << 10
)

// NewLogWriter returns a LogWriter that writes to w.
func NewLogWriter(w io.Writer) *LogWriter {
	l := &LogWriter{w: w}
	l.timer = time.AfterFunc(time.Hour, l.Flush)
	l.timer.Stop()
	return l
}

// Write keeps p, to be written with what comes after it within
// logFlushDelay. It never fails.
func (l *LogWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf)+len(p) > logFlushSize {
		l.flushLocked()
	}
	if len(l.buf) == 0 {
		l.timer.Reset(logFlushDelay)
	}
	l.buf = append(l.buf, p...)
	return len(p), nil
}

// Flush writes what is kept.
func (l *LogWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked()
}

func (l *LogWriter) flushLocked() {
	if len(l.buf) == 0 {
		return
	}
	l.timer.Stop()
	// A log that cannot be written has nowhere to say so.
	_, _ = l.w.Write(l.buf)
	l.buf = l.buf[:0]
	if cap(l.buf) > 2*logFlushSize {
		l.buf = nil
	}
}

// NewLogger returns a logger of records at level and above on w, in
// format "text" (slog's key=value lines) or "json" (one object a line).
// A record of level warn or above is written at once, with whatever
// information lines w kept before it.
func NewLogger(w *LogWriter, format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "text":
		return slog.New(flushingHandler{slog.NewTextHandler(w, opts), w}), nil
	case "json":
		return slog.New(flushingHandler{slog.NewJSONHandler(w, opts), w}), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

// flushingHandler writes a record of level warn or above at once, with
// whatever information lines were kept before it.
type flushingHandler struct {
	slog.Handler
	w *LogWriter
}

func (h flushingHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		h.w.Flush()
	}
	return err
}

func (h flushingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return flushingHandler{h.Handler.WithAttrs(as), h.w}
}

func (h flushingHandler) WithGroup(name string) slog.Handler {
	return flushingHandler{h.Handler.WithGroup(name), h.w}
}
