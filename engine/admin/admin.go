// Package admin is the operator's look inside a logbook server: an HTTP
// API, mounted by every serving command under /admin/api/, that the admin
// page of the web UI (admin.html) reads.
//
//	GET    /admin/api/me                 the token's role and the actions it may take here
//	GET    /admin/api/head               the log's head
//	GET    /admin/api/streams            stream ids by prefix, a page at a time (prefix, after, limit)
//	GET    /admin/api/streams/{stream}   a stream's events with their metadata and decoded payloads (from, limit)
//	GET    /admin/api/positions          every view's position and lag, the Kafka publishers' state
//	DELETE /admin/api/streams/{stream}   delete a stream (mode=soft|hard)             — admin role
//	POST   /admin/api/truncate           remove a stream's events before a sequence number — admin role
//	POST   /admin/api/forget             forget a data subject                         — admin role
//	GET    /admin/api/openapi.json       the API's OpenAPI document (public)
//
// Any token reads (auth.Viewer); deleting, truncating and forgetting take
// a token of role auth.Admin. The package reads the store itself and
// knows nothing of how a store deletes or how a subject is forgotten:
// those are hooks in Options (a nil hook leaves its action out: 501, and
// GET /admin/api/me says so, so that the page shows no button for it).
// Every answer is bounded: pages of stream ids and of events have a
// maximum length, and a page of events a maximum payload size.
package admin

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/engine/problem"
)

//go:embed openapi.json
var openapiJSON []byte

// OpenAPI is the admin API's OpenAPI document.
func OpenAPI() []byte { return openapiJSON }

// Problem types of the admin API.
const (
	// TypeNotAvailable (501): the action has no hook on this server (its
	// store cannot delete, or it keeps no data subjects).
	TypeNotAvailable = "urn:logbook:problem:admin:not-available"
	// TypeNoStream (404): the stream has no events.
	TypeNoStream = "urn:logbook:problem:admin:no-stream"
	// TypeDeleted (410): the stream was deleted (softly, or for good:
	// the detail says which).
	TypeDeleted = "urn:logbook:problem:admin:deleted"
)

// ErrNoStream is what a Delete or Truncate hook returns (wrapped) for a
// stream that does not exist: the API answers 404.
var ErrNoStream = errors.New("admin: no such stream")

// Default and maximum page sizes.
const (
	DefaultStreams = 50  // stream ids per page when the request names no limit
	MaxStreams     = 500 // the most stream ids a page may ask for
	DefaultEvents  = 20  // events per page when the request names no limit
	MaxEvents      = 200 // the most events a page may ask for
	// MaxPageBytes bounds the payloads of one page of events: a page
	// ends after the event that reaches it (a page holds at least one
	// event, and an event is at most the store's limit).
	MaxPageBytes = 4 << 20
)

// Position is one view's (or subscription's) progress through the log.
type Position struct {
	Name       string  `json:"name"`
	Position   uint64  `json:"position"`    // the last log position it has applied
	LagEvents  uint64  `json:"lag_events"`  // positions between the head and Position (of those it follows)
	LagSeconds float64 `json:"lag_seconds"` // the age of the oldest event it has not applied yet
}

// PublisherState is a Kafka publisher's state as this process knows it.
type PublisherState struct {
	Topic     string `json:"topic"`
	Running   bool   `json:"running"`   // this process publishes (holds the lock) now
	Position  uint64 `json:"position"`  // the last log position known to be in Kafka
	Lag       uint64 `json:"lag"`       // head - Position; filled in by the API
	Published uint64 `json:"published"` // events this process has published
	Restarts  uint64 `json:"restarts"`  // publishers of this process that stopped with an error
	// LastError is the publisher's last failure, if any, and when.
	LastError     string     `json:"last_error,omitempty"`
	LastErrorTime *time.Time `json:"last_error_time,omitempty"`
}

// Options configure the API. Every field may be left zero.
type Options struct {
	// Positions returns every view's position and lag (nil: none);
	// ViewPositions reads them from a Prometheus registry.
	Positions func(ctx context.Context) ([]Position, error)
	// Publishers returns the state of the process's Kafka publishers
	// (nil: none).
	Publishers func(ctx context.Context) []PublisherState
	// Delete deletes a stream, hard or soft; nil: deletion is not offered.
	Delete func(ctx context.Context, stream string, hard bool) error
	// Truncate removes a stream's events before the sequence number
	// before; nil: truncation is not offered.
	Truncate func(ctx context.Context, stream string, before uint64) error
	// Forget forgets a data subject (its personal data becomes
	// unreadable); nil: forgetting is not offered.
	Forget func(ctx context.Context, subject string) error
}

// WithStore returns o with Delete and Truncate, where o leaves them nil,
// from store if it (or a store it decorates, through Unwrap) is an
// eventstore.Deleter.
func (o Options) WithStore(store eventstore.Store) Options {
	d, ok := find[eventstore.Deleter](store)
	if !ok {
		return o
	}
	if o.Delete == nil {
		o.Delete = func(ctx context.Context, stream string, hard bool) error {
			mode := eventstore.DeleteSoft
			if hard {
				mode = eventstore.DeleteHard
			}
			return d.DeleteStream(ctx, stream, mode)
		}
	}
	if o.Truncate == nil {
		o.Truncate = d.TruncateStream
	}
	return o
}

// find looks for an optional capability of the store through decorators
// that offer Unwrap (such as the metrics package's).
func find[T any](s eventstore.Store) (T, bool) {
	for s != nil {
		if c, ok := s.(T); ok {
			return c, true
		}
		u, ok := s.(interface{ Unwrap() eventstore.Store })
		if !ok {
			break
		}
		s = u.Unwrap()
	}
	var zero T
	return zero, false
}

// API serves the admin API over one store.
type API struct {
	store  eventstore.Store
	tokens *auth.Tokens
	opts   Options
}

// Routes is the admin API's route table.
var Routes = []httpkit.Route[*API]{
	httpkit.NewRoute("GET /admin/api/me", auth.Viewer, httpkit.Anywhere, (*API).me),
	httpkit.NewRoute("GET /admin/api/head", auth.Viewer, httpkit.Anywhere, (*API).head),
	httpkit.NewRoute("GET /admin/api/streams", auth.Viewer, httpkit.Anywhere, (*API).streams).WithQuery("prefix", "after", "limit"),
	httpkit.NewRoute("GET /admin/api/streams/{stream...}", auth.Viewer, httpkit.Anywhere, (*API).events).WithQuery("from", "limit"),
	httpkit.NewRoute("GET /admin/api/positions", auth.Viewer, httpkit.Anywhere, (*API).positions),
	httpkit.NewRoute("DELETE /admin/api/streams/{stream...}", auth.Admin, httpkit.Anywhere, (*API).delete).WithQuery("mode"),
	httpkit.NewRoute("POST /admin/api/truncate", auth.Admin, httpkit.Anywhere, (*API).truncate),
	httpkit.NewRoute("POST /admin/api/forget", auth.Admin, httpkit.Anywhere, (*API).forget),
	{Spec: httpkit.Spec{Method: "GET", Path: "/admin/api/openapi.json", Public: true, Kind: httpkit.Anywhere}, Handle: func(_ *API, w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := w.Write(openapiJSON)
		return err
	}},
}

// New returns the API's handler over store, mounted at /admin/api/.
func New(store eventstore.Store, tokens *auth.Tokens, opts Options) http.Handler {
	mux := http.NewServeMux()
	a := &API{store: store, tokens: tokens, opts: opts}
	httpkit.Mount(mux, Routes, a, httpkit.Node{WriteModel: true, Views: true}, tokens, domainErrors)
	// Any other path or method under /admin/api/ is a problem, not the
	// ServeMux's plain-text answer.
	mux.Handle("/admin/api/", httpkit.Handler(func(w http.ResponseWriter, r *http.Request) error {
		return &httpkit.Error{Status: http.StatusNotFound, Type: httpkit.TypeNotFound, Detail: fmt.Sprintf("%s %s: no such admin route (see /admin/api/openapi.json)", r.Method, r.URL.Path)}
	}, nil))
	return mux
}

func domainErrors(err error) (problem.Details, bool) {
	switch {
	case errors.Is(err, ErrNoStream):
		return httpkit.Problem(http.StatusNotFound, TypeNoStream, err.Error()), true
	case errors.Is(err, eventstore.ErrStreamDeleted), errors.Is(err, eventstore.ErrStreamTombstoned):
		return httpkit.Problem(http.StatusGone, TypeDeleted, err.Error()), true
	}
	return problem.Details{}, false
}

// Actions says which actions a token may take on this server.
type Actions struct {
	Delete   bool `json:"delete"`
	Truncate bool `json:"truncate"`
	Forget   bool `json:"forget"`
}

type meJSON struct {
	Role    auth.Role `json:"role"`
	Actions Actions   `json:"actions"`
}

// me answers the request's role and what it may do: an action needs its
// hook and the admin role.
func (a *API) me(w http.ResponseWriter, r *http.Request) error {
	tok, _ := auth.FromRequest(r)
	role, _ := a.tokens.Lookup(tok) // the route admitted it
	admin := role.Has(auth.Admin)
	return httpkit.WriteJSON(w, http.StatusOK, meJSON{Role: role, Actions: Actions{
		Delete:   admin && a.opts.Delete != nil,
		Truncate: admin && a.opts.Truncate != nil,
		Forget:   admin && a.opts.Forget != nil,
	}})
}

func (a *API) head(w http.ResponseWriter, r *http.Request) error {
	h, err := a.store.Head(r.Context())
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusOK, map[string]uint64{"head": h})
}

// StreamJSON is a stream in a page of streams.
type StreamJSON struct {
	ID      string `json:"id"`
	Version uint64 `json:"version"`
}

type streamsJSON struct {
	Streams []StreamJSON `json:"streams"`
	// Next is the after of the next page; absent on the last.
	Next string `json:"next,omitempty"`
}

// streams answers the stream ids with the prefix, after the cursor after,
// in byte order: ids with a prefix are contiguous in that order, so a
// page reads at most limit+1 ids from the store, wherever the prefix is.
func (a *API) streams(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	prefix, after := q.Get("prefix"), q.Get("after")
	if err := checkText("prefix", prefix); err != nil {
		return err
	}
	if err := checkText("after", after); err != nil {
		return err
	}
	limit, err := intParam(q, "limit", DefaultStreams, 1, MaxStreams)
	if err != nil {
		return err
	}
	ctx := r.Context()
	var ids []string
	start := after
	if prefix != "" && after < prefix {
		// The prefix itself may be a stream; ListStreams starts after
		// its argument.
		v, err := a.store.StreamVersion(ctx, prefix)
		if err != nil && !errors.Is(err, eventstore.ErrInvalidStreamID) {
			return err
		}
		if v > 0 {
			ids = append(ids, prefix)
		}
		start = prefix
	}
	more := false
	// A backend may return fewer ids than asked (it caps a read): read
	// on until limit+1, the end, or an id without the prefix.
	for len(ids) < limit+1 {
		page, err := a.store.ListStreams(ctx, start, limit+1-len(ids))
		if err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		outside := false
		for _, id := range page {
			if !strings.HasPrefix(id, prefix) {
				outside = true
				break
			}
			ids = append(ids, id)
		}
		if outside {
			break
		}
		start = page[len(page)-1]
	}
	if len(ids) > limit {
		ids, more = ids[:limit], true
	}
	out := streamsJSON{Streams: make([]StreamJSON, 0, len(ids))}
	for _, id := range ids {
		v, err := a.store.StreamVersion(ctx, id)
		if err != nil {
			return err
		}
		out.Streams = append(out.Streams, StreamJSON{ID: id, Version: v})
	}
	if more {
		out.Next = ids[len(ids)-1]
	}
	return httpkit.WriteJSON(w, http.StatusOK, out)
}

// EventJSON is an event as the admin API shows it: its metadata, and
// its payload decoded — a JSON payload as JSON in "data", any other in
// base64 in "data_base64", with the content type the API found for it.
type EventJSON struct {
	Seq         uint64            `json:"seq"`
	Position    uint64            `json:"position"`
	ID          string            `json:"id"`
	Type        string            `json:"type"`
	Version     int               `json:"version"`
	Tags        []string          `json:"tags"`
	Meta        map[string]string `json:"meta"`
	Time        time.Time         `json:"time"`
	Size        int               `json:"size"`
	ContentType string            `json:"content_type"`
	Data        json.RawMessage   `json:"data,omitempty"`
	DataBase64  *[]byte           `json:"data_base64,omitempty"`
}

type eventsJSON struct {
	Stream  string      `json:"stream"`
	Version uint64      `json:"version"`
	Events  []EventJSON `json:"events"`
	// Next is the from of the next page; absent on the last.
	Next uint64 `json:"next,omitempty"`
}

// ContentType is what the admin API says a payload is: JSON if it is
// valid JSON; else the event's "content-type" metadata if it has one;
// else what http.DetectContentType sniffs.
func ContentType(ev *eventstore.Event) string {
	switch {
	case len(ev.Data) > 0 && json.Valid(ev.Data):
		return "application/json"
	case ev.Meta["content-type"] != "":
		return ev.Meta["content-type"]
	default:
		return http.DetectContentType(ev.Data)
	}
}

func toJSON(ev *eventstore.Event) EventJSON {
	j := EventJSON{
		Seq: ev.Seq, Position: ev.Position, ID: ev.ID.String(), Type: ev.Type, Version: ev.Version,
		Tags: ev.Tags, Meta: ev.Meta, Time: ev.Time, Size: len(ev.Data), ContentType: ContentType(ev),
	}
	if j.Tags == nil {
		j.Tags = []string{}
	}
	if j.Meta == nil {
		j.Meta = map[string]string{}
	}
	if j.ContentType == "application/json" {
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

// events answers a page of a stream's events from sequence number from.
func (a *API) events(w http.ResponseWriter, r *http.Request) error {
	stream := r.PathValue("stream")
	if err := checkStream(stream); err != nil {
		return err
	}
	q := r.URL.Query()
	from, err := uintParam(q, "from", 1)
	if err != nil {
		return err
	}
	limit, err := intParam(q, "limit", DefaultEvents, 1, MaxEvents)
	if err != nil {
		return err
	}
	ctx := r.Context()
	version, err := a.store.StreamVersion(ctx, stream)
	if err != nil {
		return err
	}
	if version == 0 {
		return fmt.Errorf("stream %q: %w", stream, ErrNoStream)
	}
	evs, err := a.store.ReadStream(ctx, stream, from, limit)
	if err != nil {
		return err
	}
	out := eventsJSON{Stream: stream, Version: version, Events: make([]EventJSON, 0, len(evs))}
	size := 0
	for i := range evs {
		if i > 0 && size+len(evs[i].Data) > MaxPageBytes {
			break
		}
		size += len(evs[i].Data)
		out.Events = append(out.Events, toJSON(&evs[i]))
	}
	if n := len(out.Events); n > 0 && out.Events[n-1].Seq < version {
		out.Next = out.Events[n-1].Seq + 1
	}
	return httpkit.WriteJSON(w, http.StatusOK, out)
}

type positionsJSON struct {
	Head       uint64           `json:"head"`
	Views      []Position       `json:"views"`
	Publishers []PublisherState `json:"publishers"`
}

func (a *API) positions(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	head, err := a.store.Head(ctx)
	if err != nil {
		return err
	}
	out := positionsJSON{Head: head, Views: []Position{}, Publishers: []PublisherState{}}
	if a.opts.Positions != nil {
		ps, err := a.opts.Positions(ctx)
		if err != nil {
			return err
		}
		out.Views = append(out.Views, ps...)
		slices.SortFunc(out.Views, func(x, y Position) int { return strings.Compare(x.Name, y.Name) })
	}
	if a.opts.Publishers != nil {
		for _, p := range a.opts.Publishers(ctx) {
			p.Lag = 0
			if head > p.Position {
				p.Lag = head - p.Position
			}
			out.Publishers = append(out.Publishers, p)
		}
	}
	return httpkit.WriteJSON(w, http.StatusOK, out)
}

func notAvailable(what string) error {
	return &httpkit.Error{Status: http.StatusNotImplemented, Type: TypeNotAvailable, Detail: what + " is not available on this server"}
}

// delete deletes a stream: mode soft (the default) or hard.
func (a *API) delete(w http.ResponseWriter, r *http.Request) error {
	stream := r.PathValue("stream")
	if err := checkStream(stream); err != nil {
		return err
	}
	var hard bool
	switch mode := r.URL.Query().Get("mode"); mode {
	case "", "soft":
	case "hard":
		hard = true
	default:
		return httpkit.BadRequest("mode %q: want soft or hard", mode)
	}
	if a.opts.Delete == nil {
		return notAvailable("deleting a stream")
	}
	if err := a.opts.Delete(r.Context(), stream, hard); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// maxBody bounds the JSON body of a truncate or forget request.
const maxBody = 4 << 10

type truncateJSON struct {
	Stream string `json:"stream"`
	Before uint64 `json:"before"`
}

func (a *API) truncate(w http.ResponseWriter, r *http.Request) error {
	var req truncateJSON
	if err := httpkit.DecodeJSON(r, maxBody, &req); err != nil {
		return err
	}
	if err := checkStream(req.Stream); err != nil {
		return err
	}
	if req.Before < 2 {
		return httpkit.BadRequest("before %d: a truncation removes the events before a sequence number of 2 or more", req.Before)
	}
	if a.opts.Truncate == nil {
		return notAvailable("truncating a stream")
	}
	if err := a.opts.Truncate(r.Context(), req.Stream, req.Before); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type forgetJSON struct {
	Subject string `json:"subject"`
}

func (a *API) forget(w http.ResponseWriter, r *http.Request) error {
	var req forgetJSON
	if err := httpkit.DecodeJSON(r, maxBody, &req); err != nil {
		return err
	}
	if req.Subject == "" {
		return httpkit.BadRequest("subject: a subject to forget is required")
	}
	if err := checkText("subject", req.Subject); err != nil {
		return err
	}
	if a.opts.Forget == nil {
		return notAvailable("forgetting a data subject")
	}
	if err := a.opts.Forget(r.Context(), req.Subject); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// maxID is the longest stream id (or prefix, cursor, subject) the API
// takes, the store's own limit.
const maxID = 256

// checkText refuses what can be no part of a stream id: more than maxID
// bytes, invalid UTF-8, control characters.
func checkText(name, s string) error {
	switch {
	case len(s) > maxID:
		return httpkit.BadRequest("%s: %d bytes, at most %d", name, len(s), maxID)
	case !utf8.ValidString(s):
		return httpkit.BadRequest("%s: not valid UTF-8", name)
	case strings.ContainsFunc(s, unicode.IsControl):
		return httpkit.BadRequest("%s: contains a control character", name)
	}
	return nil
}

func checkStream(s string) error {
	if s == "" {
		return httpkit.BadRequest("stream: a stream id is required")
	}
	return checkText("stream", s)
}

func intParam(q map[string][]string, name string, def, lo, hi int) (int, error) {
	v, ok := q[name]
	if !ok || v[0] == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < lo || n > hi {
		return 0, httpkit.BadRequest("%s %q: want a whole number from %d to %d", name, v[0], lo, hi)
	}
	return n, nil
}

func uintParam(q map[string][]string, name string, def uint64) (uint64, error) {
	v, ok := q[name]
	if !ok || v[0] == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(v[0], 10, 64)
	if err != nil || n == 0 {
		return 0, httpkit.BadRequest("%s %q: want a whole number of 1 or more", name, v[0])
	}
	return n, nil
}
