// Package httpapi is the kv repository's HTTP API: /api/kv/{id...}, with
// versions as entity tags.
//
//	GET    /api/kv/{id}   the value (ETag: "<version>"); If-None-Match with
//	                      the current version answers 304
//	PUT    /api/kv/{id}   If-None-Match: * adds (412 if the key exists);
//	                      If-Match: "<version>" updates (412 if stale, 404
//	                      if absent); one of them is required (428)
//	DELETE /api/kv/{id}   If-Match: "<version>" deletes the key and
//	                      everything under it (412 if stale, 404 if absent)
//
// Values are the raw request and response bodies. Errors are RFC 9457
// problem+json. A value is streamed to the response from the backend
// (pebblekv reads a large one from its own file), and at most
// Options.MaxLargeReads reads of LargeRead bytes or more are in flight at
// once; the next waits up to Options.LargeReadWait, then gets 503 with
// Retry-After.
package httpapi

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/engine/problem"
	"github.com/logbook/logbook/services/kv"
)

//go:embed openapi.json
var openapiJSON []byte

// OpenAPI is the API's OpenAPI document.
func OpenAPI() []byte { return openapiJSON }

// Problem types of the kv API.
const (
	TypePreconditionFailed   = "urn:logbook:problem:kv:precondition-failed"   // 412: stale version, or the key to add exists
	TypePreconditionRequired = "urn:logbook:problem:kv:precondition-required" // 428: a write without If-Match or If-None-Match: *
)

// Writer is the kv API's role: a writer's token adds, updates and
// deletes keys. Any token reads them.
const Writer auth.Role = "writer"

// Roles returns the roles the kv API declares, for the token loader of a
// binary that serves it.
func Roles() []auth.Role { return []auth.Role{Writer} }

// LargeRead is the size from which a read takes one of the
// Options.MaxLargeReads slots.
const LargeRead = 1 << 20

// Options configure the API.
type Options struct {
	// MaxLargeReads bounds the reads of LargeRead bytes or more in flight
	// at once (each holds an open file and a slow client's connection);
	// default 32.
	MaxLargeReads int
	// LargeReadWait is how long a large read waits for a slot before it
	// is answered 503 with Retry-After; default 2 s.
	LargeReadWait time.Duration
	// StallTimeout ends an answer whose client has taken none of it for
	// this long (each write of the value has this deadline), so a client
	// that stops reading does not hold its slot and connection forever;
	// default 30 s.
	StallTimeout time.Duration
	// MaxLargeWrites bounds the writes of LargeRead bytes or more (or of
	// unknown length) in flight at once; the next waits LargeReadWait,
	// then gets 503 with Retry-After. A backend that is not a
	// kv.StreamWriter holds each such value whole, so this times the
	// repository's MaxValueBytes bounds their memory. Default 4.
	MaxLargeWrites int
}

// API serves the kv HTTP API over a repository.
type API struct {
	repo   *kv.Repository
	large  chan struct{} // a slot per large read in flight
	largeW chan struct{} // a slot per large write in flight
	wait   time.Duration
	stall  time.Duration
}

// Routes is the kv API's route table.
var Routes = []httpkit.Route[*API]{
	{Spec: httpkit.Spec{Method: "GET", Path: "/api/kv/{id...}", Role: auth.Viewer, Kind: httpkit.AggregateRead}, Handle: (*API).get},
	{Spec: httpkit.Spec{Method: "PUT", Path: "/api/kv/{id...}", Role: Writer, Kind: httpkit.Command}, Handle: (*API).put},
	{Spec: httpkit.Spec{Method: "DELETE", Path: "/api/kv/{id...}", Role: Writer, Kind: httpkit.Command}, Handle: (*API).delete},
	{Spec: httpkit.Spec{Method: "GET", Path: "/api/kv-openapi.json", Public: true, Kind: httpkit.Anywhere}, Handle: func(_ *API, w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := w.Write(openapiJSON)
		return err
	}},
}

// New returns the API's handler.
func New(repo *kv.Repository, tokens *auth.Tokens) http.Handler {
	mux := http.NewServeMux()
	Mount(mux, repo, tokens)
	return mux
}

// Mount registers the API's routes on mux, with the default Options.
func Mount(mux *http.ServeMux, repo *kv.Repository, tokens *auth.Tokens) {
	MountWith(mux, repo, tokens, Options{})
}

// MountWith registers the API's routes on mux.
func MountWith(mux *http.ServeMux, repo *kv.Repository, tokens *auth.Tokens, o Options) {
	if o.MaxLargeReads <= 0 {
		o.MaxLargeReads = 32
	}
	if o.LargeReadWait <= 0 {
		o.LargeReadWait = 2 * time.Second
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = 30 * time.Second
	}
	if o.MaxLargeWrites <= 0 {
		o.MaxLargeWrites = 4
	}
	a := &API{repo: repo, large: make(chan struct{}, o.MaxLargeReads), largeW: make(chan struct{}, o.MaxLargeWrites), wait: o.LargeReadWait, stall: o.StallTimeout}
	httpkit.Mount(mux, Routes, a, httpkit.Node{WriteModel: true, Views: true}, tokens, domainErrors)
	// Another method on a key is answered as a problem, not as the
	// ServeMux's plain-text 405.
	mux.Handle("/api/kv/", httpkit.Handler(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Allow", "GET, HEAD, PUT, DELETE")
		return &httpkit.Error{Status: http.StatusMethodNotAllowed, Type: httpkit.TypeInvalidRequest, Detail: fmt.Sprintf("%s %s: a key takes GET, PUT and DELETE", r.Method, r.URL.Path)}
	}, nil))
}

// TypeBusy is the problem type of a large read refused because
// Options.MaxLargeReads are in flight (503, with Retry-After).
const TypeBusy = "urn:logbook:problem:kv:busy"

func etag(v uint64) string { return `"` + strconv.FormatUint(v, 10) + `"` }

// versions parses an If-Match or If-None-Match list of versions; star
// reports "*".
func versions(h string) (vs []uint64, star bool, err error) {
	for part := range strings.SplitSeq(h, ",") {
		p := strings.TrimSpace(part)
		if p == "*" {
			star = true
			continue
		}
		p = strings.TrimPrefix(p, "W/")
		if len(p) < 3 || p[0] != '"' || p[len(p)-1] != '"' {
			return nil, false, httpkit.BadRequest("entity tag %q: a version in double quotes, as in \"3\"", part)
		}
		v, err := strconv.ParseUint(p[1:len(p)-1], 10, 64)
		if err != nil || v == 0 {
			return nil, false, httpkit.BadRequest("entity tag %q: versions are whole numbers from 1", part)
		}
		vs = append(vs, v)
	}
	return vs, star, nil
}

// ifMatch is the one version of a write's If-Match header, or 0 when
// there is none.
func ifMatch(r *http.Request) (uint64, error) {
	h := r.Header.Get("If-Match")
	if h == "" {
		return 0, nil
	}
	vs, star, err := versions(h)
	if err != nil {
		return 0, err
	}
	if star || len(vs) != 1 {
		return 0, httpkit.BadRequest("If-Match: one version, as in \"3\"")
	}
	return vs[0], nil
}

func (a *API) get(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var inm []uint64
	if h := r.Header.Get("If-None-Match"); h != "" {
		vs, star, err := versions(h)
		if err != nil {
			return err
		}
		if star {
			return httpkit.BadRequest("If-None-Match: * is for PUT (add); GET takes versions")
		}
		inm = vs
	}
	rd, ok, err := a.repo.Open(r.Context(), id)
	if err != nil {
		return err
	}
	if !ok {
		return &httpkit.Error{Status: http.StatusNotFound, Type: httpkit.TypeNotFound, Detail: fmt.Sprintf("no key %q", id)}
	}
	defer rd.Close()
	for _, v := range inm {
		if v == rd.Version {
			w.Header().Set("ETag", etag(rd.Version))
			w.WriteHeader(http.StatusNotModified)
			return nil
		}
	}
	if rd.Size >= LargeRead {
		release, err := acquire(a.large, a.wait, w, r)
		if err != nil {
			return err
		}
		defer release()
	}
	w.Header().Set("ETag", etag(rd.Version))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(rd.Size, 10))
	// Once the status is sent a failure can only cut the body short
	// (the client sees fewer bytes than Content-Length).
	// net/http lifts the write deadline once the answer is finished,
	// before the connection reads its next request.
	_, _ = io.Copy(stallWriter{w, http.NewResponseController(w), a.stall}, rd)
	return nil
}

// stallWriter gives each write a deadline: a client that takes nothing
// of the answer for that long ends it.
type stallWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
}

func (s stallWriter) Write(p []byte) (int, error) {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.stall))
	return s.w.Write(p)
}

// acquire takes one of slots, waiting up to wait.
func acquire(slots chan struct{}, wait time.Duration, w http.ResponseWriter, r *http.Request) (release func(), err error) {
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-t.C:
		w.Header().Set("Retry-After", "1")
		return nil, &busyError{cap(slots), r.Method}
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
}

type busyError struct {
	max    int
	method string
}

func (e *busyError) Error() string {
	what := "reads"
	if e.method == http.MethodPut {
		what = "writes"
	}
	return fmt.Sprintf("%d %s of large values are in flight, the most this server takes at once; retry", e.max, what)
}

func (a *API) put(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := a.repo.ValidID(id); err != nil {
		return err
	}
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	add := false
	if h := r.Header.Get("If-None-Match"); h != "" {
		if strings.TrimSpace(h) != "*" {
			return httpkit.BadRequest("If-None-Match on PUT: only * (add a key that does not exist)")
		}
		add = true
	}
	switch {
	case add && match != 0:
		return httpkit.BadRequest("If-Match and If-None-Match: * together: update, or add, not both")
	case !add && match == 0:
		return &httpkit.Error{Status: http.StatusPreconditionRequired, Type: TypePreconditionRequired,
			Detail: `PUT needs If-None-Match: * to add the key, or If-Match: "<version>" to update it`}
	}
	max := int64(a.repo.Limits().MaxValueBytes)
	if r.ContentLength > max {
		return tooLarge(r.ContentLength, max)
	}
	// The value streams from the body into the backend (pebblekv writes
	// a large one to its file as it arrives); a body of LargeRead bytes
	// or more, or of unknown length, takes one of the large writes'
	// slots, which bounds what a backend that holds the value whole
	// (all but pebblekv) holds at once.
	if r.ContentLength < 0 || r.ContentLength >= LargeRead {
		release, err := acquire(a.largeW, a.wait, w, r)
		if err != nil {
			return err
		}
		defer release()
	}
	body := http.MaxBytesReader(w, r.Body, max)
	if add {
		if err := a.repo.AddFrom(r.Context(), id, body); err != nil {
			return bodyError(err, max)
		}
		w.Header().Set("ETag", etag(1))
		w.WriteHeader(http.StatusCreated)
		return nil
	}
	v, err := a.repo.UpdateFrom(r.Context(), id, match, body)
	if err != nil {
		return bodyError(err, max)
	}
	w.Header().Set("ETag", etag(v))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// bodyError is a put's failure as answered: a body over the limit 413, a
// body that could not be read 400, else the repository's error.
func bodyError(err error, max int64) error {
	var mbe *http.MaxBytesError
	var tl *kv.TooLargeError
	var se *kv.SourceError
	switch {
	case errors.As(err, &mbe):
		return tooLarge(-1, max)
	case errors.As(err, &tl):
		return &httpkit.Error{Status: http.StatusRequestEntityTooLarge, Type: httpkit.TypeTooLarge, Detail: tl.Error()}
	case errors.As(err, &se):
		return httpkit.BadRequest("reading the body: %v", se.Err)
	}
	return err
}

func tooLarge(n, max int64) error {
	d := fmt.Sprintf("value over the limit of %d bytes", max)
	if n >= 0 {
		d = fmt.Sprintf("value of %d bytes, over the limit of %d", n, max)
	}
	return &httpkit.Error{Status: http.StatusRequestEntityTooLarge, Type: httpkit.TypeTooLarge, Detail: d}
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	if match == 0 {
		return &httpkit.Error{Status: http.StatusPreconditionRequired, Type: TypePreconditionRequired,
			Detail: `DELETE needs If-Match: "<version>"`}
	}
	if err := a.repo.Delete(r.Context(), id, match); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// domainErrors maps the repository's errors: 400 bad input, 404 absent,
// 412 stale (with current_version in the problem) or existing, 503
// timeout or unavailable backend, 413 a value over the limit.
func domainErrors(err error) (problem.Details, bool) {
	var se *kv.StaleError
	var busy *busyError
	switch {
	case errors.As(err, &busy):
		return httpkit.Problem(http.StatusServiceUnavailable, TypeBusy, err.Error()), true
	case errors.As(err, &se):
		d := httpkit.Problem(http.StatusPreconditionFailed, TypePreconditionFailed, err.Error())
		d.Extra = map[string]any{"current_version": se.Current}
		return d, true
	case errors.As(err, new(*kv.TooLargeError)):
		return httpkit.Problem(http.StatusRequestEntityTooLarge, httpkit.TypeTooLarge, err.Error()), true
	case errors.Is(err, kv.ErrInvalid):
		return httpkit.Problem(http.StatusBadRequest, httpkit.TypeInvalidRequest, err.Error()), true
	case errors.Is(err, kv.ErrNotFound):
		return httpkit.Problem(http.StatusNotFound, httpkit.TypeNotFound, err.Error()), true
	case errors.Is(err, kv.ErrExists):
		return httpkit.Problem(http.StatusPreconditionFailed, TypePreconditionFailed, err.Error()), true
	case errors.Is(err, kv.ErrTimeout), errors.Is(err, kv.ErrUnavailable):
		return httpkit.Problem(http.StatusServiceUnavailable, httpkit.TypeUnavailable, err.Error()), true
	}
	return problem.Details{}, false
}
