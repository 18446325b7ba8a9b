// Package httpapi is the notify service's HTTP API: send requests (a
// sender's token, an Idempotency-Key), their state and counts, the dead
// letters and their replay, the clubs and notification types the send
// page offers, and the OpenAPI document. The metrics are the windowed
// aggregation `notifications`, served by engine/window's handler at
// /api/windows/notifications next to it.
package httpapi

import (
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/logbook/logbook/engine/api"
	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/problem"
	"github.com/logbook/logbook/services/notify/service"
)

//go:embed openapi.json
var openapiJSON []byte

// OpenAPI is the API's OpenAPI document.
func OpenAPI() []byte { return openapiJSON }

// MaxBody bounds a send request's body: a million recipients with ids
// of up to 20 digits, and room for the rest.
const MaxBody = 24 << 20

// maxSmallBody bounds a replay's body.
const maxSmallBody = 256 << 10

// MaxSending bounds the sends decoded at once: each may hold a body of
// MaxBody and its million ids several times over (about 50 MB). A send
// that waits longer than sendWait for its turn is answered 503 with
// Retry-After.
const MaxSending = 8

const sendWait = 5 * time.Second

// API serves the notify HTTP API over a Service.
type API struct {
	svc     *service.Service
	tokens  *auth.Tokens
	sending chan struct{}
	wait    time.Duration // sendWait
}

// Routes is the notify API's route table.
var Routes = []api.Route[*API]{
	api.NewRoute("POST /api/notifications", auth.Sender, api.Command, (*API).send),
	api.NewRoute("GET /api/notifications", auth.Viewer, api.ViewQuery, (*API).list).WithQuery("limit"),
	api.NewRoute("GET /api/notifications/{id}", auth.Viewer, api.ViewQuery, (*API).get).WithQuery(api.MinPosition),
	api.NewRoute("GET /api/dead-letters", auth.Viewer, api.ViewQuery, (*API).deadLetters).WithQuery("request", "after", "limit"),
	api.NewRoute("POST /api/dead-letters/replay", auth.Sender, api.Command, (*API).replay),
	api.NewRoute("GET /api/clubs", auth.Viewer, api.ViewQuery, (*API).clubs),
	api.NewRoute("GET /api/notification-types", auth.Viewer, api.Anywhere, (*API).types),
	{Spec: api.Spec{Method: "GET", Path: "/api/openapi.json", Public: true, Kind: api.Anywhere}, Handle: func(_ *API, w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := w.Write(openapiJSON)
		return err
	}},
}

// New returns the notify HTTP API for svc, mounted on mux (which also
// answers 404 under /api/notifications/ and /api/dead-letters/).
func New(mux *http.ServeMux, svc *service.Service, tokens *auth.Tokens) {
	a := &API{svc: svc, tokens: tokens, sending: make(chan struct{}, MaxSending), wait: sendWait}
	api.Mount(mux, Routes, a, api.Node{WriteModel: true, Views: true}, tokens, domainErrors)
	for _, p := range []string{"/api/notifications/", "/api/dead-letters/"} {
		mux.Handle(p, api.Handler(func(w http.ResponseWriter, r *http.Request) error {
			return &api.Error{Status: http.StatusNotFound, Type: api.TypeNotFound, Detail: fmt.Sprintf("no route %s %s (see /api/openapi.json)", r.Method, r.URL.Path)}
		}, nil))
	}
}

// Problem types of the notify domain.
const (
	TypeUnacceptable = "urn:logbook:problem:notify:unacceptable" // 422: an unknown type, too many recipients, an empty club, nothing to replay
)

func domainErrors(err error) (problem.Details, bool) {
	switch {
	case errors.Is(err, service.ErrInvalid):
		return api.Problem(http.StatusBadRequest, api.TypeInvalidRequest, err.Error()), true
	case errors.Is(err, service.ErrKeyReused):
		return api.Problem(http.StatusUnprocessableEntity, api.TypeKeyReused, err.Error()), true
	case errors.Is(err, service.ErrUnacceptable):
		return api.Problem(http.StatusUnprocessableEntity, TypeUnacceptable, err.Error()), true
	case errors.Is(err, service.ErrTooLarge):
		return api.Problem(http.StatusRequestEntityTooLarge, api.TypeTooLarge, err.Error()), true
	case errors.Is(err, service.ErrNotFound):
		return api.Problem(http.StatusNotFound, api.TypeNotFound, err.Error()), true
	case errors.Is(err, service.ErrClosed):
		return api.Problem(http.StatusServiceUnavailable, api.TypeUnavailable, err.Error()), true
	}
	return problem.Details{}, false
}

func (a *API) send(w http.ResponseWriter, r *http.Request) error {
	key := r.Header.Get("Idempotency-Key")
	if key == "" || len(key) > service.MaxKey {
		return api.BadRequest("Idempotency-Key header: want 1 to %d characters (the same key sends a request once)", service.MaxKey)
	}
	t := time.NewTimer(a.wait)
	defer t.Stop()
	select {
	case a.sending <- struct{}{}:
		defer func() { <-a.sending }()
	case <-t.C:
		w.Header().Set("Retry-After", "1")
		return &api.Error{Status: http.StatusServiceUnavailable, Type: api.TypeUnavailable, Detail: fmt.Sprintf("%d sends are being accepted: try again", MaxSending)}
	case <-r.Context().Done():
		return r.Context().Err()
	}
	var in service.SendInput
	if err := api.DecodeJSON(r, MaxBody, &in); err != nil {
		return err
	}
	acc, err := a.svc.Send(r.Context(), key, in)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/notifications/"+acc.ID)
	return api.WriteJSON(w, http.StatusAccepted, acc)
}

func limitParam(r *http.Request, def, max int) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, api.BadRequest("limit %q: want 1 to %d", s, max)
	}
	return n, nil
}

func (a *API) list(w http.ResponseWriter, r *http.Request) error {
	limit, err := limitParam(r, 20, 1000)
	if err != nil {
		return err
	}
	return api.WriteJSON(w, http.StatusOK, map[string]any{"notifications": nonNil(a.svc.List(limit))})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (a *API) get(w http.ResponseWriter, r *http.Request) error {
	var min uint64
	if s := r.URL.Query().Get(api.MinPosition); s != "" {
		var err error
		if min, err = strconv.ParseUint(s, 10, 64); err != nil {
			return api.BadRequest("min_position %q: want a log position", s)
		}
	}
	st, err := a.svc.Get(r.Context(), r.PathValue("id"), min)
	if err != nil {
		return err
	}
	return api.WriteJSON(w, http.StatusOK, st)
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
	return api.WriteJSON(w, http.StatusOK, map[string]any{"dead_letters": nonNil(dls)})
}

func (a *API) replay(w http.ResponseWriter, r *http.Request) error {
	var in service.ReplayInput
	if err := api.DecodeJSON(r, maxSmallBody, &in); err != nil {
		return err
	}
	acc, err := a.svc.Replay(r.Context(), r.Header.Get("Idempotency-Key"), in)
	if err != nil {
		return err
	}
	return api.WriteJSON(w, http.StatusAccepted, acc)
}

func (a *API) clubs(w http.ResponseWriter, r *http.Request) error {
	clubs, err := a.svc.Clubs(r.Context())
	if err != nil {
		return err
	}
	return api.WriteJSON(w, http.StatusOK, map[string]any{"clubs": nonNil(clubs)})
}

func (a *API) types(w http.ResponseWriter, _ *http.Request) error {
	return api.WriteJSON(w, http.StatusOK, map[string]any{"types": a.svc.Types()})
}
