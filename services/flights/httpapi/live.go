package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

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
	if len(out.Rotations)+len(out.Airplanes)+len(out.Airports) > liveMaxNames {
		out.Rotations, out.Airplanes, out.Airports, out.All, out.Lanes = []string{}, []string{}, []string{}, true, true
	}
	*c = change{}
	return out
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
	head, err := s.Store.Head(ctx)
	if err != nil {
		return err
	}
	sub, err := s.Store.Subscribe(ctx, eventstore.All(), head+1)
	if err != nil {
		return err
	}
	defer sub.Close()

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
	beat := time.NewTicker(liveHeartbeat)
	defer beat.Stop()
	for {
		select {
		case evs, ok := <-batches:
			if !ok {
				return nil // the subscription ended: the store or the server is closing
			}
			if pending.empty() {
				flush.Reset(liveCoalesce)
			}
			for i := range evs {
				pending.add(&evs[i])
			}
		case <-flush.C:
			c := pending.take()
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
