// Package httpapi is the notify service's HTTP API: send requests (a
// sender's token, an Idempotency-Key), their state and counts, the dead
// letters and their replay, the clubs and notification types the send
// page offers, and the OpenAPI document. The metrics are the windowed
// aggregation `notifications`, served by engine/window's handler at
// /api/windows/notifications next to it.
package httpapi

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/engine/problem"
	"github.com/logbook/logbook/services/notify/pipeline"
)

//go:embed openapi.json
var openapiJSON []byte

// OpenAPI is the API's OpenAPI document.
func OpenAPI() []byte { return openapiJSON }

// Sender is the notify service's role: a sender's token sends
// notifications and replays dead letters. Any token reads their state.
const Sender auth.Role = "sender"

// Roles returns the roles the notify API declares, for the token loader
// of a binary that serves it; besides Sender, the engine's
// auth.Admin forgets users.
func Roles() []auth.Role { return []auth.Role{Sender, auth.Admin} }

// MaxBody bounds a send request's body: a million recipients with ids
// of up to 20 digits, and room for the rest.
const MaxBody = 24 << 20

// maxSmallBody bounds a replay's body.
const maxSmallBody = 256 << 10

// MaxSending bounds the sends decoded at once: each may hold a body of
// MaxBody and its million ids several times over (about 50 MB). A send
// that waits longer than sendWait for its turn is answered 503 with
// Retry-After.
//
// A turn is taken only once the body has arrived, so that slow uploads
// cannot hold every turn: the first smallBody bytes are read before any
// turn (a small send needs no other); a larger body then takes one of
// MaxSending reading turns and must arrive within bodyReadTime.
const MaxSending = 8

const (
	sendWait  = 5 * time.Second
	smallBody = 64 << 10
)

// bodyReadTime bounds the reading of a large body (a variable for the
// tests).
var bodyReadTime = time.Minute

// API serves the notify HTTP API over a Service.
type API struct {
	svc     *pipeline.Service
	tokens  *auth.Tokens
	reading chan struct{} // turns of large bodies being read
	sending chan struct{} // turns of sends being decoded and accepted
	wait    time.Duration // sendWait
}

// Routes is the notify API's route table.
var Routes = []httpkit.Route[*API]{
	httpkit.NewRoute("POST /api/notifications", Sender, httpkit.Command, (*API).send),
	httpkit.NewRoute("GET /api/notifications", auth.Viewer, httpkit.ViewQuery, (*API).list).WithQuery("limit"),
	httpkit.NewRoute("GET /api/notifications/{id}", auth.Viewer, httpkit.ViewQuery, (*API).get).WithQuery(httpkit.MinPosition),
	httpkit.NewRoute("GET /api/dead-letters", auth.Viewer, httpkit.ViewQuery, (*API).deadLetters).WithQuery("request", "after", "limit"),
	httpkit.NewRoute("POST /api/dead-letters/replay", Sender, httpkit.Command, (*API).replay),
	httpkit.NewRoute("GET /api/clubs", auth.Viewer, httpkit.ViewQuery, (*API).clubs),
	httpkit.NewRoute("POST /api/users/{id}/forget", auth.Admin, httpkit.Command, (*API).forget),
	httpkit.NewRoute("GET /api/notification-types", auth.Viewer, httpkit.Anywhere, (*API).types),
	{Spec: httpkit.Spec{Method: "GET", Path: "/api/openapi.json", Public: true, Kind: httpkit.Anywhere}, Handle: func(_ *API, w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := w.Write(openapiJSON)
		return err
	}},
}

// New returns the notify HTTP API for svc.
func New(svc *pipeline.Service, tokens *auth.Tokens) http.Handler {
	mux := http.NewServeMux()
	Mount(mux, svc, tokens)
	return mux
}

// Mount registers the notify HTTP API for svc on mux (which also answers
// 404 under /api/notifications/ and /api/dead-letters/).
func Mount(mux *http.ServeMux, svc *pipeline.Service, tokens *auth.Tokens) {
	a := &API{svc: svc, tokens: tokens, reading: make(chan struct{}, MaxSending), sending: make(chan struct{}, MaxSending), wait: sendWait}
	httpkit.Mount(mux, Routes, a, httpkit.Node{WriteModel: true, Views: true}, tokens, domainErrors)
	for _, p := range []string{"/api/notifications/", "/api/dead-letters/"} {
		mux.Handle(p, httpkit.Handler(func(w http.ResponseWriter, r *http.Request) error {
			return &httpkit.Error{Status: http.StatusNotFound, Type: httpkit.TypeNotFound, Detail: fmt.Sprintf("no route %s %s (see /api/openapi.json)", r.Method, r.URL.Path)}
		}, nil))
	}
}

// Problem types of the notify domain.
const (
	TypeUnacceptable = "urn:logbook:problem:notify:unacceptable" // 422: an unknown type, too many recipients, an empty club, nothing to replay
	TypeNoKeyring    = "urn:logbook:problem:notify:no-keyring"   // 501: the server keeps users' data without a keyring
)

func domainErrors(err error) (problem.Details, bool) {
	switch {
	case errors.Is(err, pipeline.ErrInvalid):
		return httpkit.Problem(http.StatusBadRequest, httpkit.TypeInvalidRequest, err.Error()), true
	case errors.Is(err, pipeline.ErrKeyReused):
		return httpkit.Problem(http.StatusUnprocessableEntity, httpkit.TypeKeyReused, err.Error()), true
	case errors.Is(err, pipeline.ErrUnacceptable):
		return httpkit.Problem(http.StatusUnprocessableEntity, TypeUnacceptable, err.Error()), true
	case errors.Is(err, pipeline.ErrTooLarge):
		return httpkit.Problem(http.StatusRequestEntityTooLarge, httpkit.TypeTooLarge, err.Error()), true
	case errors.Is(err, pipeline.ErrNotFound):
		return httpkit.Problem(http.StatusNotFound, httpkit.TypeNotFound, err.Error()), true
	case errors.Is(err, pipeline.ErrNoKeyring):
		return httpkit.Problem(http.StatusNotImplemented, TypeNoKeyring, err.Error()+": start it with --master-key FILE or LOGBOOK_MASTER_KEY"), true
	case errors.Is(err, pipeline.ErrClosed):
		return httpkit.Problem(http.StatusServiceUnavailable, httpkit.TypeUnavailable, err.Error()), true
	}
	return problem.Details{}, false
}

func (a *API) send(w http.ResponseWriter, r *http.Request) error {
	key := r.Header.Get("Idempotency-Key")
	if key == "" || len(key) > pipeline.MaxKey {
		return httpkit.BadRequest("Idempotency-Key header: want 1 to %d characters (the same key sends a request once)", pipeline.MaxKey)
	}
	if err := a.readBody(w, r); err != nil {
		return err
	}
	release, err := a.turn(w, r, a.sending, "sends are being accepted")
	if err != nil {
		return err
	}
	defer release()
	var in pipeline.SendInput
	if err := httpkit.DecodeJSON(r, MaxBody, &in); err != nil {
		return err
	}
	acc, err := a.svc.Send(r.Context(), key, in)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/notifications/"+acc.ID)
	return httpkit.WriteJSON(w, http.StatusAccepted, acc)
}

// readBody reads a send's body (up to MaxBody and one byte, for
// DecodeJSON to refuse a larger one) into memory before the send takes
// a turn: its first smallBody bytes at once, the rest under a reading
// turn and within bodyReadTime.
func (a *API) readBody(w http.ResponseWriter, r *http.Request) error {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, smallBody+1)); err != nil {
		return bodyError(err)
	}
	if buf.Len() > smallBody {
		release, err := a.turn(w, r, a.reading, "large sends are being uploaded")
		if err != nil {
			return err
		}
		defer release()
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(bodyReadTime)) // not every writer can: then the server's own timeout holds
		_, err = buf.ReadFrom(io.LimitReader(r.Body, MaxBody+1-int64(buf.Len())))
		_ = rc.SetReadDeadline(time.Time{})
		if err != nil {
			return bodyError(err)
		}
	}
	r.Body = io.NopCloser(&buf)
	return nil
}

func bodyError(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &httpkit.Error{Status: http.StatusRequestTimeout, Type: httpkit.TypeInvalidRequest,
			Detail: fmt.Sprintf("the body did not arrive within %v", bodyReadTime)}
	}
	return httpkit.BadRequest("reading the body: %v", err)
}

// turn takes a turn of sem, waiting up to a.wait; past that the answer
// is 503 with Retry-After.
func (a *API) turn(w http.ResponseWriter, r *http.Request, sem chan struct{}, what string) (release func(), err error) {
	t := time.NewTimer(a.wait)
	defer t.Stop()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-t.C:
		w.Header().Set("Retry-After", "1")
		return nil, &httpkit.Error{Status: http.StatusServiceUnavailable, Type: httpkit.TypeUnavailable, Detail: fmt.Sprintf("%d %s: try again", cap(sem), what)}
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
}

func limitParam(r *http.Request, def, max int) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, httpkit.BadRequest("limit %q: want 1 to %d", s, max)
	}
	return n, nil
}

func (a *API) list(w http.ResponseWriter, r *http.Request) error {
	limit, err := limitParam(r, 20, 1000)
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusOK, map[string]any{"notifications": nonNil(a.svc.List(limit))})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (a *API) get(w http.ResponseWriter, r *http.Request) error {
	var min uint64
	if s := r.URL.Query().Get(httpkit.MinPosition); s != "" {
		var err error
		if min, err = strconv.ParseUint(s, 10, 64); err != nil {
			return httpkit.BadRequest("min_position %q: want a log position", s)
		}
	}
	st, err := a.svc.Get(r.Context(), r.PathValue("id"), min)
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusOK, st)
}

func (a *API) deadLetters(w http.ResponseWriter, r *http.Request) error {
	limit, err := limitParam(r, 100, 1000)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	dls, err := a.svc.DeadLetters(q.Get("request"), q.Get("after"), limit)
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusOK, map[string]any{"dead_letters": nonNil(dls)})
}

func (a *API) replay(w http.ResponseWriter, r *http.Request) error {
	var in pipeline.ReplayInput
	if err := httpkit.DecodeJSON(r, maxSmallBody, &in); err != nil {
		return err
	}
	acc, err := a.svc.Replay(r.Context(), r.Header.Get("Idempotency-Key"), in)
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusAccepted, acc)
}

func (a *API) clubs(w http.ResponseWriter, r *http.Request) error {
	clubs, err := a.svc.Clubs(r.Context())
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusOK, map[string]any{"clubs": nonNil(clubs)})
}

func (a *API) types(w http.ResponseWriter, _ *http.Request) error {
	return httpkit.WriteJSON(w, http.StatusOK, map[string]any{"types": a.svc.Types()})
}

// forget erases a user's personal data (pipeline.Service.Forget). The
// audit event says by whom as the role and a digest of the token, never
// the token.
func (a *API) forget(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return httpkit.BadRequest("user id %q: want an integer", r.PathValue("id"))
	}
	f, err := a.svc.Forget(r.Context(), id, "admin token "+tokenDigest(r))
	if err != nil {
		return err
	}
	if f.Position > 0 {
		w.Header().Set("X-Logbook-Position", strconv.FormatUint(f.Position, 10))
	}
	return httpkit.WriteJSON(w, http.StatusOK, f)
}

// tokenDigest names the request's token by the first 12 hexadecimal
// digits of its SHA-256: enough for an operator holding the tokens to
// tell which, nothing to sign in with.
func tokenDigest(r *http.Request) string {
	tok, _ := auth.FromRequest(r)
	sum := sha256.Sum256([]byte(tok))
	return "sha256:" + hex.EncodeToString(sum[:6])
}
