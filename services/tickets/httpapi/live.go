package httpapi

import (
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/engine/ndjson"
)

// Live throughput: GET /api/tickets/live streams, once per interval, the
// requests each sport had served and each store node completed per
// second over the interval just ended — the paper's figures of
// throughput per sport and per node, as a load test runs. The web UI's
// chart draws it; `curl -N` reads it as NDJSON.
//
// A stream reads the service's counters (atomic loads) once per
// interval and writes a line: its cost is that of its client, and the
// number of streams is bounded (maxLiveStreams, then 503).

// maxLiveStreams bounds the live streams one server serves at once.
const maxLiveStreams = 100

// The interval between samples, in milliseconds: the default and bounds.
const (
	liveInterval    = 1000
	liveIntervalMin = 100
	liveIntervalMax = 60_000
)

// liveLimit counts the live streams being served.
type liveLimit struct {
	mu  sync.Mutex
	n   int
	max int // 0: maxLiveStreams
}

func (l *liveLimit) acquire() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	max := l.max
	if max == 0 {
		max = maxLiveStreams
	}
	if l.n >= max {
		return false
	}
	l.n++
	return true
}

func (l *liveLimit) release() {
	l.mu.Lock()
	l.n--
	l.mu.Unlock()
}

// LiveHello is a live stream's first message: what the samples name.
type LiveHello struct {
	Arch       string              `json:"arch"`
	NodeRate   float64             `json:"node_rate"`
	IntervalMS int                 `json:"interval_ms"`
	Sports     []string            `json:"sports"`
	Nodes      []string            `json:"nodes"`
	Placement  map[string][]string `json:"placement"`
}

// LiveSample is one interval's throughput, in requests per second. Sports
// and nodes that served nothing in the interval are left out, so that a
// sample of a catalogue of thousands of sports is as long as the sports
// in demand.
type LiveSample struct {
	At      time.Time          `json:"at"`      // the interval's end
	Seconds float64            `json:"seconds"` // the interval's length
	Sports  map[string]float64 `json:"sports"`
	Nodes   map[string]float64 `json:"nodes"`
	Control float64            `json:"control"`
}

// liveStats streams LiveHello, then a LiveSample per interval, as NDJSON
// ({"hello": …}, {"sample": …}) or, with Accept: text/event-stream or
// format=sse, as server-sent events named hello and sample.
func (a *API) liveStats(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	interval := liveInterval
	if s := q.Get("interval"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < liveIntervalMin || n > liveIntervalMax {
			return httpkit.BadRequest("interval %q: want milliseconds, %d–%d", s, liveIntervalMin, liveIntervalMax)
		}
		interval = n
	}
	sse, err := wantsSSE(r)
	if err != nil {
		return err
	}
	if !a.live.acquire() {
		w.Header().Set("Retry-After", "5")
		return &httpkit.Error{Status: http.StatusServiceUnavailable, Type: httpkit.TypeUnavailable, Detail: "this server serves as many live streams as it may: try later"}
	}
	defer a.live.release()
	ctx := r.Context()
	if a.life != nil {
		select {
		case <-a.life.Done():
			return &httpkit.Error{Status: http.StatusServiceUnavailable, Type: httpkit.TypeUnavailable, Detail: "the server is shutting down"}
		default:
		}
	}

	st := a.Stats()
	nodes := a.GateInfo().Nodes
	hello := LiveHello{Arch: st.Arch, NodeRate: st.NodeRate, IntervalMS: interval, Sports: a.Catalogue.Sports, Nodes: make([]string, len(nodes)), Placement: st.Placement}
	for i, n := range nodes {
		hello.Nodes[i] = n.Name
	}
	prevSports, curSports := make([]uint64, len(hello.Sports)), make([]uint64, len(hello.Sports))
	prevNodes, curNodes := make([]uint64, len(nodes)), make([]uint64, len(nodes))
	prevControl := a.Counters(prevSports, prevNodes)
	prevAt := time.Now()

	out := ndjson.Start(w, sse)
	out.Event("hello", hello)
	out.Flush()
	tick := time.NewTicker(time.Duration(interval) * time.Millisecond)
	defer tick.Stop()
	var life <-chan struct{}
	if a.life != nil {
		life = a.life.Done()
	}
	for out.Err() == nil {
		select {
		case <-ctx.Done():
			return nil
		case <-life:
			return nil
		case now := <-tick.C:
			control := a.Counters(curSports, curNodes)
			secs := now.Sub(prevAt).Seconds()
			s := LiveSample{At: now.UTC(), Seconds: round(secs, 3), Sports: rates(hello.Sports, prevSports, curSports, secs), Nodes: rates(hello.Nodes, prevNodes, curNodes, secs), Control: round(float64(control-prevControl)/secs, 2)}
			out.Event("sample", s)
			out.Flush()
			prevSports, curSports = curSports, prevSports
			prevNodes, curNodes = curNodes, prevNodes
			prevControl, prevAt = control, now
		}
	}
	return nil // the client went away
}

// rates are the counters' increases per second, of those that increased.
func rates(names []string, prev, cur []uint64, secs float64) map[string]float64 {
	m := map[string]float64{}
	for i, name := range names {
		if d := cur[i] - prev[i]; d > 0 {
			m[name] = round(float64(d)/secs, 2)
		}
	}
	return m
}

func round(x float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(x*p) / p
}

// wantsSSE decides between NDJSON and server-sent events as the
// stream queries do: format=ndjson|sse, else the Accept header.
func wantsSSE(r *http.Request) (bool, error) {
	switch f := r.URL.Query().Get("format"); f {
	case "ndjson":
		return false, nil
	case "sse":
		return true, nil
	case "":
	default:
		return false, httpkit.BadRequest("format %q: want ndjson or sse", f)
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
			return true, nil
		}
	}
	return false, nil
}

// Session is who the bearer token is, and the catalogue: what the web UI
// needs to draw its search form and to offer booking only to bookers.
type Session struct {
	Role    auth.Role `json:"role"`
	CanBook bool      `json:"can_book"`
	Arch    string    `json:"arch"`
	Sports  []string  `json:"sports"`
	// PerSport tickets of each sport, numbered from 0; Days of the event.
	PerSport int `json:"tickets_per_sport"`
	Days     int `json:"days"`
}

func (a *API) session(w http.ResponseWriter, r *http.Request) error {
	tok, _ := auth.FromRequest(r)
	role, ok := a.tokens.Lookup(tok)
	if !ok { // RequireRole has refused unknown tokens already
		return &httpkit.Error{Status: http.StatusUnauthorized, Detail: "unknown bearer token"}
	}
	w.Header().Set("Cache-Control", "no-store")
	c := a.Catalogue
	return httpkit.WriteJSON(w, http.StatusOK, Session{Role: role, CanBook: role.Has(Booker), Arch: a.GateInfo().Name, Sports: c.Sports, PerSport: c.PerSport, Days: c.Days})
}
