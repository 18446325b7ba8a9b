package nemesis

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pgstore"
	"github.com/logbook/logbook/services/flights"
)

// Flights is the flights workload: clients each build their own
// rotations through nginx — create one, add legs to it — every command
// with an Idempotency-Key, sent again with the same key when its outcome
// is unknown (a timeout, a 5xx, a broken connection) until it is
// answered or OpTimeout passes; after every third acknowledged leg, a
// read of a replica's view with min_position set to the write's log
// position (read-your-writes), whose answer must be at that position or
// past it.
type Flights struct {
	Clients int
	// OpTimeout bounds one command's retries (default 30 s): past it, the
	// command's outcome stays unknown.
	OpTimeout time.Duration
}

func (w *Flights) Name() string { return "flights" }

func (w *Flights) Run(ctx context.Context, env *Env, rec *Recorder) error {
	if w.OpTimeout <= 0 {
		w.OpTimeout = 30 * time.Second
	}
	var wg sync.WaitGroup
	errs := make(chan error, w.Clients)
	for c := range w.Clients {
		wg.Go(func() {
			if err := w.client(ctx, env, rec, c); err != nil && ctx.Err() == nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

var legBase = time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)

func (w *Flights) client(ctx context.Context, env *Env, rec *Recorder, c int) error {
	for r := 0; ctx.Err() == nil; r++ {
		rot := fmt.Sprintf("n%d-%d", c, r)
		op := rec.Invoke(&Op{Workload: "flights", Client: c, Kind: "create", Write: true, Key: "create-" + rot, Value: rot})
		w.command(ctx, env, rec, op, "/api/rotations", map[string]string{"id": rot})
		if op.Outcome != OK {
			continue // a rotation not known to exist: start another
		}
		for k := range 12 {
			if ctx.Err() != nil {
				return nil
			}
			dep := legBase.Add(time.Duration(r*12+k) * 3 * time.Hour)
			from, to := "AMS", "LHR"
			if k%2 == 1 {
				from, to = to, from
			}
			leg := flights.Leg{ID: fmt.Sprintf("l%d", k), Airline: "NM", Number: 1 + (c*5000+r*12+k)%9999, Origin: from, Destination: to,
				DayOfOrigin: dep.Format(time.DateOnly), Departure: dep, Arrival: dep.Add(2 * time.Hour)}
			op := rec.Invoke(&Op{Workload: "flights", Client: c, Kind: "add-leg", Write: true, Key: "leg-" + rot + "-" + leg.ID, Value: rot + "/" + leg.ID})
			w.command(ctx, env, rec, op, "/api/rotations/"+rot+"/legs", leg)
			if op.Outcome == OK && k%3 == 2 {
				w.read(ctx, env, rec, c, op.Result)
			}
		}
	}
	return nil
}

// command sends op until it is answered, with its Idempotency-Key.
func (w *Flights) command(ctx context.Context, env *Env, rec *Recorder, op *Op, path string, body any) {
	payload, _ := json.Marshal(body)
	deadline := time.Now().Add(w.OpTimeout)
	last := ""
	for {
		if ctx.Err() != nil || time.Now().After(deadline) {
			rec.Complete(op, Unknown, "gave up: "+last)
			return
		}
		if op.Attempts > 0 {
			sleepCtx(ctx, 150*time.Millisecond)
		}
		op.Attempts++
		req, _ := http.NewRequestWithContext(ctx, "POST", env.Cluster.URL+path, bytes.NewReader(payload))
		req.Header.Set("Authorization", "Bearer "+env.Token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", op.Key)
		res, err := env.Client.Do(req)
		if err != nil {
			last = err.Error()
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		res.Body.Close()
		switch {
		case res.StatusCode == http.StatusOK || res.StatusCode == http.StatusCreated:
			rec.Complete(op, OK, res.Header.Get("X-Logbook-Position"))
			return
		case res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests:
			last = res.Status
		default:
			rec.Complete(op, Fail, res.Status+": "+strings.TrimSpace(string(b)))
			return
		}
	}
}

// read asks a replica for its view at the write's position or later.
func (w *Flights) read(ctx context.Context, env *Env, rec *Recorder, c int, position string) {
	op := rec.Invoke(&Op{Workload: "flights", Client: c, Kind: "read", Key: "min_position=" + position})
	req, _ := http.NewRequestWithContext(ctx, "GET", env.Cluster.URL+"/api/validation/digest?min_position="+position, nil)
	req.Header.Set("Authorization", "Bearer "+env.Token)
	res, err := env.Client.Do(req)
	if err != nil {
		rec.Complete(op, Unknown, err.Error())
		return
	}
	defer res.Body.Close()
	var d struct {
		Position uint64 `json:"position"`
	}
	if res.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(res.Body, 4096)).Decode(&d) != nil {
		rec.Complete(op, Fail, res.Status)
		return
	}
	rec.Complete(op, OK, strconv.FormatUint(d.Position, 10))
}

// Check: every acknowledged command took effect exactly once in the
// store, and the write nodes' API answers every acknowledged leg; a
// command answered with a definite failure took no effect; no command
// of unknown outcome took effect twice; every read-your-writes read was
// at its write's position or later.
func (w *Flights) Check(ctx context.Context, env *Env, rec *Recorder, sum *Summary) []Violation {
	var out []Violation
	log, err := readLog(ctx, env.Store.URL)
	if err != nil {
		return []Violation{{"flights", "read the store: " + err.Error()}}
	}
	created := map[string]int{}
	legs := map[string]int{}
	keys := map[string]int{}
	for _, ev := range log {
		rot := strings.TrimPrefix(ev.Stream, flights.RotationPrefix)
		if k := ev.Meta["idempotency-key"]; k != "" {
			keys[ev.Stream+" "+k]++
		}
		switch ev.Type {
		case "RotationCreated":
			created[rot]++
		case "LegsAdded":
			var added flights.LegsAdded
			if err := json.Unmarshal(ev.Data, &added); err != nil {
				out = append(out, Violation{"flights", fmt.Sprintf("position %d: %v", ev.Position, err)})
				continue
			}
			for _, l := range added.Legs {
				legs[rot+"/"+l.ID]++
			}
		}
	}
	effects := func(op *Op) int {
		if op.Kind == "create" {
			return created[op.Value]
		}
		return legs[op.Value]
	}
	lost := map[string]bool{}
	ackedLegs := map[string][]string{} // rotation -> acknowledged legs
	for _, op := range rec.Ops() {
		if !op.Write || op.Workload != "flights" {
			if op.Kind == "read" && op.Outcome == OK {
				want, _ := strconv.ParseUint(strings.TrimPrefix(op.Key, "min_position="), 10, 64)
				got, _ := strconv.ParseUint(op.Result, 10, 64)
				if got < want {
					out = append(out, Violation{"read-your-writes", fmt.Sprintf("a read with %s answered the view at %d", op.Key, got)})
				}
			}
			continue
		}
		n := effects(op)
		switch op.Outcome {
		case OK:
			sum.Acknowledged++
			if n == 0 {
				lost[op.Value] = true
				if len(lost) <= 5 {
					out = append(out, Violation{"lost-acknowledged", fmt.Sprintf("%s %s acknowledged at position %s, not in the store", op.Kind, op.Value, op.Result)})
				}
			}
			if op.Kind == "add-leg" {
				rot, leg, _ := strings.Cut(op.Value, "/")
				ackedLegs[rot] = append(ackedLegs[rot], leg)
			}
		case Fail:
			if n > 0 {
				out = append(out, Violation{"failed-but-applied", fmt.Sprintf("%s %s answered %s but is in the store", op.Kind, op.Value, op.Result)})
			}
		}
		if n > 1 {
			sum.DuplicateEffects++
			out = append(out, Violation{"duplicate-effect", fmt.Sprintf("%s %s (key %s) took effect %d times", op.Kind, op.Value, op.Key, n)})
		}
	}
	for k, n := range keys {
		if n > 1 {
			sum.DuplicateEffects++
			out = append(out, Violation{"duplicate-effect", fmt.Sprintf("idempotency key %s on %d events", k, n)})
		}
	}
	// Through the API: each rotation with acknowledged legs, read from
	// the write nodes, holds them.
	for rot, want := range ackedLegs {
		got, err := rotationLegs(ctx, env, rot)
		if err != nil {
			out = append(out, Violation{"api", fmt.Sprintf("rotation %s: %v", rot, err)})
			continue
		}
		for _, l := range want {
			if !got[l] {
				if !lost[rot+"/"+l] {
					lost[rot+"/"+l] = true
					out = append(out, Violation{"lost-acknowledged", fmt.Sprintf("leg %s/%s acknowledged, not answered by GET /api/rotations/%s", rot, l, rot)})
				}
			}
		}
	}
	sum.LostAcknowledged += len(lost)
	return out
}

// rotationLegs reads a rotation's legs through nginx, retrying briefly.
func rotationLegs(ctx context.Context, env *Env, rot string) (map[string]bool, error) {
	var last error
	for range 20 {
		req, _ := http.NewRequestWithContext(ctx, "GET", env.Cluster.URL+"/api/rotations/"+rot, nil)
		req.Header.Set("Authorization", "Bearer "+env.Token)
		res, err := env.Client.Do(req)
		if err == nil {
			var r flights.Rotation
			err = json.NewDecoder(res.Body).Decode(&r)
			res.Body.Close()
			if res.StatusCode == http.StatusOK && err == nil {
				got := map[string]bool{}
				for _, l := range r.Legs {
					got[l.ID] = true
				}
				return got, nil
			}
			if err == nil {
				err = fmt.Errorf("%s", res.Status)
			}
		}
		last = err
		sleepCtx(ctx, 500*time.Millisecond)
	}
	return nil, last
}

// readLog reads the whole log from the store.
func readLog(ctx context.Context, url string) ([]eventstore.Event, error) {
	s, err := pgstore.Open(ctx, url, pgstore.Options{MaxConns: 2})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var out []eventstore.Event
	for from := uint64(1); ; {
		evs, err := s.ReadAll(ctx, from, 4096)
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			return out, nil
		}
		out = append(out, evs...)
		from = evs[len(evs)-1].Position + 1
	}
}
