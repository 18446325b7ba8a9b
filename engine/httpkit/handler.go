package httpkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/problem"
)

// Problem type URIs (RFC 9457 "type"): a client tells one kind of failure
// from another by these, not by parsing the detail text. docs/api.md
// lists them.
const (
	TypeInvalidRequest  = "urn:logbook:problem:invalid-request"  // 400: malformed input
	TypeVersionConflict = "urn:logbook:problem:version-conflict" // 409: the aggregate changed since the version the client read (If-Match)
	TypeExists          = "urn:logbook:problem:exists"           // 409: the aggregate to create exists already
	TypeNotFound        = "urn:logbook:problem:not-found"        // 404
	TypeTooLarge        = "urn:logbook:problem:too-large"        // 413
	TypeUnsupportedType = "urn:logbook:problem:unsupported-media-type"
	TypeKeyReused       = "urn:logbook:problem:idempotency-key-reused" // 422: the Idempotency-Key came with another command before
	TypeMisdirected     = "urn:logbook:problem:misdirected"            // 421: this node does not serve the route
	TypeUnavailable     = "urn:logbook:problem:unavailable"            // 503: closing, or a wait timed out; retry
	TypeInternal        = "urn:logbook:problem:internal"
)

// Error is a failure the HTTP layer itself decides: its status, problem
// type and detail.
type Error struct {
	Status int
	Type   string // a problem type URI; empty: by status
	Detail string
}

func (e *Error) Error() string { return e.Detail }

// BadRequest is a 400 with a formatted detail.
func BadRequest(format string, args ...any) error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Detail: fmt.Sprintf(format, args...)}
}

// DomainErrors maps a service's own errors to problems; false leaves the
// error to the engine's mapping. Nil maps nothing.
type DomainErrors func(err error) (problem.Details, bool)

// Handler turns an error-returning handler into an http.Handler that
// answers errors as problem+json (WriteError).
func Handler(f func(http.ResponseWriter, *http.Request) error, domain DomainErrors) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := f(w, r); err != nil {
			WriteError(w, err, domain)
		}
	})
}

// Problem returns a problem of the given status, type and detail.
func Problem(status int, typ, detail string) problem.Details {
	d := problem.New(status, detail)
	d.Type = typ
	return d
}

// WriteError answers err as problem+json: an *Error as it says; a
// version conflict as 409 with the actual version; then the service's
// own errors (domain); then the engine's: 409 exists, 404 not found, 413
// too large, 400 an id the store cannot take, 503 closed or timed out,
// 499 cancelled; anything else 500.
func WriteError(w http.ResponseWriter, err error, domain DomainErrors) {
	var he *Error
	var ce *eventstore.ConflictError
	if errors.As(err, &he) {
		typ := he.Type
		if typ == "" {
			typ = "about:blank"
		}
		problem.Write(w, Problem(he.Status, typ, he.Detail))
		return
	}
	if errors.As(err, &ce) {
		d := Problem(http.StatusConflict, TypeVersionConflict, err.Error())
		d.Extra = map[string]any{"actual_version": ce.Actual}
		problem.Write(w, d)
		return
	}
	if domain != nil {
		if d, ok := domain(err); ok {
			problem.Write(w, d)
			return
		}
	}
	switch {
	case errors.Is(err, aggregate.ErrClosed), errors.Is(err, eventstore.ErrClosed), errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "1")
		problem.Write(w, Problem(http.StatusServiceUnavailable, TypeUnavailable, err.Error()))
	case errors.Is(err, eventstore.ErrInvalidStreamID):
		problem.Write(w, Problem(http.StatusBadRequest, TypeInvalidRequest, err.Error()))
	case errors.Is(err, aggregate.ErrKeyReused):
		problem.Write(w, Problem(http.StatusUnprocessableEntity, TypeKeyReused, err.Error()))
	case errors.Is(err, aggregate.ErrExists):
		problem.Write(w, Problem(http.StatusConflict, TypeExists, err.Error()))
	case errors.Is(err, eventstore.ErrVersionConflict):
		problem.Write(w, Problem(http.StatusConflict, TypeVersionConflict, err.Error()))
	case errors.Is(err, eventstore.ErrEventTooLarge), errors.Is(err, eventstore.ErrAppendTooLarge):
		problem.Write(w, Problem(http.StatusRequestEntityTooLarge, TypeTooLarge, err.Error()+" (split a bulk add into smaller ones)"))
	case errors.Is(err, aggregate.ErrNotFound):
		problem.Write(w, Problem(http.StatusNotFound, TypeNotFound, err.Error()))
	case errors.Is(err, context.Canceled):
		problem.Write(w, Problem(499, "about:blank", "request cancelled"))
	default:
		problem.Write(w, Problem(http.StatusInternalServerError, TypeInternal, err.Error()))
	}
}

// WriteJSON answers v as JSON with the status.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

// DecodeJSON reads a JSON body of at most max bytes strictly: unknown
// fields and trailing data are errors, so a typo is not silently ignored.
func DecodeJSON(r *http.Request, max int64, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return &Error{Status: http.StatusUnsupportedMediaType, Type: TypeUnsupportedType, Detail: fmt.Sprintf("content type %q, want application/json", ct)}
	}
	body := &io.LimitedReader{R: r.Body, N: max + 1}
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if body.N <= 0 {
		return &Error{Status: http.StatusRequestEntityTooLarge, Type: TypeTooLarge, Detail: fmt.Sprintf("the body is over %d MiB", max>>20)}
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return BadRequest("request body is empty, want a JSON object")
		}
		return BadRequest("malformed JSON body: %v", err)
	}
	if dec.More() {
		return BadRequest("malformed JSON body: data after the object")
	}
	return nil
}

// MaxIdempotencyKey bounds an Idempotency-Key header.
const MaxIdempotencyKey = 200

// CommandOptions reads Idempotency-Key (a retried command with the same
// key is applied once) and If-Match (the aggregate version the client
// read: a command against a newer one is a version conflict).
func CommandOptions(r *http.Request) ([]aggregate.Option, error) {
	var opts []aggregate.Option
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		if len(k) > MaxIdempotencyKey {
			return nil, BadRequest("Idempotency-Key longer than %d characters", MaxIdempotencyKey)
		}
		opts = append(opts, aggregate.WithIdempotencyKey(k))
	}
	if m := r.Header.Get("If-Match"); m != "" {
		v, err := strconv.ParseUint(strings.Trim(m, `"`), 10, 64)
		if err != nil {
			return nil, BadRequest("If-Match %q: want the aggregate version, a number", m)
		}
		opts = append(opts, aggregate.WithExpectedVersion(v))
	}
	return opts, nil
}

// CommandResult is the answer to every command.
type CommandResult struct {
	ID        string `json:"id"`
	Version   uint64 `json:"version"`
	Position  uint64 `json:"position"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// Answer writes a command's result (ResultHeaders, Result).
func Answer[E any](w http.ResponseWriter, status int, res aggregate.Result[E]) error {
	return WriteJSON(w, ResultHeaders(w, status, res), Result(res))
}

// Result is the CommandResult of res.
func Result[E any](res aggregate.Result[E]) CommandResult {
	return CommandResult{ID: res.ID, Version: res.Version, Position: res.Position, Duplicate: res.Duplicate}
}

// ResultHeaders sets a command's version as ETag (for If-Match) and its
// log position as X-Logbook-Position (for min_position on later reads),
// and returns the status to answer: a duplicate (a retry) is a plain 200.
func ResultHeaders[E any](w http.ResponseWriter, status int, res aggregate.Result[E]) int {
	w.Header().Set("ETag", strconv.Quote(strconv.FormatUint(res.Version, 10)))
	if res.Position > 0 {
		w.Header().Set("X-Logbook-Position", strconv.FormatUint(res.Position, 10))
	}
	if res.Duplicate {
		return http.StatusOK
	}
	return status
}

// Execute runs the command build makes of the request on the aggregate
// the path wildcard idParam names, and answers its result.
func Execute[S, C, E any](rt *aggregate.Runtime[S, C, E], idParam string, w http.ResponseWriter, r *http.Request, build func(*http.Request) (C, error)) error {
	cmd, err := build(r)
	if err != nil {
		return err
	}
	opts, err := CommandOptions(r)
	if err != nil {
		return err
	}
	res, err := rt.Execute(r.Context(), r.PathValue(idParam), cmd, opts...)
	if err != nil {
		return err
	}
	return Answer(w, http.StatusOK, res)
}
