package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/logbook/logbook/engine/httpkit"
	"github.com/logbook/logbook/services/flights"

	"github.com/logbook/logbook/engine/eventstore"
)

// Live changes for the board: GET /api/live is a server-sent-events
// stream of what changed in the schedule — which rotations, airplanes and
// airports — not the events themselves. A client re-reads what it shows
// with min_position set to the change's position, so it sees the change
// through the view it queries. An import commits hundreds of events a
// second; coalescing them into one message per liveCoalesce keeps a
// board from re-fetching for each.

// Change is one message of /api/live.
type Change struct {
	Position  uint64   `json:"position"`
	Rotations []string `json:"rotations"` // changed rotations (legs, or created or removed)
	Airplanes []string `json:"airplanes"` // changed airplanes (and so, perhaps, lane labels)
	Airports  []string `json:"airports"`  // airports whose minimal ground time changed
	// Lanes is true when the set of lanes or their labels may have
	// changed: a rotation created or removed, an airplane assigned.
	Lanes bool `json:"lanes"`
	// All is true when more changed than the lists hold: re-read it all.
	All bool `json:"all"`
}

const (
	liveCoalesce  = 150 * time.Millisecond
	liveHeartbeat = 15 * time.Second
	liveMaxNames  = 500
)

// change gathers events into one Change.
type change struct {
	Change
	rot, plane, port map[string]bool
}

func (c *change) add(ev *eventstore.Event) {
	if c.rot == nil {
		c.rot, c.plane, c.port = map[string]bool{}, map[string]bool{}, map[string]bool{}
	}
	c.Position = ev.Position
	switch {
	case strings.HasPrefix(ev.Stream, flights.RotationPrefix):
		c.rot[ev.Stream[len(flights.RotationPrefix):]] = true
		if ev.Type == "RotationCreated" || ev.Type == "RotationRemoved" {
			c.Lanes = true
		}
	case strings.HasPrefix(ev.Stream, flights.AirplanePrefix):
		c.plane[ev.Stream[len(flights.AirplanePrefix):]] = true
		c.Lanes = true
	case strings.HasPrefix(ev.Stream, flights.AirportPrefix):
		c.port[ev.Stream[len(flights.AirportPrefix):]] = true
	}
}

// merge adds a change already taken (the hub's) to this one (a client's).
// Past liveMaxNames names it stops listing them: the client re-reads all.
func (c *change) merge(o Change) {
	if c.rot == nil {
		c.rot, c.plane, c.port = map[string]bool{}, map[string]bool{}, map[string]bool{}
	}
	c.Position = max(c.Position, o.Position)
	c.Lanes = c.Lanes || o.Lanes
	c.All = c.All || o.All
	if c.All {
		clear(c.rot)
		clear(c.plane)
		clear(c.port)
		return
	}
	for _, n := range o.Rotations {
		c.rot[n] = true
	}
	for _, n := range o.Airplanes {
		c.plane[n] = true
	}
	for _, n := range o.Airports {
		c.port[n] = true
	}
	if len(c.rot)+len(c.plane)+len(c.port) > liveMaxNames {
		c.All, c.Lanes = true, true
		clear(c.rot)
		clear(c.plane)
		clear(c.port)
	}
}

func (c *change) empty() bool { return c.Position == 0 }

// take returns the gathered change and starts a new one.
func (c *change) take() Change {
	names := func(m map[string]bool) []string {
		out := make([]string, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	out := c.Change
	out.Rotations, out.Airplanes, out.Airports = names(c.rot), names(c.plane), names(c.port)
	if out.All || len(out.Rotations)+len(out.Airplanes)+len(out.Airports) > liveMaxNames {
		out.Rotations, out.Airplanes, out.Airports, out.All, out.Lanes = []string{}, []string{}, []string{}, true, true
	}
	*c = change{}
	return out
}

// maxLiveClients bounds the live streams one node serves at once.
const maxLiveClients = 1000

// hub is the one subscription to the store behind every /api/live client
// of a node: it gathers the changes once and hands each client a copy, so
// that N clients cost one reader of the log (on a replica, one stream
// from the primary or Kafka) instead of N. It runs while it has clients.
type hub struct {
	mu      sync.Mutex
	max     int // clients at most (0: maxLiveClients)
	clients map[*liveClient]struct{}
	seen    uint64             // the position the hub has gathered changes up to
	stop    context.CancelFunc // ends the running subscription
}

// liveClient is one stream's changes not yet sent: the hub merges into
// it, so a slow client gets fewer, larger changes and never holds up the
// hub or the others.
type liveClient struct {
	mu      sync.Mutex
	pending change
	ready   chan struct{} // has a token when pending is not empty
}

func (c *liveClient) offer(ch Change) {
	c.mu.Lock()
	c.pending.merge(ch)
	c.mu.Unlock()
	select {
	case c.ready <- struct{}{}:
	default:
	}
}

func (c *liveClient) take() Change {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending.take()
}

// join registers a client and returns the position its stream starts
// after (its hello); it starts the subscription for the first client.
func (h *hub) join(s *API) (*liveClient, uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	max := h.max
	if max == 0 {
		max = maxLiveClients
	}
	if len(h.clients) >= max {
		return nil, 0, &httpkit.Error{Status: http.StatusServiceUnavailable, Type: httpkit.TypeUnavailable, Detail: fmt.Sprintf("this node serves %d live streams, its most: try another node or later", max)}
	}
	if h.stop == nil {
		ctx := context.Background()
		if s.life != nil {
			ctx = s.life
		}
		head, err := s.Store.Head(ctx)
		if err != nil {
			return nil, 0, err
		}
		ctx, cancel := context.WithCancel(ctx)
		sub, err := s.Store.Subscribe(ctx, eventstore.All(), head+1)
		if err != nil {
			cancel()
			return nil, 0, err
		}
		h.seen, h.stop = head, cancel
		go h.run(ctx, sub)
	}
	if h.clients == nil {
		h.clients = map[*liveClient]struct{}{}
	}
	c := &liveClient{ready: make(chan struct{}, 1)}
	h.clients[c] = struct{}{}
	return c, h.seen, nil
}

// leave unregisters a client, and stops the subscription after the last.
func (h *hub) leave(c *liveClient) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, c)
	if len(h.clients) == 0 && h.stop != nil {
		h.stop()
		h.stop = nil
	}
}

// run reads the subscription, gathers events into one change per
// liveCoalesce, and offers it to every client.
func (h *hub) run(ctx context.Context, sub eventstore.Subscription) {
	defer sub.Close()
	batches := make(chan []eventstore.Event)
	go func() {
		defer close(batches)
		for {
			evs, err := sub.Next(ctx)
			if err != nil {
				return
			}
			select {
			case batches <- evs:
			case <-ctx.Done():
				return
			}
		}
	}()
	var pending change
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	for {
		select {
		case evs, ok := <-batches:
			if !ok {
				h.end(ctx)
				return
			}
			if pending.empty() {
				flush.Reset(liveCoalesce)
			}
			for i := range evs {
				pending.add(&evs[i])
			}
		case <-flush.C:
			c := pending.take()
			h.mu.Lock()
			h.seen = c.Position
			for cl := range h.clients {
				cl.offer(c)
			}
			h.mu.Unlock()
		case <-ctx.Done():
			return
		}
	}
}

// end forgets a subscription that ended by itself (the store closing), so
// that the next client starts a new one; the clients' streams end.
func (h *hub) end(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ctx.Err() == nil && h.stop != nil {
		h.stop()
		h.stop = nil
		for cl := range h.clients {
			close(cl.ready)
			delete(h.clients, cl)
		}
	}
}

// live streams changes from the log's head on. The first message, a
// "hello" event, carries the head: a client (re)connecting re-reads what
// it shows at that position, then applies changes.
func (s *API) live(w http.ResponseWriter, r *http.Request) error {
	flusher, ok := w.(http.Flusher)
	if !ok {
		return fmt.Errorf("live: the response writer cannot flush")
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if s.life != nil {
		stop := context.AfterFunc(s.life, cancel)
		defer stop()
	}
	client, head, err := s.hub.join(s)
	if err != nil {
		return err
	}
	defer s.hub.leave(client)

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event string, id uint64, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "event: %s\nid: %d\ndata: %s\n\n", event, id, b); err != nil {
			return err
		}
		flusher.Flush()
		return nil
	}
	if err := send("hello", head, struct {
		Position uint64 `json:"position"`
	}{head}); err != nil {
		return nil
	}
	beat := time.NewTicker(liveHeartbeat)
	defer beat.Stop()
	for {
		select {
		case _, ok := <-client.ready:
			if !ok {
				return nil // the subscription ended: the store is closing
			}
			c := client.take()
			if c.Position == 0 {
				continue
			}
			if err := send("change", c.Position, c); err != nil {
				return nil // the client went away
			}
		case <-beat.C:
			// A comment line: keeps intermediaries from closing an idle
			// stream, and finds out when the client has gone.
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil {
				return nil
			}
			flusher.Flush()
		case <-ctx.Done():
			return nil
		}
	}
}
