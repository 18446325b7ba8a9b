package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/services/flights"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/problem"
)

//go:embed openapi.json
var openapiJSON []byte

// OpenAPI is the API's OpenAPI document.
func OpenAPI() []byte { return openapiJSON }

// MaxBody bounds a request body. A bulk add becomes one event, which the
// store limits to 1 MiB (eventstore.DefaultLimits.MaxEventBytes): about
// 4,000 legs; a larger one is refused with 413. Twice that leaves room
// for a client's formatting: a body of 16 MiB was decoded and validated
// whole, some 600 MiB allocated, only to be refused.
const MaxBody = 2 << 20

// Planner is the flights service's role: a planner's token changes the
// schedule (rotations and their legs, imports). Any token reads it.
const Planner auth.Role = "planner"

// Roles returns the roles the flights API declares, for the token loader
// of a binary that serves it.
func Roles() []auth.Role { return []auth.Role{Planner} }

// readWait bounds how long a query waits for the view to reach the
// position a client asked for (min_position).
const readWait = 5 * time.Second

// API serves the flights HTTP API over a Service.
type API struct {
	*flights.Service
	tokens  *auth.Tokens
	cache   responseCache // encoded query answers by view position
	imports imports       // uploads and their progress (upload.go)
	hub     hub           // the subscription behind /api/live (live.go)
	// life ends live streams and uploaded imports, so a server shutting
	// down need not wait for them (live.go, upload.go).
	life context.Context
}

// Routes is the flights API's route table: every route, its least role
// and its kind. The handler (New), the node's gating, the cluster's proxy
// routing and the OpenAPI check all read it.
var Routes = []httpkit.Route[*API]{
	command("POST /api/rotations", (*API).createRotation),
	read("GET /api/rotations/{id}", (*API).getRotation),
	command("DELETE /api/rotations/{id}", func(s *API, w http.ResponseWriter, r *http.Request) error {
		return httpkit.Execute(s.Rotations, "id", w, r, func(*http.Request) (flights.RotationCommand, error) { return flights.RemoveRotation{}, nil })
	}),
	command("POST /api/rotations/{id}/legs", (*API).addLeg),
	command("POST /api/rotations/{id}/legs/bulk", (*API).addLegs),
	command("PATCH /api/rotations/{id}/legs/{leg}", func(s *API, w http.ResponseWriter, r *http.Request) error {
		return httpkit.Execute(s.Rotations, "id", w, r, decodeMove)
	}),
	command("DELETE /api/rotations/{id}/legs/{leg}", func(s *API, w http.ResponseWriter, r *http.Request) error {
		return httpkit.Execute(s.Rotations, "id", w, r, func(r *http.Request) (flights.RotationCommand, error) {
			return flights.RemoveLeg{LegID: r.PathValue("leg")}, nil
		})
	}),
	view("GET /api/rotations/{id}/violations", rotationViolations, "cursor"),
	command("POST /api/airplanes", (*API).createAirplane),
	read("GET /api/airplanes/{reg}", (*API).getAirplane),
	command("DELETE /api/airplanes/{reg}", func(s *API, w http.ResponseWriter, r *http.Request) error {
		return httpkit.Execute(s.Airplanes, "reg", w, r, func(*http.Request) (flights.AirplaneCommand, error) { return flights.RemoveAirplane{}, nil })
	}),
	command("PUT /api/airplanes/{reg}/rotation", func(s *API, w http.ResponseWriter, r *http.Request) error {
		return httpkit.Execute(s.Airplanes, "reg", w, r, func(r *http.Request) (flights.AirplaneCommand, error) {
			var body struct {
				Rotation string `json:"rotation"`
			}
			if err := decode(r, &body); err != nil {
				return nil, err
			}
			if body.Rotation == "" {
				return nil, httpkit.BadRequest("rotation is required")
			}
			return flights.AssignRotation{Rotation: body.Rotation}, nil
		})
	}),
	command("DELETE /api/airplanes/{reg}/rotation", func(s *API, w http.ResponseWriter, r *http.Request) error {
		return httpkit.Execute(s.Airplanes, "reg", w, r, func(*http.Request) (flights.AirplaneCommand, error) { return flights.UnassignRotation{}, nil })
	}),
	command("PUT /api/airplanes/{reg}/min-ground-time", func(s *API, w http.ResponseWriter, r *http.Request) error {
		return httpkit.Execute(s.Airplanes, "reg", w, r, func(r *http.Request) (flights.AirplaneCommand, error) {
			m, err := decodeMinutes(r)
			return flights.SetAirplaneMinGroundTime{Minutes: m}, err
		})
	}),
	command("PUT /api/airports/{code}/min-ground-time", (*API).setAirportMGT),
	read("GET /api/airports/{code}", (*API).getAirport),
	view("GET /api/violations", listViolations, "check", "rotation", "airline", "from", "to", "cursor", "limit"),
	view("GET /api/violations/counts", counts),
	view("GET /api/checks/{check}", check, "rotation", "airline", "from", "to", "cursor", "limit"),
	view("GET /api/validity", validity),
	view("GET /api/validation/digest", digest),
	// The web UI's board, live changes and uploads (board.go, live.go, upload.go).
	view("GET /api/board/lanes", boardLanes, "airline", "airport", "airplane", "rotation", "from", "to"),
	view("GET /api/board/legs", boardLegs, "rotations", "from", "to"),
	view("GET /api/board/meta", boardMeta),
	{Spec: httpkit.Spec{Method: "GET", Path: "/api/session", Role: auth.Viewer, Kind: httpkit.Anywhere}, Handle: func(s *API, w http.ResponseWriter, r *http.Request) error { return s.session(s.tokens)(w, r) }},
	{Spec: httpkit.Spec{Method: "GET", Path: "/api/live", Role: auth.Viewer, Kind: httpkit.ViewQuery}, Handle: (*API).live},
	{Spec: httpkit.Spec{Method: "POST", Path: "/api/imports", Role: Planner, Kind: httpkit.Command, Pinned: true}, Handle: func(s *API, w http.ResponseWriter, r *http.Request) error { return s.upload(&s.imports)(w, r) }},
	{Spec: httpkit.Spec{Method: "GET", Path: "/api/imports/{id}", Role: auth.Viewer, Kind: httpkit.Command, Pinned: true}, Handle: func(s *API, w http.ResponseWriter, r *http.Request) error { return s.importStatus(&s.imports)(w, r) }},
	{Spec: httpkit.Spec{Method: "GET", Path: "/api/openapi.json", Public: true, Kind: httpkit.Anywhere}, Handle: func(_ *API, w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := w.Write(openapiJSON)
		return err
	}},
}

// command is a route that changes the schedule: planners only.
func command(pattern string, h func(*API, http.ResponseWriter, *http.Request) error) httpkit.Route[*API] {
	return httpkit.NewRoute(pattern, Planner, httpkit.Command, h)
}

// read is a route that reads an aggregate from the write model.
func read(pattern string, h func(*API, http.ResponseWriter, *http.Request) error) httpkit.Route[*API] {
	return httpkit.NewRoute(pattern, auth.Viewer, httpkit.AggregateRead, h)
}

// view is a query of the validation view, answered through the response
// cache (query); it takes the query parameters named and min_position.
func view(pattern string, build func(r *http.Request, v *flights.Validation) (any, error), query ...string) httpkit.Route[*API] {
	rt := httpkit.NewRoute(pattern, auth.Viewer, httpkit.ViewQuery, func(s *API, w http.ResponseWriter, r *http.Request) error {
		return s.query(w, r, build)
	})
	rt.Query = append(query, httpkit.MinPosition)
	return rt
}

// New returns the flights HTTP API under /api/ for svc: on a full node
// every route; on a read replica (flights.NewReplica, no write model) the
// commands and aggregate reads answer 421; on a commands-only node (no
// validation view) the view queries do. Every route but the OpenAPI
// document needs a bearer token; changing anything needs a planner. ctx
// ends live streams and uploaded imports.
func New(ctx context.Context, svc *flights.Service, tokens *auth.Tokens) http.Handler {
	return newAPIValue(ctx, svc, tokens).handler()
}

func newAPIValue(ctx context.Context, svc *flights.Service, tokens *auth.Tokens) *API {
	return &API{Service: svc, tokens: tokens, life: ctx}
}

func (a *API) handler() http.Handler {
	mux := http.NewServeMux()
	node := httpkit.Node{WriteModel: a.Rotations != nil, Views: a.Validation != nil}
	httpkit.Mount(mux, Routes, a, node, a.tokens, domainErrors)
	mux.Handle("/api/", httpkit.Handler(func(w http.ResponseWriter, r *http.Request) error {
		return &httpkit.Error{Status: http.StatusNotFound, Type: httpkit.TypeNotFound, Detail: fmt.Sprintf("no route %s %s (see /api/openapi.json)", r.Method, r.URL.Path)}
	}, nil))
	return mux
}

// Problem types of the flights domain.
const (
	TypeOverlap    = "urn:logbook:problem:flights:overlap"     // 409: the legs would overlap a leg of the rotation
	TypeRemoved    = "urn:logbook:problem:flights:removed"     // 409: the aggregate was removed
	TypeRuleBroken = "urn:logbook:problem:flights:rule-broken" // 422: a domain rule refuses the command
)

// domainErrors maps the flights domain's errors: 400 a bad cursor, 409 an
// overlap, an existing or a removed aggregate, 404 unknown, 422 a rule
// broken.
func domainErrors(err error) (problem.Details, bool) {
	switch {
	case errors.Is(err, flights.ErrBadCursor):
		return httpkit.Problem(http.StatusBadRequest, httpkit.TypeInvalidRequest, err.Error()), true
	case errors.Is(err, flights.ErrOverlap):
		return httpkit.Problem(http.StatusConflict, TypeOverlap, err.Error()), true
	case errors.Is(err, flights.ErrExists):
		return httpkit.Problem(http.StatusConflict, httpkit.TypeExists, err.Error()), true
	case errors.Is(err, flights.ErrRemoved):
		return httpkit.Problem(http.StatusConflict, TypeRemoved, err.Error()), true
	case errors.Is(err, flights.ErrNotFound):
		return httpkit.Problem(http.StatusNotFound, httpkit.TypeNotFound, err.Error()), true
	case errors.Is(err, flights.ErrInvalid):
		return httpkit.Problem(http.StatusUnprocessableEntity, TypeRuleBroken, err.Error()), true
	}
	return problem.Details{}, false
}

// decode reads a JSON body of at most MaxBody bytes (httpkit.DecodeJSON).
func decode(r *http.Request, v any) error { return httpkit.DecodeJSON(r, MaxBody, v) }

// Rotations ------------------------------------------------------------------

func (s *API) createRotation(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		ID string `json:"id"`
	}
	if r.ContentLength != 0 {
		if err := decode(r, &body); err != nil {
			return err
		}
	}
	opts, err := httpkit.CommandOptions(r)
	if err != nil {
		return err
	}
	var res aggregate.Result[flights.RotationEvent]
	if body.ID == "" {
		res, err = s.Rotations.Create(r.Context(), flights.CreateRotation{}, opts...)
	} else {
		if err := validID("rotation id", body.ID); err != nil {
			return err
		}
		res, err = s.Rotations.Execute(r.Context(), body.ID, flights.CreateRotation{}, opts...)
	}
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/rotations/"+res.ID)
	return httpkit.Answer(w, http.StatusCreated, res)
}

func validID(what, id string) error {
	if len(id) > 128 || strings.ContainsAny(id, "/?#% \t\r\n") {
		return httpkit.BadRequest("%s %q: at most 128 characters, no spaces, slashes or ?#%%", what, id)
	}
	return nil
}

func (s *API) getRotation(w http.ResponseWriter, r *http.Request) error {
	st, v, err := s.Rotations.State(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if !st.Created {
		return fmt.Errorf("rotation %s: %w", r.PathValue("id"), flights.ErrNotFound)
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatUint(v, 10)))
	if st.Legs == nil {
		st.Legs = []flights.Leg{}
	}
	return httpkit.WriteJSON(w, http.StatusOK, struct {
		flights.Rotation
		Version uint64 `json:"version"`
	}{st, v})
}

// LegInput is a leg as a client sends it; id and day_of_origin may be
// left out (a generated id; the UTC date of departure).
type LegInput struct {
	ID           string    `json:"id"`
	Airline      string    `json:"airline"`
	Number       int       `json:"number"`
	Suffix       string    `json:"suffix"`
	Origin       string    `json:"origin"`
	Destination  string    `json:"destination"`
	DayOfOrigin  string    `json:"day_of_origin"`
	Departure    time.Time `json:"departure"`
	Arrival      time.Time `json:"arrival"`
	AircraftType string    `json:"aircraft_type"`
}

// legID names a leg the client left unnamed: derived from the command's
// idempotency key when there is one, so that a retry names the same leg.
func legID(r *http.Request, i int) string {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return NewLegID()
	}
	sum := sha256.Sum256([]byte(r.PathValue("id") + "\x00" + key + "\x00" + strconv.Itoa(i)))
	return strings.ToLower(base32.StdEncoding.EncodeToString(sum[:10]))
}

func (in LegInput) leg(defaultID string) (flights.Leg, error) {
	l := flights.Leg{
		ID: in.ID, Airline: in.Airline, Number: in.Number, Suffix: in.Suffix,
		Origin: in.Origin, Destination: in.Destination, DayOfOrigin: in.DayOfOrigin,
		Departure: in.Departure.UTC(), Arrival: in.Arrival.UTC(), AircraftType: in.AircraftType,
	}
	if l.ID == "" {
		l.ID = defaultID
	} else if err := validID("leg id", l.ID); err != nil {
		return l, err
	}
	if l.DayOfOrigin == "" && !l.Departure.IsZero() {
		l.DayOfOrigin = l.Departure.Format(time.DateOnly)
	}
	return l, nil
}

// NewLegID returns a short random leg id.
func NewLegID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(base32.StdEncoding.EncodeToString(b[:]))
}

func (s *API) addLeg(w http.ResponseWriter, r *http.Request) error {
	var in LegInput
	if err := decode(r, &in); err != nil {
		return err
	}
	l, err := in.leg(legID(r, 0))
	if err != nil {
		return err
	}
	opts, err := httpkit.CommandOptions(r)
	if err != nil {
		return err
	}
	res, err := s.Rotations.Execute(r.Context(), r.PathValue("id"), flights.AddLeg{Leg: l}, opts...)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/rotations/"+res.ID+"/legs/"+l.ID)
	return httpkit.WriteJSON(w, httpkit.ResultHeaders(w, http.StatusCreated, res), struct {
		httpkit.CommandResult
		Leg string `json:"leg"`
	}{httpkit.Result(res), l.ID})
}

func (s *API) addLegs(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Legs []LegInput `json:"legs"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if len(body.Legs) == 0 {
		return httpkit.BadRequest("legs: at least one leg is required")
	}
	legs := make([]flights.Leg, len(body.Legs))
	ids := make([]string, len(body.Legs))
	for i, in := range body.Legs {
		l, err := in.leg(legID(r, i))
		if err != nil {
			return err
		}
		legs[i], ids[i] = l, l.ID
	}
	opts, err := httpkit.CommandOptions(r)
	if err != nil {
		return err
	}
	res, err := s.Rotations.Execute(r.Context(), r.PathValue("id"), flights.AddLegs{Legs: legs}, opts...)
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, httpkit.ResultHeaders(w, http.StatusCreated, res), struct {
		httpkit.CommandResult
		Legs []string `json:"legs"`
	}{httpkit.Result(res), ids})
}

func decodeMove(r *http.Request) (flights.RotationCommand, error) {
	var body struct {
		Departure time.Time `json:"departure"`
		Arrival   time.Time `json:"arrival"`
	}
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	if body.Departure.IsZero() || body.Arrival.IsZero() {
		return nil, httpkit.BadRequest("departure and arrival are required")
	}
	return flights.MoveLeg{LegID: r.PathValue("leg"), Departure: body.Departure, Arrival: body.Arrival}, nil
}

// Airplanes and airports -------------------------------------------------------

func (s *API) createAirplane(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Registration  string `json:"registration"`
		Type          string `json:"type"`
		MinGroundTime int    `json:"min_ground_time"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Registration == "" {
		return httpkit.BadRequest("registration is required")
	}
	if err := validID("registration", body.Registration); err != nil {
		return err
	}
	opts, err := httpkit.CommandOptions(r)
	if err != nil {
		return err
	}
	res, err := s.Airplanes.Execute(r.Context(), body.Registration, flights.CreateAirplane{Type: body.Type, MinGroundTime: body.MinGroundTime}, opts...)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/airplanes/"+res.ID)
	return httpkit.Answer(w, http.StatusCreated, res)
}

func (s *API) getAirplane(w http.ResponseWriter, r *http.Request) error {
	st, v, err := s.Airplanes.State(r.Context(), r.PathValue("reg"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatUint(v, 10)))
	return httpkit.WriteJSON(w, http.StatusOK, struct {
		flights.Airplane
		Version uint64 `json:"version"`
	}{st, v})
}

func decodeMinutes(r *http.Request) (int, error) {
	var body struct {
		Minutes *int `json:"minutes"`
	}
	if err := decode(r, &body); err != nil {
		return 0, err
	}
	if body.Minutes == nil {
		return 0, httpkit.BadRequest("minutes is required")
	}
	return *body.Minutes, nil
}

func (s *API) setAirportMGT(w http.ResponseWriter, r *http.Request) error {
	m, err := decodeMinutes(r)
	if err != nil {
		return err
	}
	opts, err := httpkit.CommandOptions(r)
	if err != nil {
		return err
	}
	res, err := s.Airports.Execute(r.Context(), r.PathValue("code"), flights.SetAirportMinGroundTime{Minutes: m}, opts...)
	if err != nil {
		return err
	}
	return httpkit.Answer(w, http.StatusOK, res)
}

func (s *API) getAirport(w http.ResponseWriter, r *http.Request) error {
	code := r.PathValue("code")
	if !flights.ValidAirport(code) {
		return httpkit.BadRequest("airport %q is not an IATA code", code)
	}
	st, _, err := s.Airports.State(r.Context(), code)
	if err != nil && !errors.Is(err, aggregate.ErrNotFound) {
		return err
	}
	if !st.Set {
		st = flights.Airport{Code: code, MinGroundTime: flights.DefaultAirportMinGroundTime}
	}
	return httpkit.WriteJSON(w, http.StatusOK, st)
}

// Queries ---------------------------------------------------------------------

// query serves a read of the validation view: it waits for min_position
// if asked, and answers from the response cache when the view has not
// moved since the same request was last answered. Read-heavy traffic asks
// the same few questions of a view that changes far less often than it is
// read; the position of the log the view reflects names its content, so a
// cached answer is exactly what a fresh one would be.
func (s *API) query(w http.ResponseWriter, r *http.Request, build func(r *http.Request, v *flights.Validation) (any, error)) error {
	v, err := s.view(r)
	if err != nil {
		return err
	}
	key := cacheKey(r)
	pos := v.Position()
	if body, ok := s.cache.get(key, pos); ok {
		return writeBody(w, body)
	}
	val, err := build(r, v)
	if err != nil {
		return err
	}
	body, err := json.Marshal(val)
	if err != nil {
		return err
	}
	body = append(body, '\n')
	if v.Position() == pos { // nothing applied meanwhile: the answer is pos's
		s.cache.put(key, pos, body)
	}
	return writeBody(w, body)
}

func writeBody(w http.ResponseWriter, body []byte) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, err := w.Write(body)
	return err
}

// cacheKey is the request's path and query without min_position, which
// changes when the answer is ready, not what it is.
func cacheKey(r *http.Request) string {
	if !strings.Contains(r.URL.RawQuery, "min_position") {
		return r.URL.Path + "?" + r.URL.RawQuery
	}
	q := r.URL.Query()
	q.Del("min_position")
	return r.URL.Path + "?" + q.Encode()
}

// responseCache holds encoded answers by request, each valid for one view
// position, within a byte budget.
type responseCache struct {
	mu    sync.RWMutex
	m     map[string]cachedBody
	bytes int // of the cached bodies
}

type cachedBody struct {
	pos  uint64
	body []byte
}

// maxCachedBytes bounds the cache; when an answer would take it over, it
// starts over, which costs one recomputation per distinct request. (The
// requests themselves are few: unknown query parameters are refused.)
const maxCachedBytes = 64 << 20

func (c *responseCache) get(key string, pos uint64) ([]byte, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.m[key]
	if !ok || e.pos != pos {
		return nil, false
	}
	return e.body, true
}

func (c *responseCache) put(key string, pos uint64, body []byte) {
	if len(body) > maxCachedBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[key]; ok {
		c.bytes -= len(old.body)
	}
	if c.m == nil || c.bytes+len(body) > maxCachedBytes {
		c.m, c.bytes = make(map[string]cachedBody), 0
	}
	c.m[key] = cachedBody{pos, body}
	c.bytes += len(body)
}

// errNoView answers a view query on a write node that keeps no view.
var errNoView = &httpkit.Error{Status: http.StatusMisdirectedRequest, Detail: "this write node keeps no validation view (commands only): send queries to a read replica"}

// view waits, if the client asked with min_position, until the validation
// view has applied that position (read-your-writes), and returns it.
func (s *API) view(r *http.Request) (*flights.Validation, error) {
	if s.Validation == nil {
		return nil, errNoView
	}
	if !strings.Contains(r.URL.RawQuery, "min_position") {
		return s.Validation.Current(), nil
	}
	if p := r.URL.Query().Get("min_position"); p != "" {
		pos, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return nil, httpkit.BadRequest("min_position %q: want a log position", p)
		}
		ctx, cancel := context.WithTimeout(r.Context(), readWait)
		defer cancel()
		if err := s.Validation.WaitFor(ctx, pos); err != nil {
			return nil, fmt.Errorf("waiting for the view to reach position %d: %w", pos, err)
		}
	}
	return s.Validation.Current(), nil
}

func parseFilter(r *http.Request) (flights.Filter, string, int, error) {
	q := r.URL.Query()
	f := flights.Filter{Check: flights.Check(q.Get("check")), Rotation: q.Get("rotation"), Airline: q.Get("airline")}
	if f.Check != "" && f.Check != flights.Continuity && f.Check != flights.MinGroundTime && f.Check != flights.DuplicateDesignator {
		return f, "", 0, httpkit.BadRequest("check %q: want continuity, min_ground_time or duplicate_designator", f.Check)
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if v := q.Get(p.name); v != "" {
			t, err := parseTime(v)
			if err != nil {
				return f, "", 0, httpkit.BadRequest("%s %q: want RFC 3339 or YYYY-MM-DD", p.name, v)
			}
			*p.dst = t
		}
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return f, "", 0, httpkit.BadRequest("limit %q: want 1–1000", v)
		}
		limit = n
	}
	return f, q.Get("cursor"), limit, nil
}

func parseTime(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	return time.Parse(time.DateOnly, v)
}

func listViolations(r *http.Request, v *flights.Validation) (any, error) {
	f, cursor, limit, err := parseFilter(r)
	if err != nil {
		return nil, err
	}
	page, err := v.Violations(f, cursor, limit)
	if page.Violations == nil {
		page.Violations = []flights.Violation{}
	}
	return page, err
}

func rotationViolations(r *http.Request, v *flights.Validation) (any, error) {
	id := r.PathValue("id")
	valid, exists := v.RotationValid(id)
	if !exists {
		return nil, fmt.Errorf("rotation %s: %w", id, flights.ErrNotFound)
	}
	page, err := v.Violations(flights.Filter{Rotation: id}, r.URL.Query().Get("cursor"), 1000)
	if err != nil {
		return nil, err
	}
	if page.Violations == nil {
		page.Violations = []flights.Violation{}
	}
	return struct {
		Rotation string `json:"rotation"`
		Valid    bool   `json:"valid"`
		flights.Page
	}{id, valid, page}, nil
}

func counts(_ *http.Request, v *flights.Validation) (any, error) {
	c, pos := v.Counts()
	return struct {
		flights.Counts
		Position uint64 `json:"position"`
	}{c, pos}, nil
}

// check answers one schedule validation — the three queries a planner's
// screen asks most, and the read load test's mix: the count of a check's
// violations and the first ten (a page small enough to leave in one
// write).
func check(r *http.Request, v *flights.Validation) (any, error) {
	c := flights.Check(r.PathValue("check"))
	if c != flights.Continuity && c != flights.MinGroundTime && c != flights.DuplicateDesignator {
		return nil, &httpkit.Error{Status: http.StatusNotFound, Detail: fmt.Sprintf("no check %q: continuity, min_ground_time or duplicate_designator", c)}
	}
	f, cursor, limit, err := parseFilter(r)
	if err != nil {
		return nil, err
	}
	if r.URL.Query().Get("limit") == "" {
		limit = 10
	}
	f.Check = c
	counts, pos := v.Counts()
	page, err := v.Violations(f, cursor, limit)
	if err != nil {
		return nil, err
	}
	if page.Violations == nil {
		page.Violations = []flights.Violation{}
	}
	n := map[flights.Check]int{flights.Continuity: counts.Continuity, flights.MinGroundTime: counts.MinGroundTime, flights.DuplicateDesignator: counts.DuplicateDesignator}[c]
	return struct {
		Check    flights.Check `json:"check"`
		Valid    bool          `json:"valid"`
		Count    int           `json:"count"`
		Position uint64        `json:"position"`
		flights.Page
	}{c, n == 0, n, pos, page}, nil
}

// digest answers the view's fingerprint (flights.Validation.Digest), which the
// cluster test compares across replicas and with a rebuild.
func digest(_ *http.Request, v *flights.Validation) (any, error) {
	d, pos := v.Digest()
	return struct {
		Digest   string `json:"digest"`
		Position uint64 `json:"position"`
	}{d, pos}, nil
}

func validity(_ *http.Request, v *flights.Validation) (any, error) {
	c, pos := v.Counts()
	return struct {
		Valid    bool           `json:"valid"`
		Counts   flights.Counts `json:"counts"`
		Stats    flights.Stats  `json:"schedule"`
		Position uint64         `json:"position"`
	}{c.Total == 0, c, v.Stats(), pos}, nil
}
