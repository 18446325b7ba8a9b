// Package httpapi is the tickets service's HTTP API under /api/tickets/:
// search (any token), book and return (a booker's token), control (a
// request that touches no store), the service's counters and their
// live stream of throughputs (live.go), who the token is, and the
// OpenAPI document. Its route table (Routes) is what the handler, the
// node gating and the OpenAPI check read.
package httpapi

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/engine/problem"
	"github.com/logbook/logbook/services/tickets"
)

//go:embed openapi.json
var openapiJSON []byte

// OpenAPI is the API's OpenAPI document.
func OpenAPI() []byte { return openapiJSON }

// maxBody bounds a request body: a book or return is one owner name.
const maxBody = 4 << 10

// Booker is the tickets service's role: a booker's token books and
// returns tickets. Any token searches.
const Booker auth.Role = "booker"

// Roles returns the roles the tickets API declares, for the token loader
// of a binary that serves it.
func Roles() []auth.Role { return []auth.Role{Booker} }

// readWait bounds how long a search waits for the view to reach the
// position a client asked for (min_position); then 503.
const readWait = 5 * time.Second

// API serves the tickets HTTP API over a Service.
type API struct {
	*tickets.Service
	tokens *auth.Tokens
	// life ends live streams, so that a server shutting down need not
	// wait for them (live.go).
	life context.Context
	live liveLimit
}

// Routes is the tickets API's route table.
var Routes = []httpkit.Route[*API]{
	route("GET /api/tickets/search", auth.Viewer, httpkit.ViewQuery, (*API).search).WithQuery("sport", "owner", "day", "available", "limit", httpkit.MinPosition),
	route("POST /api/tickets/{id}/book", Booker, httpkit.Command, (*API).book),
	route("POST /api/tickets/{id}/return", Booker, httpkit.Command, (*API).giveBack),
	route("GET /api/tickets/control", auth.Viewer, httpkit.Anywhere, (*API).control),
	route("GET /api/tickets/stats", auth.Viewer, httpkit.Anywhere, (*API).stats),
	route("GET /api/tickets/live", auth.Viewer, httpkit.Anywhere, (*API).liveStats).WithQuery("interval", "format"),
	route("GET /api/tickets/session", auth.Viewer, httpkit.Anywhere, (*API).session),
	{Spec: httpkit.Spec{Method: "GET", Path: "/api/tickets/openapi.json", Public: true, Kind: httpkit.Anywhere}, Handle: func(_ *API, w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := w.Write(openapiJSON)
		return err
	}},
}

// route is httpkit.NewRoute with a Retry-After on the answers of a busy
// store.
func route(pattern string, role auth.Role, kind httpkit.Kind, h func(*API, http.ResponseWriter, *http.Request) error) httpkit.Route[*API] {
	return httpkit.NewRoute(pattern, role, kind, func(a *API, w http.ResponseWriter, r *http.Request) error {
		err := h(a, w, r)
		if errors.Is(err, tickets.ErrBusy) || errors.Is(err, tickets.ErrKeyBusy) {
			w.Header().Set("Retry-After", "1")
		}
		return err
	})
}

// New returns the tickets HTTP API for svc. Every route but the OpenAPI
// document needs a bearer token; booking and returning need a booker's.
// ctx ends live streams.
func New(ctx context.Context, svc *tickets.Service, tokens *auth.Tokens) http.Handler {
	return (&API{Service: svc, tokens: tokens, life: ctx}).handler()
}

func (a *API) handler() http.Handler {
	mux := http.NewServeMux()
	httpkit.Mount(mux, Routes, a, httpkit.Node{WriteModel: true, Views: true}, a.tokens, domainErrors)
	mux.Handle("/api/tickets/", httpkit.Handler(func(w http.ResponseWriter, r *http.Request) error {
		return &httpkit.Error{Status: http.StatusNotFound, Type: httpkit.TypeNotFound, Detail: fmt.Sprintf("no route %s %s (see /api/tickets/openapi.json)", r.Method, r.URL.Path)}
	}, nil))
	return mux
}

// Problem types of the tickets domain.
const (
	TypeTaken   = "urn:logbook:problem:tickets:taken"    // 409: someone else holds the ticket (who is not said)
	TypeNotHeld = "urn:logbook:problem:tickets:not-held" // 409: a return by someone who does not hold the ticket
	TypeBusy    = "urn:logbook:problem:tickets:busy"     // 503 (all queues full) or 429 (this sport's queue full); Retry-After
)

// domainErrors maps the tickets errors: 409 taken or not held, 404 no
// such ticket or sport, 400 invalid input, 429 the sport's queue full,
// 503 every queue full or the service closed.
func domainErrors(err error) (problem.Details, bool) {
	switch {
	case errors.Is(err, tickets.ErrTaken):
		return httpkit.Problem(http.StatusConflict, TypeTaken, err.Error()), true
	case errors.Is(err, tickets.ErrNotHeld):
		return httpkit.Problem(http.StatusConflict, TypeNotHeld, err.Error()), true
	case errors.Is(err, tickets.ErrNotFound):
		return httpkit.Problem(http.StatusNotFound, httpkit.TypeNotFound, err.Error()), true
	case errors.Is(err, tickets.ErrInvalid):
		return httpkit.Problem(http.StatusBadRequest, httpkit.TypeInvalidRequest, err.Error()), true
	case errors.Is(err, tickets.ErrKeyBusy):
		return httpkit.Problem(http.StatusTooManyRequests, TypeBusy, err.Error()), true
	case errors.Is(err, tickets.ErrBusy):
		return httpkit.Problem(http.StatusServiceUnavailable, TypeBusy, err.Error()), true
	case errors.Is(err, tickets.ErrClosed):
		return httpkit.Problem(http.StatusServiceUnavailable, httpkit.TypeUnavailable, err.Error()), true
	}
	return problem.Details{}, false
}

func (a *API) search(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query()
	q := tickets.Query{Sport: v.Get("sport"), Owner: v.Get("owner"), Limit: 100}
	if q.Sport == "" {
		return httpkit.BadRequest("sport is required")
	}
	if q.Owner != "" {
		// Bookers act for owners (owners are names a booker gives, not
		// identities the token proves); listing a named person's
		// tickets is theirs to do, not any viewer's.
		tok, _ := auth.FromRequest(r)
		if role, ok := a.tokens.Lookup(tok); !ok || !role.Has(Booker) {
			return &httpkit.Error{Status: http.StatusForbidden, Detail: "searching by owner needs a booker's token"}
		}
	}
	var err error
	if s := v.Get("day"); s != "" {
		if q.Day, err = strconv.Atoi(s); err != nil || q.Day < 1 {
			return httpkit.BadRequest("day %q: want a positive number", s)
		}
	}
	if s := v.Get("limit"); s != "" {
		if q.Limit, err = strconv.Atoi(s); err != nil {
			return httpkit.BadRequest("limit %q: want a number", s)
		}
	}
	if s := v.Get("available"); s != "" {
		if q.Available, err = strconv.ParseBool(s); err != nil {
			return httpkit.BadRequest("available %q: want true or false", s)
		}
	}
	if s := v.Get(httpkit.MinPosition); s != "" {
		// Read your writes: wait, before taking a node's time, until the
		// view has applied the position a book or return answered.
		pos, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return httpkit.BadRequest("min_position %q: want a log position", s)
		}
		ctx, cancel := context.WithTimeout(r.Context(), readWait)
		defer cancel()
		if err := a.Search.WaitFor(ctx, pos); err != nil {
			return fmt.Errorf("waiting for the search view to reach position %d: %w", pos, err)
		}
	}
	body, err := a.FindJSON(r.Context(), q)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, err = w.Write(body)
	return err
}

// ownerBody is the body of a book or return.
type ownerBody struct {
	Owner string `json:"owner"`
}

// bookingAnswer is the answer to a book or return.
type bookingAnswer struct {
	Ticket tickets.Ticket `json:"ticket"`
	httpkit.CommandResult
}

func (a *API) book(w http.ResponseWriter, r *http.Request) error {
	return a.command(w, r, a.Book)
}

func (a *API) giveBack(w http.ResponseWriter, r *http.Request) error {
	return a.command(w, r, a.Return)
}

func (a *API) command(w http.ResponseWriter, r *http.Request, do func(ctx context.Context, id, owner string, opts ...aggregate.Option) (tickets.Booking, error)) error {
	var body ownerBody
	if err := httpkit.DecodeJSON(r, maxBody, &body); err != nil {
		return err
	}
	if body.Owner == "" {
		return httpkit.BadRequest("owner is required")
	}
	opts, err := httpkit.CommandOptions(r)
	if err != nil {
		return err
	}
	b, err := do(r.Context(), r.PathValue("id"), body.Owner, opts...)
	if err != nil {
		return err
	}
	status := httpkit.ResultHeaders(w, http.StatusOK, b.Result)
	return httpkit.WriteJSON(w, status, bookingAnswer{Ticket: b.Ticket, CommandResult: httpkit.Result(b.Result)})
}

func (a *API) control(w http.ResponseWriter, r *http.Request) error {
	if err := a.Control(r.Context()); err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (a *API) stats(w http.ResponseWriter, _ *http.Request) error {
	return httpkit.WriteJSON(w, http.StatusOK, a.Stats())
}
