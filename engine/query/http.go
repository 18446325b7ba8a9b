package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/engine/ndjson"
	"github.com/logbook/logbook/engine/problem"
)

// Route is the route table entry of NewHandler's queries (mounted at
// /queries/): view queries, which read replicas serve.
var Route = httpkit.Spec{Method: "GET", Path: "/queries/", Role: auth.Viewer, Kind: httpkit.ViewQuery}

// HandlerOptions configure NewHandler.
type HandlerOptions struct {
	// Heartbeat is how long a live stream may stay silent before the
	// handler writes a keep-alive (an empty NDJSON line, an SSE comment),
	// so that proxies keep the connection and a vanished client is
	// noticed. Default 15 s; negative disables it.
	Heartbeat time.Duration
}

// NewHandler serves the reader's eight queries over HTTP, under /queries/
// (mount it with mux.Handle("/queries/", h)):
//
//	GET /queries/streams[?live=true]
//	GET /queries/events?stream=ID[&from=SEQ][&to=SEQ][&live=true]
//	GET /queries/all[?from=POSITION][&live=true][&removed=true]
//	GET /queries/tag/{tag}[?from=POSITION][&live=true]
//
// The response streams NDJSON (application/x-ndjson), one JSON object per
// line, flushed after every page; with "Accept: text/event-stream" or
// format=sse it is server-sent events instead, each event's SSE id its
// sequence number (stream queries) or position (the others), so that a
// reconnecting EventSource resumes after Last-Event-ID. See the package
// documentation for the objects. /queries/persistence-ids, the former
// name of /queries/streams, still answers the same.
func NewHandler(j *Reader, opts HandlerOptions) http.Handler {
	if opts.Heartbeat == 0 {
		opts.Heartbeat = 15 * time.Second
	}
	h := &handler{j: j, opts: opts}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /queries/streams", h.streamIDs)
	mux.HandleFunc("GET /queries/persistence-ids", h.streamIDs) // the former name, kept for clients
	mux.HandleFunc("GET /queries/events", h.events)
	mux.HandleFunc("GET /queries/all", h.all)
	mux.HandleFunc("GET /queries/tag/{tag}", h.tag)
	mux.HandleFunc("/queries/", h.unknown)
	return mux
}

type handler struct {
	j    *Reader
	opts HandlerOptions
}

func badParam(w http.ResponseWriter, name, detail string) {
	p := problem.New(http.StatusBadRequest, detail)
	p.Extra = map[string]any{"parameter": name}
	problem.Write(w, p)
}

var queryPaths = map[string]bool{
	"/queries/streams":         true,
	"/queries/persistence-ids": true,
	"/queries/events":          true,
	"/queries/all":             true,
}

func (h *handler) unknown(w http.ResponseWriter, r *http.Request) {
	if queryPaths[r.URL.Path] || strings.HasPrefix(r.URL.Path, "/queries/tag/") && len(r.URL.Path) > len("/queries/tag/") {
		w.Header().Set("Allow", "GET, HEAD")
		problem.Write(w, problem.New(http.StatusMethodNotAllowed, "queries are read with GET"))
		return
	}
	problem.Write(w, problem.New(http.StatusNotFound, fmt.Sprintf("no query at %s; see /queries/streams, /queries/events, /queries/all, /queries/tag/{tag}", r.URL.Path)))
}

// params reads a query's parameters, refusing unknown ones so that a typo
// such as "form=" is an error instead of a silent full read.
type params struct {
	w       http.ResponseWriter
	v       url.Values
	allowed map[string]bool
}

func newParams(w http.ResponseWriter, r *http.Request, allowed ...string) (*params, bool) {
	p := &params{w: w, v: r.URL.Query(), allowed: map[string]bool{"format": true}}
	for _, a := range allowed {
		p.allowed[a] = true
	}
	for k := range p.v {
		if !p.allowed[k] {
			badParam(w, k, fmt.Sprintf("unknown parameter %q", k))
			return nil, false
		}
	}
	return p, true
}

func (p *params) uint(name string) (uint64, bool) {
	s := p.v.Get(name)
	if s == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		badParam(p.w, name, fmt.Sprintf("%s must be a non-negative integer, got %q", name, s))
		return 0, false
	}
	return n, true
}

func (p *params) bool(name string) (bool, bool) {
	s := p.v.Get(name)
	if s == "" {
		return false, true
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		badParam(p.w, name, fmt.Sprintf("%s must be true or false, got %q", name, s))
		return false, false
	}
	return b, true
}

// format decides between NDJSON and SSE.
func (p *params) sse(r *http.Request) (bool, bool) {
	switch p.v.Get("format") {
	case "ndjson":
		return false, true
	case "sse":
		return true, true
	case "":
	default:
		badParam(p.w, "format", fmt.Sprintf("format must be ndjson or sse, got %q", p.v.Get("format")))
		return false, false
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
			return true, true
		}
	}
	return false, true
}

// resume applies an SSE client's Last-Event-ID: the id of the last event
// it received, so it resumes just after it.
func resume(r *http.Request, sse bool, from uint64) uint64 {
	if !sse {
		return from
	}
	if id, err := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64); err == nil && id+1 > from {
		return id + 1
	}
	return from
}

func (h *handler) streamIDs(w http.ResponseWriter, r *http.Request) {
	p, ok := newParams(w, r, "live")
	if !ok {
		return
	}
	live, ok := p.bool("live")
	if !ok {
		return
	}
	sse, ok := p.sse(r)
	if !ok {
		return
	}
	q := h.j.CurrentStreamIDs()
	if live {
		q = h.j.StreamIDs()
	}
	h.serve(w, r, sse, func(ctx context.Context, s *ndjson.Writer) (int, error) {
		ids, err := q.Next(ctx)
		for _, id := range ids {
			s.Item("", struct {
				Stream string `json:"stream"`
			}{id})
		}
		return len(ids), err
	})
}

func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	p, ok := newParams(w, r, "stream", "from", "to", "live")
	if !ok {
		return
	}
	stream := p.v.Get("stream")
	if stream == "" {
		badParam(w, "stream", "stream is required")
		return
	}
	if err := h.j.limits.ValidateStreamID(stream); err != nil {
		badParam(w, "stream", err.Error())
		return
	}
	from, live, sse, ok := p.follow(r)
	if !ok {
		return
	}
	to, ok := p.uint("to")
	if !ok {
		return
	}
	if to > 0 && to < max(from, 1) {
		badParam(w, "to", fmt.Sprintf("to (%d) is before from (%d)", to, from))
		return
	}
	q := h.j.CurrentEventsByStream(stream, from, to)
	if live {
		q = h.j.EventsByStream(stream, from, to)
	}
	h.runEvents(w, r, sse, q, true)
}

func (h *handler) all(w http.ResponseWriter, r *http.Request) {
	p, ok := newParams(w, r, "from", "live", "removed")
	if !ok {
		return
	}
	from, live, sse, ok := p.follow(r)
	if !ok {
		return
	}
	mark, ok := p.bool("removed")
	if !ok {
		return
	}
	q := h.j.CurrentAllEvents(from)
	if live {
		q = h.j.AllEvents(from)
	}
	if !mark {
		h.runEvents(w, r, sse, q, false)
		return
	}
	// With removed=true a line {"removed_through": N} comes before an
	// event whose position skips positions the log no longer holds
	// (deleted, truncated or expired events, whose positions are never
	// reused), so that a follower checking the positions for a gap can
	// tell a removal from a loss.
	next := max(from, 1)
	h.serve(w, r, sse, func(ctx context.Context, s *ndjson.Writer) (int, error) {
		evs, err := q.Next(ctx)
		for i := range evs {
			pos := evs[i].Position
			if pos > next {
				s.Item("", Removed{Through: pos - 1})
			}
			s.Item(strconv.FormatUint(pos, 10), toJSON(&evs[i]))
			next = pos + 1
		}
		return len(evs), err
	})
}

// Removed is the line /queries/all?removed=true writes before an event
// whose position skips removed ones: every position up to Through that
// the stream did not give is removed.
type Removed struct {
	Through uint64 `json:"removed_through"`
}

func (h *handler) tag(w http.ResponseWriter, r *http.Request) {
	tag := r.PathValue("tag")
	if err := h.j.limits.ValidateTag(tag); err != nil {
		badParam(w, "tag", err.Error())
		return
	}
	p, ok := newParams(w, r, "from", "live")
	if !ok {
		return
	}
	from, live, sse, ok := p.follow(r)
	if !ok {
		return
	}
	q := h.j.CurrentEventsByTag(tag, from)
	if live {
		q = h.j.EventsByTag(tag, from)
	}
	h.runEvents(w, r, sse, q, false)
}

// follow reads what every event query takes: from, live, and whether to
// answer as server-sent events — resuming after Last-Event-ID if the
// client sends one.
func (p *params) follow(r *http.Request) (from uint64, live, sse, ok bool) {
	if from, ok = p.uint("from"); !ok {
		return
	}
	if live, ok = p.bool("live"); !ok {
		return
	}
	if sse, ok = p.sse(r); !ok {
		return
	}
	return resume(r, sse, from), live, sse, true
}

func (h *handler) runEvents(w http.ResponseWriter, r *http.Request, sse bool, q *Events, bySeq bool) {
	h.serve(w, r, sse, func(ctx context.Context, s *ndjson.Writer) (int, error) {
		evs, err := q.Next(ctx)
		for i := range evs {
			id := evs[i].Position
			if bySeq {
				id = evs[i].Seq
			}
			s.Item(strconv.FormatUint(id, 10), toJSON(&evs[i]))
		}
		return len(evs), err
	})
}

// EventJSON is an event as the HTTP handler writes it. Payloads that are
// valid JSON are embedded as they are, in "data"; others are base64 in
// "data_base64" (an empty payload is "data_base64": ""). Exactly one of
// the two is present, so a client never has to guess the encoding.
type EventJSON struct {
	Stream     string            `json:"stream"`
	Seq        uint64            `json:"seq"`
	Position   uint64            `json:"position"`
	ID         string            `json:"id"`
	Type       string            `json:"type"`
	Version    int               `json:"version"`
	Tags       []string          `json:"tags"`
	Meta       map[string]string `json:"meta"`
	Data       json.RawMessage   `json:"data,omitempty"`
	DataBase64 *[]byte           `json:"data_base64,omitempty"`
	Time       time.Time         `json:"time"`
}

func toJSON(ev *eventstore.Event) EventJSON {
	j := EventJSON{
		Stream: ev.Stream, Seq: ev.Seq, Position: ev.Position, ID: ev.ID.String(),
		Type: ev.Type, Version: ev.Version, Tags: ev.Tags, Meta: ev.Meta, Time: ev.Time,
	}
	if j.Tags == nil {
		j.Tags = []string{}
	}
	if j.Meta == nil {
		j.Meta = map[string]string{}
	}
	if len(ev.Data) > 0 && json.Valid(ev.Data) {
		j.Data = ev.Data
	} else {
		data := ev.Data
		if data == nil {
			data = []byte{}
		}
		j.DataBase64 = &data
	}
	return j
}

// serve answers a query whose parameters are valid: it pulls pages with
// next, which writes them to s, until the query ends, fails, or the
// client goes away.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, sse bool, next func(context.Context, *ndjson.Writer) (int, error)) {
	s := h.start(w, sse)
	if r.Method == http.MethodHead {
		return // the headers are the answer; a live query would never end
	}
	h.run(r.Context(), s, next)
}

func (h *handler) start(w http.ResponseWriter, sse bool) *ndjson.Writer {
	s := ndjson.Start(w, sse)
	// The client learns at once that the query runs, even if a live one
	// has nothing to say for a while.
	s.Flush()
	return s
}

func (h *handler) run(ctx context.Context, s *ndjson.Writer, next func(context.Context, *ndjson.Writer) (int, error)) {
	for s.Err() == nil {
		nctx, cancel := ctx, context.CancelFunc(func() {})
		if h.opts.Heartbeat > 0 {
			nctx, cancel = context.WithTimeout(ctx, h.opts.Heartbeat)
		}
		n, err := next(nctx, s)
		cancel()
		switch {
		case err == nil:
			if n > 0 {
				s.Flush()
			}
		case errors.Is(err, io.EOF):
			// A current query is over. SSE clients reconnect on their
			// own unless told so.
			if s.SSE() {
				s.Event("end", struct{}{})
			}
			s.Flush()
			return
		case errors.Is(err, ErrClosed):
			// The server is shutting down: end the response, and let an
			// SSE client reconnect (to the next server) after its last id.
			s.Flush()
			return
		case ctx.Err() != nil:
			return // the client went away
		case errors.Is(err, context.DeadlineExceeded) && nctx.Err() != nil:
			// Only the heartbeat timer ran out; the query stands where
			// it was and resumes with the next call.
			s.Heartbeat()
			s.Flush()
		default:
			status := http.StatusInternalServerError
			if errors.Is(err, eventstore.ErrClosed) {
				status = http.StatusServiceUnavailable
			}
			s.Event("error", problem.New(status, err.Error()))
			s.Flush()
			return
		}
	}
}
