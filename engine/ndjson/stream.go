// Package ndjson writes the answer of a streaming HTTP query — a
// stream query, a windowed aggregation's push query — as NDJSON (one
// JSON value per line) or as server-sent events, the two forms every
// logbook stream takes.
package ndjson

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Writer writes one response's items. After the first write error every
// call does nothing, and Err reports it.
type Writer struct {
	w   *bufio.Writer
	rc  *http.ResponseController
	sse bool
	enc *json.Encoder
	err error
}

// Start answers 200 with the stream's content type (NDJSON, or
// text/event-stream with sse) and returns its writer.
func Start(w http.ResponseWriter, sse bool) *Writer {
	ct := "application/x-ndjson"
	if sse {
		ct = "text/event-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	s := &Writer{w: bufio.NewWriterSize(w, 32<<10), rc: http.NewResponseController(w), sse: sse}
	s.enc = json.NewEncoder(s.w)
	s.enc.SetEscapeHTML(false)
	return s
}

// SSE reports whether the stream is server-sent events.
func (s *Writer) SSE() bool { return s.sse }

// Err is the first write error, if any.
func (s *Writer) Err() error { return s.err }

// Item writes v: an NDJSON line, or an SSE data event with id (if not
// empty) as its event id.
func (s *Writer) Item(id string, v any) {
	if s.err != nil {
		return
	}
	if s.sse {
		if id != "" {
			fmt.Fprintf(s.w, "id: %s\n", id)
		}
		_, _ = s.w.WriteString("data: ")
	}
	// Encode ends the value with a newline: the NDJSON line end, or the
	// end of the SSE data line.
	if err := s.enc.Encode(v); err != nil {
		s.err = err
		return
	}
	if s.sse {
		_ = s.w.WriteByte('\n')
	}
}

// Event writes a named event: an SSE event of that name, or in NDJSON
// the line {name: v}.
func (s *Writer) Event(name string, v any) {
	if s.err != nil {
		return
	}
	if !s.sse {
		s.err = s.enc.Encode(map[string]any{name: v})
		return
	}
	fmt.Fprintf(s.w, "event: %s\ndata: ", name)
	if s.err = s.enc.Encode(v); s.err == nil {
		_ = s.w.WriteByte('\n')
	}
}

// Heartbeat writes what keeps an idle stream open through proxies (an
// SSE comment, or an empty NDJSON line) and finds out when the client has
// gone.
func (s *Writer) Heartbeat() {
	if s.err != nil {
		return
	}
	if s.sse {
		_, _ = s.w.WriteString(":\n\n")
	} else {
		_ = s.w.WriteByte('\n')
	}
}

// Flush sends what was written to the client.
func (s *Writer) Flush() {
	if s.err != nil {
		return
	}
	if err := s.w.Flush(); err != nil {
		s.err = err
		return
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.err = err
	}
}
