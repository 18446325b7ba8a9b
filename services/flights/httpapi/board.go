package httpapi

import (
	"net/http"
	"strings"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/services/flights"
)

// maxWindow bounds the span of one /api/board/legs request: a board shows
// days or weeks, and a season-long window of many lanes would be an
// answer of hundreds of megabytes.
const maxWindow = 62 * 24 * time.Hour

// maxWindowLanes bounds the rotations of one /api/board/legs request.
const maxWindowLanes = 300

func boardLanes(r *http.Request, v *flights.Validation) (any, error) {
	q := r.URL.Query()
	f := flights.LaneFilter{
		Airline:  strings.ToUpper(strings.TrimSpace(q.Get("airline"))),
		Airport:  strings.ToUpper(strings.TrimSpace(q.Get("airport"))),
		Airplane: strings.TrimSpace(q.Get("airplane")),
		Rotation: strings.TrimSpace(q.Get("rotation")),
	}
	var err error
	if f.From, f.To, err = timeRange(r, false); err != nil {
		return nil, err
	}
	return v.BoardLanes(f), nil
}

func boardLegs(r *http.Request, v *flights.Validation) (any, error) {
	from, to, err := timeRange(r, true)
	if err != nil {
		return nil, err
	}
	if to.Sub(from) > maxWindow {
		return nil, httpkit.BadRequest("from %s to %s: a window spans at most %d days", from.Format(time.RFC3339), to.Format(time.RFC3339), maxWindow/(24*time.Hour))
	}
	ids, err := rotationIDs(r.URL.Query()["rotations"])
	if err != nil {
		return nil, err
	}
	return v.BoardWindow(ids, from, to), nil
}

// rotationIDs reads the rotations parameter of /api/board/legs. A
// rotation id may contain commas, so the parameter is repeated, one id
// per value, empty values ignored: rotations=R1&rotations=A,B names R1
// and "A,B", and rotations=A,B&rotations= names "A,B" alone. Given once,
// it is the older form, a comma-separated list: rotations=R1,R2 names R1
// and R2 (and cannot name an id with a comma).
func rotationIDs(values []string) ([]string, error) {
	var ids []string
	switch len(values) {
	case 0:
	case 1:
		if values[0] != "" {
			if n := strings.Count(values[0], ",") + 1; n > maxWindowLanes {
				return nil, httpkit.BadRequest("rotations: %d given, at most %d", n, maxWindowLanes)
			}
			ids = strings.Split(values[0], ",")
		}
	default:
		for _, id := range values {
			if id != "" {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return nil, httpkit.BadRequest("rotations is required: the parameter repeated, one rotation id each (rotations=R1&rotations=R2), or given once, a comma-separated list")
	}
	if len(ids) > maxWindowLanes {
		return nil, httpkit.BadRequest("rotations: %d given, at most %d", len(ids), maxWindowLanes)
	}
	return dedup(ids), nil
}

func boardMeta(_ *http.Request, v *flights.Validation) (any, error) { return v.BoardMeta(), nil }

// timeRange reads from and to (RFC 3339 or a date); to must be after from.
func timeRange(r *http.Request, required bool) (from, to time.Time, err error) {
	q := r.URL.Query()
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"from", &from}, {"to", &to}} {
		s := q.Get(p.name)
		if s == "" {
			if required {
				return from, to, httpkit.BadRequest("%s is required (RFC 3339 or YYYY-MM-DD)", p.name)
			}
			continue
		}
		t, err := parseTime(s)
		if err != nil {
			return from, to, httpkit.BadRequest("%s %q: want RFC 3339 or YYYY-MM-DD", p.name, s)
		}
		*p.dst = t.UTC()
	}
	if !from.IsZero() && !to.IsZero() && !to.After(from) {
		return from, to, httpkit.BadRequest("to %s is not after from %s", to.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	return from, to, nil
}

// session answers who the bearer token is: the UI shows a viewer no
// editing controls. (Require has already refused unknown tokens.)
func (s *API) session(tokens *auth.Tokens) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		tok, _ := auth.FromRequest(r)
		role, ok := tokens.Lookup(tok)
		if !ok {
			return &httpkit.Error{Status: http.StatusUnauthorized, Detail: "unknown bearer token"}
		}
		w.Header().Set("Cache-Control", "no-store")
		return httpkit.WriteJSON(w, http.StatusOK, struct {
			Role     auth.Role `json:"role"`
			CanWrite bool      `json:"can_write"`
			Replica  bool      `json:"replica"`
		}{role, role.Has(Planner) && s.Rotations != nil, s.Rotations == nil})
	}
}

// dedup drops repeated ids, keeping the first of each: a rotation named
// twice is one lane.
func dedup(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := ids[:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
