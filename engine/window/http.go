package window

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/logbook/logbook/engine/ndjson"
	"github.com/logbook/logbook/engine/problem"
)

// HandlerOptions configure NewHandler.
type HandlerOptions struct {
	// Heartbeat is how long a live query may stay silent before the
	// handler writes a keep-alive (an empty NDJSON line, an SSE comment).
	// Default 15 s; negative disables it.
	Heartbeat time.Duration
}

// NewHandler serves the aggregations' pull and push queries under
// /api/windows/ (mount it with mux.Handle("/api/windows/", h), behind the
// viewer-token check):
//
//	GET /api/windows/{name}?from=&to=&unit=minute|hour|day&group_by=d1,d2&{dim}={value}…&final=true&limit=N
//	GET /api/windows/{name}?…&live=true
//
// from and to are RFC 3339 times (windows starting in [from, to)), in
// the years 1678 to 2262; any dimension of the aggregation, given as a
// parameter, filters on its value. Each row says whether it is closed
// and whether it holds only late events (late_only); the answer counts
// the events set aside as too far ahead of the clock (set_aside). A pull
// query answers with one JSON object (Result), or with one
// row per line as NDJSON given format=ndjson or "Accept:
// application/x-ndjson". A push query (live=true) answers with the
// current rows, then each row again whenever it changes, as NDJSON or
// (format=sse or "Accept: text/event-stream") server-sent events, each
// event's id the log position its answer reflects. Bad parameters are 400
// problem+json, an unknown aggregation 404, an answer beyond the row or
// scan bounds 422, a live query beyond Options.MaxLive 503.
func NewHandler(aggs []*Aggregation, opts HandlerOptions) http.Handler {
	if opts.Heartbeat == 0 {
		opts.Heartbeat = 15 * time.Second
	}
	h := &handler{aggs: map[string]*Aggregation{}, opts: opts}
	for _, a := range aggs {
		h.aggs[a.Name()] = a
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/windows/{name}", h.query)
	mux.HandleFunc("/api/windows/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && strings.Count(r.URL.Path, "/") == 3 {
			w.Header().Set("Allow", "GET, HEAD")
			problem.Error(w, http.StatusMethodNotAllowed, "windows are read with GET")
			return
		}
		problem.Error(w, http.StatusNotFound, "no such path; see GET /api/windows/{name}")
	})
	return mux
}

type handler struct {
	aggs map[string]*Aggregation
	opts HandlerOptions
}

func badParam(w http.ResponseWriter, name, detail string) {
	p := problem.New(http.StatusBadRequest, detail)
	p.Extra = map[string]any{"parameter": name}
	problem.Write(w, p)
}

var units = map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}

// parse reads a request's parameters into a query.
func parse(w http.ResponseWriter, r *http.Request, a *Aggregation) (q Query, live bool, format string, ok bool) {
	v := r.URL.Query()
	dims := map[string]bool{}
	for _, d := range a.def.Dims {
		dims[d] = true
	}
	for k, vals := range v {
		if !reserved[k] && !dims[k] {
			badParam(w, k, fmt.Sprintf("unknown parameter %q: not a query parameter nor a dimension of %s (%s)", k, a.Name(), strings.Join(a.def.Dims, ", ")))
			return
		}
		if len(vals) > 1 {
			badParam(w, k, fmt.Sprintf("%s given %d times", k, len(vals)))
			return
		}
		if dims[k] {
			if q.Filter == nil {
				q.Filter = map[string]string{}
			}
			q.Filter[k] = vals[0]
		}
	}
	for _, name := range []string{"from", "to"} {
		s := v.Get(name)
		if s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			badParam(w, name, fmt.Sprintf("%s must be an RFC 3339 time, got %q", name, s))
			return
		}
		if name == "from" {
			q.From = t
		} else {
			q.To = t
		}
	}
	if s := v.Get("unit"); s != "" {
		u, known := units[s]
		if !known {
			badParam(w, "unit", fmt.Sprintf("unit must be minute, hour or day, got %q", s))
			return
		}
		q.Unit = u
	}
	if s := v.Get("group_by"); s != "" {
		q.GroupBy = strings.Split(s, ",")
	}
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"final", &q.Final}, {"live", &live}} {
		if s := v.Get(b.name); s != "" {
			x, err := strconv.ParseBool(s)
			if err != nil {
				badParam(w, b.name, fmt.Sprintf("%s must be true or false, got %q", b.name, s))
				return
			}
			*b.dst = x
		}
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			badParam(w, "limit", fmt.Sprintf("limit must be a positive integer, got %q", s))
			return
		}
		q.Limit = n
	}
	switch format = v.Get("format"); format {
	case "json", "ndjson", "sse":
	case "":
		format = "json"
		if live {
			format = "ndjson"
		}
		for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			if mt == "text/event-stream" {
				format = "sse"
			} else if mt == "application/x-ndjson" {
				format = "ndjson"
			}
		}
	default:
		badParam(w, "format", fmt.Sprintf("format must be json, ndjson or sse, got %q", format))
		return
	}
	if live && format == "json" {
		badParam(w, "format", "a live query streams: use format=ndjson or sse")
		return
	}
	if format == "sse" && !live {
		badParam(w, "format", "server-sent events are for live queries; use json or ndjson")
		return
	}
	return q, live, format, true
}

func writeErr(w http.ResponseWriter, err error) {
	var qe *QueryError
	switch {
	case errors.As(err, &qe):
		badParam(w, qe.Param, qe.Error())
	case errors.Is(err, ErrTooLarge):
		problem.Error(w, http.StatusUnprocessableEntity, err.Error())
	case errors.Is(err, ErrTooManyLive):
		w.Header().Set("Retry-After", "5")
		problem.Error(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, ErrClosed):
		problem.Error(w, http.StatusServiceUnavailable, err.Error())
	default:
		problem.Error(w, http.StatusInternalServerError, err.Error())
	}
}

func (h *handler) query(w http.ResponseWriter, r *http.Request) {
	a := h.aggs[r.PathValue("name")]
	if a == nil {
		problem.Error(w, http.StatusNotFound, fmt.Sprintf("no windowed aggregation %q", r.PathValue("name")))
		return
	}
	q, live, format, ok := parse(w, r, a)
	if !ok {
		return
	}
	if !live {
		res, err := a.Query(r.Context(), q)
		if err != nil {
			writeErr(w, err)
			return
		}
		if format == "json" {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			if r.Method == http.MethodHead {
				return
			}
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(struct {
				Aggregation string `json:"aggregation"`
				Result
			}{a.Name(), res})
			return
		}
		s := ndjson.Start(w, false)
		if r.Method == http.MethodHead {
			return
		}
		for i := range res.Rows {
			s.Item("", &res.Rows[i])
		}
		s.Flush()
		return
	}
	if r.Method == http.MethodHead {
		ndjson.Start(w, format == "sse")
		return
	}
	var s *liveStream
	var mu sync.Mutex // the heartbeat and the answers share the writer
	done := make(chan struct{})
	defer close(done)
	err := a.Live(r.Context(), q, func(res Result) error {
		mu.Lock()
		defer mu.Unlock()
		if s == nil {
			s = &liveStream{Writer: ndjson.Start(w, format == "sse")}
			if h.opts.Heartbeat > 0 {
				go heartbeat(s, &mu, h.opts.Heartbeat, done)
			}
		}
		id := strconv.FormatUint(res.Position, 10)
		for i := range res.Rows {
			s.Item(id, &res.Rows[i])
		}
		s.Flush()
		return s.Err()
	})
	mu.Lock()
	defer mu.Unlock()
	if s != nil {
		s.ended = true // the heartbeat must not write once we return
	}
	if s == nil {
		if err != nil && r.Context().Err() == nil {
			writeErr(w, err)
		}
		return
	}
	if err != nil && r.Context().Err() == nil && s.Err() == nil {
		// Headers are gone: the failure is the stream's last item.
		errorItem(s.Writer, err.Error())
		s.Flush()
	}
}

func heartbeat(s *liveStream, mu *sync.Mutex, every time.Duration, done <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			mu.Lock()
			if s.ended {
				mu.Unlock()
				return
			}
			s.Heartbeat()
			s.Flush()
			mu.Unlock()
		}
	}
}

// liveStream is a push query's writer and whether the handler has
// returned (set under the handler's lock: the heartbeat must not write
// after it).
type liveStream struct {
	*ndjson.Writer
	ended bool
}

// errorItem ends a stream whose headers are gone with the failure:
// {"error": msg} as the last NDJSON line, or an SSE "error" event.
func errorItem(s *ndjson.Writer, msg string) {
	e := map[string]string{"error": msg}
	if s.SSE() {
		s.Event("error", e)
	} else {
		s.Item("", e)
	}
}
