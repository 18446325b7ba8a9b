package flights

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/problem"
)

//go:embed openapi.json
var openapiJSON []byte

// MaxBody bounds a request body. A bulk add becomes one event, which the
// store limits to 1 MiB: about 4,000 legs; a larger one is refused with 413.
const MaxBody = 16 << 20

// readWait bounds how long a query waits for the view to reach the
// position a client asked for (min_position).
const readWait = 5 * time.Second

// Handler serves the flights HTTP API under /api/. Every route but the
// OpenAPI document needs a bearer token; changing anything needs a planner.
func (s *Service) Handler(tokens *auth.Tokens) http.Handler {
	mux := http.NewServeMux()
	h := func(pattern string, f func(http.ResponseWriter, *http.Request) error) {
		mux.Handle(pattern, tokens.Require(handler(f)))
	}
	if s.Rotations == nil {
		// A read replica (NewReplica) has no write model: its routes
		// answer that commands go to the primary.
		query := h
		h = func(pattern string, f func(http.ResponseWriter, *http.Request) error) {
			if strings.HasPrefix(pattern, "GET /api/violations") || strings.HasPrefix(pattern, "GET /api/checks/") ||
				pattern == "GET /api/validity" || pattern == "GET /api/validation/digest" || pattern == "GET /api/rotations/{id}/violations" ||
				strings.HasPrefix(pattern, "GET /api/board/") || pattern == "GET /api/live" || pattern == "GET /api/session" {
				query(pattern, f)
				return
			}
			query(pattern, func(http.ResponseWriter, *http.Request) error {
				return httpError{http.StatusMisdirectedRequest, "this is a read replica: it answers the validation queries; send commands and aggregate reads to the primary"}
			})
		}
	}
	h("POST /api/rotations", s.createRotation)
	h("GET /api/rotations/{id}", s.getRotation)
	h("DELETE /api/rotations/{id}", execute(s.Rotations, "id", func(*http.Request) (RotationCommand, error) { return RemoveRotation{}, nil }))
	h("POST /api/rotations/{id}/legs", s.addLeg)
	h("POST /api/rotations/{id}/legs/bulk", s.addLegs)
	h("PATCH /api/rotations/{id}/legs/{leg}", execute(s.Rotations, "id", decodeMove))
	h("DELETE /api/rotations/{id}/legs/{leg}", execute(s.Rotations, "id", func(r *http.Request) (RotationCommand, error) {
		return RemoveLeg{LegID: r.PathValue("leg")}, nil
	}))
	h("GET /api/rotations/{id}/violations", s.query(rotationViolations))
	h("POST /api/airplanes", s.createAirplane)
	h("GET /api/airplanes/{reg}", s.getAirplane)
	h("DELETE /api/airplanes/{reg}", execute(s.Airplanes, "reg", func(*http.Request) (AirplaneCommand, error) { return RemoveAirplane{}, nil }))
	h("PUT /api/airplanes/{reg}/rotation", execute(s.Airplanes, "reg", func(r *http.Request) (AirplaneCommand, error) {
		var body struct {
			Rotation string `json:"rotation"`
		}
		if err := decode(r, &body); err != nil {
			return nil, err
		}
		if body.Rotation == "" {
			return nil, badRequest("rotation is required")
		}
		return AssignRotation{Rotation: body.Rotation}, nil
	}))
	h("DELETE /api/airplanes/{reg}/rotation", execute(s.Airplanes, "reg", func(*http.Request) (AirplaneCommand, error) { return UnassignRotation{}, nil }))
	h("PUT /api/airplanes/{reg}/min-ground-time", execute(s.Airplanes, "reg", func(r *http.Request) (AirplaneCommand, error) {
		m, err := decodeMinutes(r)
		return SetAirplaneMinGroundTime{Minutes: m}, err
	}))
	h("PUT /api/airports/{code}/min-ground-time", s.setAirportMGT)
	h("GET /api/airports/{code}", s.getAirport)
	h("GET /api/violations", s.query(listViolations))
	h("GET /api/violations/counts", s.query(counts))
	h("GET /api/checks/{check}", s.query(check))
	h("GET /api/validity", s.query(validity))
	h("GET /api/validation/digest", s.query(digest))
	// The web UI's board, live changes and uploads (board.go, live.go, upload.go).
	h("GET /api/board/lanes", s.query(boardLanes))
	h("GET /api/board/legs", s.query(boardLegs))
	h("GET /api/board/meta", s.query(boardMeta))
	h("GET /api/session", s.session(tokens))
	h("GET /api/live", s.live)
	im := &imports{}
	h("POST /api/imports", s.upload(im))
	h("GET /api/imports/{id}", s.importStatus(im))
	mux.HandleFunc("GET /api/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openapiJSON)
	})
	mux.Handle("/api/", handler(func(w http.ResponseWriter, r *http.Request) error {
		return httpError{http.StatusNotFound, fmt.Sprintf("no route %s %s (see /api/openapi.json)", r.Method, r.URL.Path)}
	}))
	return mux
}

// handler turns an error-returning handler into an http.Handler that
// answers errors as problem+json.
type handler func(http.ResponseWriter, *http.Request) error

func (f handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := f(w, r); err != nil {
		writeError(w, err)
	}
}

// httpError carries a status chosen by the HTTP layer itself.
type httpError struct {
	status int
	msg    string
}

func (e httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// writeError maps domain and store errors to statuses: 400 malformed,
// 404 unknown, 409 version conflict, overlap or existing, 422 a rule broken.
func writeError(w http.ResponseWriter, err error) {
	var he httpError
	var ce *eventstore.ConflictError
	switch {
	case errors.As(err, &he):
		problem.Error(w, he.status, he.msg)
	case errors.Is(err, ErrBadCursor):
		problem.Error(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, aggregate.ErrClosed), errors.Is(err, eventstore.ErrClosed):
		w.Header().Set("Retry-After", "1")
		problem.Error(w, http.StatusServiceUnavailable, err.Error())
	case errors.As(err, &ce):
		d := problem.New(http.StatusConflict, err.Error())
		d.Extra = map[string]any{"actual_version": ce.Actual}
		problem.Write(w, d)
	case errors.Is(err, ErrOverlap), errors.Is(err, ErrExists), errors.Is(err, aggregate.ErrExists), errors.Is(err, ErrRemoved), errors.Is(err, eventstore.ErrVersionConflict):
		problem.Error(w, http.StatusConflict, err.Error())
	case errors.Is(err, eventstore.ErrEventTooLarge), errors.Is(err, eventstore.ErrAppendTooLarge):
		problem.Error(w, http.StatusRequestEntityTooLarge, err.Error()+" (split a bulk add into smaller ones)")
	case errors.Is(err, ErrNotFound), errors.Is(err, aggregate.ErrNotFound):
		problem.Error(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrInvalid):
		problem.Error(w, http.StatusUnprocessableEntity, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "1")
		problem.Error(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, context.Canceled):
		problem.Error(w, 499, "request cancelled")
	default:
		problem.Error(w, http.StatusInternalServerError, err.Error())
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

// decode reads a JSON body strictly: unknown fields and trailing data are
// errors, so a typo is not silently ignored.
func decode(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return httpError{http.StatusUnsupportedMediaType, fmt.Sprintf("content type %q, want application/json", ct)}
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, MaxBody+1))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return badRequest("request body is empty, want a JSON object")
		}
		return badRequest("malformed JSON body: %v", err)
	}
	if dec.More() {
		return badRequest("malformed JSON body: data after the object")
	}
	return nil
}

// commandOptions reads Idempotency-Key and If-Match.
func commandOptions(r *http.Request) ([]aggregate.Option, error) {
	var opts []aggregate.Option
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		if len(k) > 200 {
			return nil, badRequest("Idempotency-Key longer than 200 characters")
		}
		opts = append(opts, aggregate.WithIdempotencyKey(k))
	}
	if m := r.Header.Get("If-Match"); m != "" {
		v, err := strconv.ParseUint(strings.Trim(m, `"`), 10, 64)
		if err != nil {
			return nil, badRequest("If-Match %q: want the aggregate version, a number", m)
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

func answer[E any](w http.ResponseWriter, status int, res aggregate.Result[E]) error {
	return writeJSON(w, resultHeaders(w, status, res), result(res))
}

func result[E any](res aggregate.Result[E]) CommandResult {
	return CommandResult{ID: res.ID, Version: res.Version, Position: res.Position, Duplicate: res.Duplicate}
}

// resultHeaders sets the version (ETag, for If-Match) and log position of
// a command's result, and returns the status: a duplicate is a plain 200.
func resultHeaders[E any](w http.ResponseWriter, status int, res aggregate.Result[E]) int {
	w.Header().Set("ETag", strconv.Quote(strconv.FormatUint(res.Version, 10)))
	if res.Position > 0 {
		w.Header().Set("X-Logbook-Position", strconv.FormatUint(res.Position, 10))
	}
	if res.Duplicate {
		return http.StatusOK
	}
	return status
}

// Rotations ------------------------------------------------------------------

func (s *Service) createRotation(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		ID string `json:"id"`
	}
	if r.ContentLength != 0 {
		if err := decode(r, &body); err != nil {
			return err
		}
	}
	opts, err := commandOptions(r)
	if err != nil {
		return err
	}
	var res aggregate.Result[RotationEvent]
	if body.ID == "" {
		res, err = s.Rotations.Create(r.Context(), CreateRotation{}, opts...)
	} else {
		if err := validID("rotation id", body.ID); err != nil {
			return err
		}
		res, err = s.Rotations.Execute(r.Context(), body.ID, CreateRotation{}, opts...)
	}
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/rotations/"+res.ID)
	return answer(w, http.StatusCreated, res)
}

func validID(what, id string) error {
	if len(id) > 128 || strings.ContainsAny(id, "/?#% \t\r\n") {
		return badRequest("%s %q: at most 128 characters, no spaces, slashes or ?#%%", what, id)
	}
	return nil
}

func (s *Service) getRotation(w http.ResponseWriter, r *http.Request) error {
	st, v, err := s.Rotations.State(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if !st.Created {
		return fmt.Errorf("rotation %s: %w", r.PathValue("id"), ErrNotFound)
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatUint(v, 10)))
	if st.Legs == nil {
		st.Legs = []Leg{}
	}
	return writeJSON(w, http.StatusOK, struct {
		Rotation
		Version uint64 `json:"version"`
	}{st, v})
}

// execute answers a command built from the request, run on the aggregate
// the path parameter idParam names.
func execute[S, C, E any](rt *aggregate.Runtime[S, C, E], idParam string, build func(*http.Request) (C, error)) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		cmd, err := build(r)
		if err != nil {
			return err
		}
		opts, err := commandOptions(r)
		if err != nil {
			return err
		}
		res, err := rt.Execute(r.Context(), r.PathValue(idParam), cmd, opts...)
		if err != nil {
			return err
		}
		return answer(w, http.StatusOK, res)
	}
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

func (in LegInput) leg(defaultID string) (Leg, error) {
	l := Leg{
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

func (s *Service) addLeg(w http.ResponseWriter, r *http.Request) error {
	var in LegInput
	if err := decode(r, &in); err != nil {
		return err
	}
	l, err := in.leg(legID(r, 0))
	if err != nil {
		return err
	}
	opts, err := commandOptions(r)
	if err != nil {
		return err
	}
	res, err := s.Rotations.Execute(r.Context(), r.PathValue("id"), AddLeg{Leg: l}, opts...)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/rotations/"+res.ID+"/legs/"+l.ID)
	return writeJSON(w, resultHeaders(w, http.StatusCreated, res), struct {
		CommandResult
		Leg string `json:"leg"`
	}{result(res), l.ID})
}

func (s *Service) addLegs(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Legs []LegInput `json:"legs"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if len(body.Legs) == 0 {
		return badRequest("legs: at least one leg is required")
	}
	legs := make([]Leg, len(body.Legs))
	ids := make([]string, len(body.Legs))
	for i, in := range body.Legs {
		l, err := in.leg(legID(r, i))
		if err != nil {
			return err
		}
		legs[i], ids[i] = l, l.ID
	}
	opts, err := commandOptions(r)
	if err != nil {
		return err
	}
	res, err := s.Rotations.Execute(r.Context(), r.PathValue("id"), AddLegs{Legs: legs}, opts...)
	if err != nil {
		return err
	}
	return writeJSON(w, resultHeaders(w, http.StatusCreated, res), struct {
		CommandResult
		Legs []string `json:"legs"`
	}{result(res), ids})
}

func decodeMove(r *http.Request) (RotationCommand, error) {
	var body struct {
		Departure time.Time `json:"departure"`
		Arrival   time.Time `json:"arrival"`
	}
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	if body.Departure.IsZero() || body.Arrival.IsZero() {
		return nil, badRequest("departure and arrival are required")
	}
	return MoveLeg{LegID: r.PathValue("leg"), Departure: body.Departure, Arrival: body.Arrival}, nil
}

// Airplanes and airports -------------------------------------------------------

func (s *Service) createAirplane(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Registration  string `json:"registration"`
		Type          string `json:"type"`
		MinGroundTime int    `json:"min_ground_time"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Registration == "" {
		return badRequest("registration is required")
	}
	if err := validID("registration", body.Registration); err != nil {
		return err
	}
	opts, err := commandOptions(r)
	if err != nil {
		return err
	}
	res, err := s.Airplanes.Execute(r.Context(), body.Registration, CreateAirplane{Type: body.Type, MinGroundTime: body.MinGroundTime}, opts...)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/airplanes/"+res.ID)
	return answer(w, http.StatusCreated, res)
}

func (s *Service) getAirplane(w http.ResponseWriter, r *http.Request) error {
	st, v, err := s.Airplanes.State(r.Context(), r.PathValue("reg"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatUint(v, 10)))
	return writeJSON(w, http.StatusOK, struct {
		Airplane
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
		return 0, badRequest("minutes is required")
	}
	return *body.Minutes, nil
}

func (s *Service) setAirportMGT(w http.ResponseWriter, r *http.Request) error {
	m, err := decodeMinutes(r)
	if err != nil {
		return err
	}
	opts, err := commandOptions(r)
	if err != nil {
		return err
	}
	res, err := s.Airports.Execute(r.Context(), r.PathValue("code"), SetAirportMinGroundTime{Minutes: m}, opts...)
	if err != nil {
		return err
	}
	return answer(w, http.StatusOK, res)
}

func (s *Service) getAirport(w http.ResponseWriter, r *http.Request) error {
	code := r.PathValue("code")
	if !ValidAirport(code) {
		return badRequest("airport %q is not an IATA code", code)
	}
	st, _, err := s.Airports.State(r.Context(), code)
	if err != nil && !errors.Is(err, aggregate.ErrNotFound) {
		return err
	}
	if !st.Set {
		st = Airport{Code: code, MinGroundTime: DefaultAirportMinGroundTime}
	}
	return writeJSON(w, http.StatusOK, st)
}

// Queries ---------------------------------------------------------------------

// query serves a read of the validation view: it waits for min_position
// if asked, and answers from the response cache when the view has not
// moved since the same request was last answered. Read-heavy traffic asks
// the same few questions of a view that changes far less often than it is
// read; the position of the log the view reflects names its content, so a
// cached answer is exactly what a fresh one would be.
func (s *Service) query(build func(r *http.Request, v *Validation) (any, error)) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
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
// position.
type responseCache struct {
	mu sync.RWMutex
	m  map[string]cachedBody
}

type cachedBody struct {
	pos  uint64
	body []byte
}

// maxCached bounds the cache; when full it starts over, which costs one
// recomputation per distinct request.
const maxCached = 4096

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
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCached {
		c.m = make(map[string]cachedBody)
	}
	c.m[key] = cachedBody{pos, body}
}

// errNoView answers a view query on a write node that keeps no view.
var errNoView = httpError{http.StatusMisdirectedRequest, "this write node keeps no validation view (commands only): send queries to a read replica"}

// view waits, if the client asked with min_position, until the validation
// view has applied that position (read-your-writes), and returns it.
func (s *Service) view(r *http.Request) (*Validation, error) {
	if s.Validation == nil {
		return nil, errNoView
	}
	if !strings.Contains(r.URL.RawQuery, "min_position") {
		return s.Validation.Current(), nil
	}
	if p := r.URL.Query().Get("min_position"); p != "" {
		pos, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return nil, badRequest("min_position %q: want a log position", p)
		}
		ctx, cancel := context.WithTimeout(r.Context(), readWait)
		defer cancel()
		if err := s.Validation.WaitFor(ctx, pos); err != nil {
			return nil, fmt.Errorf("waiting for the view to reach position %d: %w", pos, err)
		}
	}
	return s.Validation.Current(), nil
}

func parseFilter(r *http.Request) (Filter, string, int, error) {
	q := r.URL.Query()
	f := Filter{Check: Check(q.Get("check")), Rotation: q.Get("rotation"), Airline: q.Get("airline")}
	if f.Check != "" && f.Check != Continuity && f.Check != MinGroundTime && f.Check != DuplicateDesignator {
		return f, "", 0, badRequest("check %q: want continuity, min_ground_time or duplicate_designator", f.Check)
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if v := q.Get(p.name); v != "" {
			t, err := parseTime(v)
			if err != nil {
				return f, "", 0, badRequest("%s %q: want RFC 3339 or YYYY-MM-DD", p.name, v)
			}
			*p.dst = t
		}
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return f, "", 0, badRequest("limit %q: want 1–1000", v)
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

func listViolations(r *http.Request, v *Validation) (any, error) {
	f, cursor, limit, err := parseFilter(r)
	if err != nil {
		return nil, err
	}
	page, err := v.Violations(f, cursor, limit)
	if page.Violations == nil {
		page.Violations = []Violation{}
	}
	return page, err
}

func rotationViolations(r *http.Request, v *Validation) (any, error) {
	id := r.PathValue("id")
	valid, exists := v.RotationValid(id)
	if !exists {
		return nil, fmt.Errorf("rotation %s: %w", id, ErrNotFound)
	}
	page, err := v.Violations(Filter{Rotation: id}, r.URL.Query().Get("cursor"), 1000)
	if err != nil {
		return nil, err
	}
	if page.Violations == nil {
		page.Violations = []Violation{}
	}
	return struct {
		Rotation string `json:"rotation"`
		Valid    bool   `json:"valid"`
		Page
	}{id, valid, page}, nil
}

func counts(_ *http.Request, v *Validation) (any, error) {
	c, pos := v.Counts()
	return struct {
		Counts
		Position uint64 `json:"position"`
	}{c, pos}, nil
}

// check answers one schedule validation (the load test's three queries,
// seed 000 §6.3): the count of a check's violations and the first ten (a page small
// enough to leave in one write).
func check(r *http.Request, v *Validation) (any, error) {
	c := Check(r.PathValue("check"))
	if c != Continuity && c != MinGroundTime && c != DuplicateDesignator {
		return nil, httpError{http.StatusNotFound, fmt.Sprintf("no check %q: continuity, min_ground_time or duplicate_designator", c)}
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
		page.Violations = []Violation{}
	}
	n := map[Check]int{Continuity: counts.Continuity, MinGroundTime: counts.MinGroundTime, DuplicateDesignator: counts.DuplicateDesignator}[c]
	return struct {
		Check    Check  `json:"check"`
		Valid    bool   `json:"valid"`
		Count    int    `json:"count"`
		Position uint64 `json:"position"`
		Page
	}{c, n == 0, n, pos, page}, nil
}

// digest answers the view's fingerprint (Validation.Digest), which the
// cluster test compares across replicas and with a rebuild.
func digest(_ *http.Request, v *Validation) (any, error) {
	d, pos := v.Digest()
	return struct {
		Digest   string `json:"digest"`
		Position uint64 `json:"position"`
	}{d, pos}, nil
}

func validity(_ *http.Request, v *Validation) (any, error) {
	c, pos := v.Counts()
	return struct {
		Valid    bool   `json:"valid"`
		Counts   Counts `json:"counts"`
		Stats    Stats  `json:"schedule"`
		Position uint64 `json:"position"`
	}{c.Total == 0, c, v.Stats(), pos}, nil
}
