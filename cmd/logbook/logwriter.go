package main

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// logWriter keeps what the process logs for up to logFlushDelay (or
// logFlushSize bytes) and writes it in one system call. A server logs a
// line per request; written one by one, those lines were a third of its
// system calls under load. Warnings and errors are written at once
// (flushingHandler), and so is everything kept when the command ends.
// What a process killed outright had kept — at most logFlushDelay of
// information lines — is lost.
type logWriter struct {
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

func newLogWriter(w io.Writer) *logWriter {
	l := &logWriter{w: w}
	l.timer = time.AfterFunc(time.Hour, l.Flush)
	l.timer.Stop()
	return l
}

func (l *logWriter) Write(p []byte) (int, error) {
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
func (l *logWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked()
}

func (l *logWriter) flushLocked() {
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

// flushingHandler writes a record of level warn or above at once, with
// whatever information lines were kept before it.
type flushingHandler struct {
	slog.Handler
	w *logWriter
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
