package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/priority"
	"github.com/logbook/logbook/engine/projection"
	"github.com/logbook/logbook/engine/window"
	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/deliver"
)

// work is one step of the pipeline: a chunk of a request, or a replay.
type work struct {
	req    Requested
	chunk  int
	replay *ReplayRequested
}

func (w work) key() string {
	if w.replay != nil {
		return "replay/" + w.replay.ID
	}
	return w.req.ID + "/" + itoa(w.chunk)
}

// maxStepFailures is how many times in a row a step may fail (the
// users' data unreadable, an append refused) before the pipeline stops:
// a step that keeps failing is a fault to look at, not to hide behind
// retries, and the service then reports it (Err, /healthz).
const maxStepFailures = 5

// schedule runs the pipeline: it hands the chunks of pending requests
// and the pending replays, oldest first, to at most Parallel workers. A
// step's outcome append is its checkpoint; the step is out of flight
// once the state has applied it, so no step runs twice in a process, and
// a step cut short by a crash runs again at the next start.
//
// Once the state stops (projection.ErrStopped) or the service fails,
// nothing more is scheduled: the state no longer shows what is done, and
// picking from it would deliver the same steps again.
func (s *Service) schedule(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inflight := map[string]bool{}
	failures := map[string]int{}
	var mu sync.Mutex
	freed := make(chan struct{}, 1)
	wake := func() {
		select {
		case freed <- struct{}{}:
		default:
		}
	}
	// Nothing is scheduled before the state has caught up with the log:
	// what looks pending before may be done.
	if err := s.state.WaitCaughtUp(ctx); err != nil {
		if ctx.Err() == nil {
			s.fail(err)
		}
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		if s.Err() != nil {
			return
		}
		mu.Lock()
		free := s.cfg.Parallel - len(inflight)
		mu.Unlock()
		var picked []work
		if free > 0 {
			s.view.Read(func(st *state, _ uint64) {
				picked = s.pick(st, inflight, &mu, free)
			})
		}
		for _, w := range picked {
			mu.Lock()
			inflight[w.key()] = true
			mu.Unlock()
			s.flight.Inc()
			wg.Go(func() {
				defer s.flight.Dec()
				// A step is throughput work: its appends let the
				// metrics windows' queries go first (engine/priority).
				err := s.run(priority.Throughput(ctx), w)
				mu.Lock()
				n := 0
				if err != nil {
					failures[w.key()]++
					n = failures[w.key()]
				} else {
					delete(failures, w.key())
				}
				mu.Unlock()
				if err != nil && ctx.Err() == nil {
					switch {
					case errors.Is(err, projection.ErrStopped):
						s.fail(fmt.Errorf("notify pipeline stopped: the state stopped after step %s: %w", w.key(), err))
						cancel()
					case n >= maxStepFailures:
						s.fail(fmt.Errorf("notify pipeline stopped: step %s failed %d times: %w", w.key(), n, err))
						cancel()
					default:
						wait := time.Second << (n - 1)
						s.log.Error("notify pipeline step failed; it runs again", "step", w.key(), "failures", n, "in", wait, "err", err)
						select {
						case <-time.After(wait):
						case <-ctx.Done():
						}
					}
				}
				mu.Lock()
				delete(inflight, w.key())
				mu.Unlock()
				wake()
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-s.failed:
			return
		case <-s.changed:
		case <-freed:
		}
	}
}

// pick chooses up to n steps not in flight: replays first (they are
// small), then chunks of the oldest pending requests. It walks the
// pending lists from their fronts, which are in log order: no sort.
func (s *Service) pick(st *state, inflight map[string]bool, mu *sync.Mutex, n int) []work {
	mu.Lock()
	defer mu.Unlock()
	var out []work
	for _, rp := range st.pendingReplays.items {
		if len(out) == n {
			return out
		}
		w := work{replay: &rp.ReplayRequested}
		if !rp.done && !inflight[w.key()] {
			out = append(out, w)
		}
	}
	for _, rs := range st.pending.items {
		if rs.isDone() {
			continue
		}
		for c, done := range rs.done {
			if len(out) == n {
				return out
			}
			w := work{req: rs.Requested, chunk: c}
			if !done && !inflight[w.key()] {
				out = append(out, w)
			}
		}
	}
	return out
}

// run does one step and waits until the state has its outcome.
func (s *Service) run(ctx context.Context, w work) error {
	var events []eventstore.NewEvent
	var stream string
	var err error
	if w.replay != nil {
		stream = replayOutcomes(w.replay.ID)
		events, err = s.replay(ctx, w.replay)
	} else {
		stream = outcomeStream(w.req.ID)
		events, err = s.chunk(ctx, w.req, w.chunk)
	}
	if err != nil {
		return err
	}
	res, err := s.store.Append(ctx, stream, eventstore.Any, events)
	if err != nil {
		return fmt.Errorf("append the outcome: %w", err)
	}
	if !res.Duplicate {
		for _, ev := range events {
			var o Outcome
			if ev.Type != TypeOutcome || json.Unmarshal(ev.Data, &o) != nil {
				continue
			}
			for i, v := range []int64{o.Requested, o.Refused, o.Built, o.Delivered, o.Failed, o.DeadLettered, o.Retries} {
				s.counted.WithLabelValues(MetricValues[i]).Add(float64(v))
			}
		}
	}
	return s.state.WaitFor(ctx, res.LastPosition)
}

// deadLetters collects the batches that failed for good.
type deadLetters struct {
	mu  sync.Mutex
	out []DeadLetter
}

func (d *deadLetters) add(dl DeadLetter) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.out = append(d.out, dl)
}

// failure turns a delivery error into a dead letter's reason and
// attempts; ok is false for the context's own end (the step is dropped).
func failure(ctx context.Context, err error) (reason string, attempts int, ok bool) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return "", 0, false
	}
	// Any viewer reads dead letters: no URL's user info or query in them.
	if fe, isFailed := errors.AsType[*deliver.FailedError](err); isFailed {
		return deliver.RedactReason(fe.Reason), fe.Attempts, true
	}
	return deliver.RedactReason(err.Error()), 1, true
}

// chunk runs one chunk of a request through the pipeline and returns
// its outcome events.
func (s *Service) chunk(ctx context.Context, r Requested, chunk int) ([]eventstore.NewEvent, error) {
	evs, err := s.store.ReadStream(ctx, requestStream(r.ID), uint64(2+chunk), 1)
	if err != nil {
		return nil, err
	}
	if len(evs) != 1 || evs[0].Type != TypeRecipients {
		return nil, fmt.Errorf("request %s has no chunk %d", r.ID, chunk)
	}
	var rc Recipients
	if err := json.Unmarshal(evs[0].Data, &rc); err != nil {
		return nil, err
	}
	var retries atomic.Int64
	var dls deadLetters
	p := notify.Processor{Policy: s.cfg.Policy, Templates: s.cfg.Templates, Chunk: len(rc.UserIDs) + 1, Senders: s.cfg.Senders,
		OnFailed: func(b []notify.Message, err error) {
			reason, attempts, ok := failure(ctx, err)
			if !ok {
				return
			}
			ids := make([]int64, len(b))
			for i, m := range b {
				ids[i] = m.UserID
			}
			dls.add(DeadLetter{Request: r.ID, Chunk: chunk, Channel: b[0].Channel, UserIDs: ids, Reason: reason, Attempts: attempts})
		}}
	req := &notify.Request{ID: r.ID, Type: r.Type, ClubID: r.ClubID, Sender: r.Sender, Timestamp: r.Timestamp, ToUsers: rc.UserIDs}
	counts, err := p.Process(ctx, req, s.cfg.Users, func(ctx context.Context, b []notify.Message) error {
		n, err := s.cfg.Deliverer.Deliver(ctx, b)
		retries.Add(int64(n))
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o := Outcome{Request: r.ID, Chunk: chunk, Type: r.Type, ClubID: r.ClubID, Sender: r.Sender, Timestamp: r.Timestamp}
	o.Requested = counts.Requested
	for reason, n := range counts.Refused {
		o.refuse(reason, n)
	}
	if chunk == 0 && r.Listed > r.Recipients {
		// Listed twice: counted once, on the first chunk.
		o.Requested += int64(r.Listed - r.Recipients)
		o.refuse(notify.RefusedDuplicate, int64(r.Listed-r.Recipients))
	}
	o.Built, o.Delivered, o.Failed, o.Retries = counts.Built, counts.Delivered, counts.Failed, retries.Load()
	return s.outcomeEvents(o, dls.out, r.ID, "chunk", itoa(chunk))
}

// outcomeEvents numbers the dead letters and makes the outcome's append:
// the outcome, then the dead letters, with ids from what they are.
func (s *Service) outcomeEvents(o Outcome, dls []DeadLetter, idParts ...string) ([]eventstore.NewEvent, error) {
	prefix := o.Request + "/" + itoa(o.Chunk)
	if o.Replay != "" {
		prefix = o.Request + "/replay-" + o.Replay
	}
	for _, d := range dls {
		o.DeadLettered += int64(len(d.UserIDs))
	}
	data, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	events := []eventstore.NewEvent{{ID: eventID(append(idParts, "outcome")...), Type: TypeOutcome, Tags: []string{Tag}, Data: data}}
	for i, d := range dls {
		d.ID = prefix + "/" + itoa(i)
		data, err := json.Marshal(d)
		if err != nil {
			return nil, err
		}
		events = append(events, eventstore.NewEvent{ID: eventID(append(idParts, "dead", itoa(i))...), Type: TypeDeadLettered, Tags: []string{Tag}, Data: data})
	}
	return events, nil
}

// replay delivers a replay's dead letters again: each recipient's
// message on the dead letter's channel, rebuilt from the users' data as
// it is now (a user who has since opted out is refused), with the same
// idempotency key. One outcome per request the letters belong to.
func (s *Service) replay(ctx context.Context, rp *ReplayRequested) ([]eventstore.NewEvent, error) {
	type letter struct {
		dl  DeadLetter
		req Requested
	}
	var letters []letter
	s.view.Read(func(st *state, _ uint64) {
		for _, id := range rp.DeadLetters {
			dl := st.dls[id]
			if dl == nil || dl.replayedBy != "" || dl.claimedBy != rp.ID {
				continue // held by another replay, accepted before this one
			}
			letters = append(letters, letter{dl.DeadLetter, st.reqs[dl.Request].Requested})
		}
	})
	byReq := map[string]*Outcome{}
	dlsByReq := map[string][]DeadLetter{}
	var order []string
	for _, l := range letters {
		o := byReq[l.req.ID]
		if o == nil {
			o = &Outcome{Request: l.req.ID, Chunk: -1, Replay: rp.ID, Type: l.req.Type, ClubID: l.req.ClubID, Sender: l.req.Sender, Timestamp: l.req.Timestamp}
			byReq[l.req.ID] = o
			order = append(order, l.req.ID)
		}
		o.Replayed = append(o.Replayed, l.dl.ID)
		users, err := s.cfg.Users.Users(ctx, l.dl.UserIDs)
		if err != nil {
			return nil, err
		}
		req := &notify.Request{ID: l.req.ID, Type: l.req.Type, ClubID: l.req.ClubID, Sender: l.req.Sender, Timestamp: l.req.Timestamp}
		var batch []notify.Message
		for _, id := range l.dl.UserIDs {
			u := users[id]
			d := s.cfg.Policy.Check(u, l.req.Type)
			if !slices.Contains(d.Channels, l.dl.Channel) {
				reason := d.Refused
				if reason == "" {
					reason = notify.RefusedSettings // the channel alone was turned off, or its address removed
				}
				o.refuse(reason, 1)
				continue
			}
			msgs, err := s.cfg.Templates.Build(req, u, notify.Decision{Channels: []notify.Channel{l.dl.Channel}})
			if err != nil {
				return nil, err
			}
			batch = append(batch, msgs...)
		}
		if len(batch) == 0 {
			continue
		}
		n, err := s.cfg.Deliverer.Deliver(ctx, batch)
		o.Retries += int64(n)
		if err == nil {
			o.Delivered += int64(len(batch))
			continue
		}
		reason, attempts, ok := failure(ctx, err)
		if !ok {
			return nil, ctx.Err()
		}
		o.Failed += int64(len(batch))
		ids := make([]int64, len(batch))
		for i, m := range batch {
			ids[i] = m.UserID
		}
		dlsByReq[l.req.ID] = append(dlsByReq[l.req.ID], DeadLetter{Request: l.req.ID, Chunk: l.dl.Chunk, Replay: rp.ID, Channel: l.dl.Channel, UserIDs: ids, Reason: reason, Attempts: attempts})
	}
	var events []eventstore.NewEvent
	for _, id := range order {
		evs, err := s.outcomeEvents(*byReq[id], dlsByReq[id], rp.ID, id)
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	if len(events) == 0 {
		// Every letter was replayed meanwhile: an empty outcome marks the
		// replay done.
		data, err := json.Marshal(Outcome{Chunk: -1, Replay: rp.ID})
		if err != nil {
			return nil, err
		}
		events = append(events, eventstore.NewEvent{ID: eventID(rp.ID, "empty"), Type: TypeOutcome, Tags: []string{Tag}, Data: data})
	}
	return events, nil
}

// MetricsDefinition is the `notifications` aggregation: per minute (with
// hour and day roll-ups), by type, club and sender, the sums of the
// outcomes' counts, on the requests' timestamps.
func MetricsDefinition(grace time.Duration) window.Definition {
	return window.Definition{
		Name:    "notifications",
		Window:  window.Tumbling(time.Minute),
		RollUps: []time.Duration{time.Hour, 24 * time.Hour},
		Grace:   grace,
		Dims:    []string{"type", "club", "sender"},
		Values:  MetricValues,
		Extract: func(ev *eventstore.Event, r *window.Record) bool {
			if ev.Type != TypeOutcome {
				return false
			}
			var o Outcome
			if json.Unmarshal(ev.Data, &o) != nil || o.Request == "" {
				return false
			}
			r.Time = o.Timestamp
			r.Dims[0], r.Dims[1], r.Dims[2] = o.Type, itoa64(o.ClubID), o.Sender
			for i, v := range []int64{o.Requested, o.Refused, o.Built, o.Delivered, o.Failed, o.DeadLettered, o.Retries} {
				r.Values[i] = float64(v)
			}
			return true
		},
	}
}

// MetricValues are the metrics' value fields, in the order of Counts.
var MetricValues = []string{"requested", "refused", "built", "delivered", "failed", "dead_lettered", "retries"}
