package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/services/notify/deliver"
)

// state is the service's view of its events.
type state struct {
	reqs  map[string]*reqState
	order []*reqState // by position
	// pending are the requests with chunks not done and the replays not
	// done, in log order (events are applied in it): the pipeline picks
	// from their fronts without sorting. Done ones leave lazily.
	pending        pendingList[*reqState]
	pendingReplays pendingList[*replayState]

	dls     map[string]*dlState
	dlOrder []*dlState

	replays map[string]*replayState
}

// pendingList is a list in log order whose done items are dropped once
// they are half of it (or at its front): adding and finishing are
// amortised O(1), and a walk from the front meets few done items.
type pendingList[T interface{ isDone() bool }] struct {
	items []T
	done  int // items done, not yet dropped
}

func (l *pendingList[T]) add(x T) { l.items = append(l.items, x) }

// finished notes that an item became done.
func (l *pendingList[T]) finished() {
	l.done++
	for len(l.items) > 0 && l.items[0].isDone() {
		var zero T
		l.items[0] = zero
		l.items = l.items[1:]
		l.done--
	}
	if l.done > 0 && 2*l.done > len(l.items) {
		l.items = slices.DeleteFunc(l.items, T.isDone)
		l.done = 0
	}
}

func (rs *reqState) isDone() bool    { return rs.doneCount == rs.Chunks }
func (rp *replayState) isDone() bool { return rp.done }

type reqState struct {
	Requested
	position   uint64
	acceptedAt time.Time
	done       []bool
	doneCount  int
	counts     Counts
	openDLs    int
}

type dlState struct {
	DeadLetter
	position   uint64
	at         time.Time
	replayedBy string
	// claimedBy is the first replay that named the letter while it was
	// open, in log order: only that replay delivers it, so two replays
	// accepted together cannot deliver it twice.
	claimedBy string
}

type replayState struct {
	ReplayRequested
	position uint64
	done     bool
	outcomes map[string]bool // the requests whose outcome of this replay is applied
}

func newState() state {
	return state{reqs: map[string]*reqState{}, dls: map[string]*dlState{}, replays: map[string]*replayState{}}
}

func (st *state) apply(ev eventstore.Event) error {
	switch ev.Type {
	case TypeRequested:
		var r Requested
		if err := json.Unmarshal(ev.Data, &r); err != nil {
			return err
		}
		if st.reqs[r.ID] != nil {
			return nil
		}
		rs := &reqState{Requested: r, position: ev.Position, acceptedAt: ev.Time, done: make([]bool, r.Chunks)}
		st.reqs[r.ID] = rs
		st.order = append(st.order, rs)
		if r.Chunks > 0 {
			st.pending.add(rs)
		}
	case TypeOutcome:
		var o Outcome
		if err := json.Unmarshal(ev.Data, &o); err != nil {
			return err
		}
		if o.Request == "" && o.Replay != "" {
			// A replay whose letters were all replayed by others.
			if rp := st.replays[o.Replay]; rp != nil && !rp.done {
				rp.done = true
				st.pendingReplays.finished()
			}
			return nil
		}
		rs := st.reqs[o.Request]
		if rs == nil {
			return fmt.Errorf("outcome of unknown request %s", o.Request)
		}
		if o.Replay == "" {
			if o.Chunk < 0 || o.Chunk >= len(rs.done) {
				return fmt.Errorf("request %s: outcome of chunk %d, which it does not have", o.Request, o.Chunk)
			}
			if rs.done[o.Chunk] {
				// A second process on the store did the chunk too: its
				// outcome counts once (the metrics, which count every
				// outcome, would count it twice; run one pipeline per
				// store).
				return nil
			}
			rs.counts.add(o.Counts)
			rs.done[o.Chunk] = true
			if rs.doneCount++; rs.doneCount == rs.Chunks {
				st.pending.finished()
			}
			return nil
		}
		rp := st.replays[o.Replay]
		if rp != nil {
			if rp.outcomes[o.Request] {
				return nil // appended twice (a second process): counted once
			}
			if rp.outcomes == nil {
				rp.outcomes = map[string]bool{}
			}
			rp.outcomes[o.Request] = true
		}
		rs.counts.add(o.Counts)
		for _, id := range o.Replayed {
			if dl := st.dls[id]; dl != nil && dl.replayedBy == "" {
				dl.replayedBy = o.Replay
				rs.openDLs--
			}
		}
		if rp != nil && !rp.done {
			rp.done = true
			st.pendingReplays.finished()
		}
	case TypeDeadLettered:
		var d DeadLetter
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		dl := &dlState{DeadLetter: d, position: ev.Position, at: ev.Time}
		st.dls[d.ID] = dl
		st.dlOrder = append(st.dlOrder, dl)
		if rs := st.reqs[d.Request]; rs != nil {
			rs.openDLs++
		}
	case TypeReplayRequested:
		var r ReplayRequested
		if err := json.Unmarshal(ev.Data, &r); err != nil {
			return err
		}
		if st.replays[r.ID] == nil {
			rp := &replayState{ReplayRequested: r, position: ev.Position}
			st.replays[r.ID] = rp
			st.pendingReplays.add(rp)
			for _, id := range r.DeadLetters {
				if dl := st.dls[id]; dl != nil && dl.replayedBy == "" && dl.claimedBy == "" {
					dl.claimedBy = r.ID
				}
			}
		}
	}
	return nil
}

// Status is a request's state and counts.
type Status struct {
	Requested
	Position   uint64    `json:"position"`
	AcceptedAt time.Time `json:"accepted_at"`
	// State is accepted (no chunk done yet), running or done (every
	// chunk's outcome is on the log; dead letters may remain).
	State           string `json:"state"`
	ChunksDone      int    `json:"chunks_done"`
	Counts          Counts `json:"counts"`
	OpenDeadLetters int    `json:"open_dead_letters"`
}

func (rs *reqState) status() Status {
	s := Status{Requested: rs.Requested, Position: rs.position, AcceptedAt: rs.acceptedAt, ChunksDone: rs.doneCount,
		Counts: rs.counts, OpenDeadLetters: rs.openDLs}
	s.Counts.RefusedBy = maps(rs.counts.RefusedBy)
	switch {
	case rs.doneCount == rs.Chunks:
		s.State = "done"
	case rs.doneCount == 0:
		s.State = "accepted"
	default:
		s.State = "running"
	}
	return s
}

func maps(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Get returns a request's status; minPosition, if not 0, waits until the
// state reflects the log up to it.
func (s *Service) Get(ctx context.Context, id string, minPosition uint64) (Status, error) {
	if err := s.waitFor(ctx, minPosition); err != nil {
		return Status{}, err
	}
	var out Status
	found := false
	s.view.Read(func(st *state, _ uint64) {
		if rs := st.reqs[id]; rs != nil {
			out, found = rs.status(), true
		}
	})
	if !found {
		return Status{}, fmt.Errorf("%w: no notification request %q", ErrNotFound, id)
	}
	return out, nil
}

func (s *Service) waitFor(ctx context.Context, pos uint64) error {
	if pos == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return s.state.WaitFor(ctx, pos)
}

// List returns the most recent requests, newest first.
func (s *Service) List(limit int) []Status {
	var out []Status
	s.view.Read(func(st *state, _ uint64) {
		for i := len(st.order) - 1; i >= 0 && len(out) < limit; i-- {
			out = append(out, st.order[i].status())
		}
	})
	return out
}

// DeadLetterInfo is a dead letter as listed.
type DeadLetterInfo struct {
	DeadLetter
	Position uint64    `json:"position"`
	At       time.Time `json:"at"`
	// State is open, replaying (a replay holds it: ReplayedBy names it)
	// or replayed (ReplayedBy names the replay; what failed again in it
	// is a dead letter of its own).
	State      string `json:"state"`
	ReplayedBy string `json:"replayed_by,omitempty"`
}

// DeadLetters lists dead letters in log order: of one request (or all),
// after the one with id after (or from the first), at most limit.
func (s *Service) DeadLetters(request, after string, limit int) ([]DeadLetterInfo, error) {
	var out []DeadLetterInfo
	var err error
	s.view.Read(func(st *state, _ uint64) {
		start := 0
		if after != "" {
			dl := st.dls[after]
			if dl == nil {
				err = fmt.Errorf("%w: no dead letter %q", ErrNotFound, after)
				return
			}
			start, _ = slices.BinarySearchFunc(st.dlOrder, dl.position, func(d *dlState, p uint64) int { return cmpU(d.position, p) })
			start++
		}
		for _, dl := range st.dlOrder[start:] {
			if len(out) == limit {
				break
			}
			if request != "" && dl.Request != request {
				continue
			}
			info := DeadLetterInfo{DeadLetter: dl.DeadLetter, Position: dl.position, At: dl.at}
			info.State, info.ReplayedBy = dl.replayState()
			// Letters stored before reasons were redacted are shown so.
			info.Reason = deliver.RedactReason(info.Reason)
			out = append(out, info)
		}
	})
	return out, err
}

// replayState is the letter's state as listed, and the replay that
// holds or replayed it.
func (dl *dlState) replayState() (state, replay string) {
	switch {
	case dl.replayedBy != "":
		return "replayed", dl.replayedBy
	case dl.claimedBy != "":
		return "replaying", dl.claimedBy
	}
	return "open", ""
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ReplayInput names the dead letters to replay: by id, or every open one
// of a request.
type ReplayInput struct {
	IDs     []string `json:"ids,omitempty"`
	Request string   `json:"request,omitempty"`
}

// ReplayAccepted is the answer to a replay.
type ReplayAccepted struct {
	ID          string    `json:"id"`
	DeadLetters []string  `json:"dead_letters"`
	Skipped     []Skipped `json:"skipped,omitempty"`
	Position    uint64    `json:"position"`
}

// Skipped is a dead letter a replay named but does not replay.
type Skipped struct {
	ID     string `json:"id"`
	Replay string `json:"replay"`
	State  string `json:"state"`
}

func (in *ReplayInput) hash() string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %d\n", in.Request, len(in.IDs))
	for _, id := range in.IDs {
		fmt.Fprintf(h, "%q\n", id)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Replay asks the pipeline to deliver dead letters again, with the
// idempotency keys they had. key makes a retried replay the same one:
// the same key and body answer as the first time (even once it is
// done), another body fails with ErrKeyReused.
//
// A letter is delivered by one replay only: the first that names it
// while it is open, in log order, holds it. Named letters another
// replay holds, or replayed already, are skipped and listed as such in
// the answer; a replay left with none is refused (ErrUnacceptable).
func (s *Service) Replay(ctx context.Context, key string, in ReplayInput) (ReplayAccepted, error) {
	switch {
	case (len(in.IDs) == 0) == (in.Request == ""):
		return ReplayAccepted{}, fmt.Errorf("%w: give ids or request", ErrInvalid)
	case len(in.IDs) > MaxReplay:
		return ReplayAccepted{}, fmt.Errorf("%w: %d ids, at most %d", ErrTooLarge, len(in.IDs), MaxReplay)
	case len(key) > MaxKey:
		return ReplayAccepted{}, fmt.Errorf("%w: Idempotency-Key: want at most %d characters", ErrInvalid, MaxKey)
	}
	hash := in.hash()
	rid := eventstore.NewID().String()
	if key != "" {
		rid = RequestID("replay", key)
		if acc, ok, err := s.existingReplay(ctx, rid, hash); ok || err != nil {
			return acc, err
		}
	}
	// Read what this client (or any) appended before: a replay accepted
	// a moment ago holds its letters.
	if err := s.waitCaughtUp(ctx); err != nil {
		return ReplayAccepted{}, err
	}
	var ids []string
	var skipped []Skipped
	var err error
	skip := func(dl *dlState) {
		if len(skipped) < MaxReplay {
			state, by := dl.replayState()
			skipped = append(skipped, Skipped{ID: dl.ID, Replay: by, State: state})
		}
	}
	s.view.Read(func(st *state, _ uint64) {
		if in.Request != "" {
			if st.reqs[in.Request] == nil {
				err = fmt.Errorf("%w: no notification request %q", ErrNotFound, in.Request)
				return
			}
			for _, dl := range st.dlOrder {
				switch {
				case dl.Request != in.Request || dl.replayedBy != "":
				case dl.claimedBy != "":
					skip(dl)
				case len(ids) < MaxReplay:
					ids = append(ids, dl.ID)
				}
			}
			return
		}
		for _, id := range in.IDs {
			dl := st.dls[id]
			switch {
			case dl == nil:
				err = fmt.Errorf("%w: no dead letter %q", ErrNotFound, id)
				return
			case slices.Contains(ids, id):
			case dl.replayedBy != "" || dl.claimedBy != "":
				skip(dl)
			default:
				ids = append(ids, id)
			}
		}
	})
	if err != nil {
		return ReplayAccepted{}, err
	}
	if len(ids) == 0 {
		msg := "no open dead letter to replay"
		if len(skipped) > 0 {
			k := skipped[0]
			msg += fmt.Sprintf(": dead letter %s is %s by replay %s", k.ID, k.State, k.Replay)
			if len(skipped) > 1 {
				msg += fmt.Sprintf(" (and %d more held or replayed)", len(skipped)-1)
			}
		}
		return ReplayAccepted{}, fmt.Errorf("%w: %s", ErrUnacceptable, msg)
	}
	data, err := json.Marshal(ReplayRequested{ID: rid, Hash: hash, DeadLetters: ids, Skipped: skipped})
	if err != nil {
		return ReplayAccepted{}, err
	}
	res, err := s.store.Append(ctx, replayStream(rid), eventstore.NoStream, []eventstore.NewEvent{{ID: eventID("replay", rid), Type: TypeReplayRequested, Tags: []string{Tag}, Data: data}})
	if isConflict(err) || err == nil && res.Duplicate {
		// Accepted concurrently under the same key: answer as that one.
		acc, ok, rerr := s.existingReplay(ctx, rid, hash)
		if ok || rerr != nil {
			return acc, rerr
		}
		return ReplayAccepted{}, fmt.Errorf("notify: replay %s: %w", rid, err)
	}
	if err != nil {
		return ReplayAccepted{}, err
	}
	return ReplayAccepted{ID: rid, DeadLetters: ids, Skipped: skipped, Position: res.LastPosition}, nil
}

// existingReplay answers a retry of replay rid: ok when it exists.
func (s *Service) existingReplay(ctx context.Context, rid, hash string) (ReplayAccepted, bool, error) {
	evs, err := s.store.ReadStream(ctx, replayStream(rid), 1, 1)
	if err != nil || len(evs) == 0 {
		return ReplayAccepted{}, false, err
	}
	var prev ReplayRequested
	if err := json.Unmarshal(evs[0].Data, &prev); err != nil {
		return ReplayAccepted{}, false, fmt.Errorf("notify: replay %s: %w", rid, err)
	}
	if prev.Hash != "" && prev.Hash != hash {
		return ReplayAccepted{}, false, fmt.Errorf("%w: replay %s was asked with this key and another body", ErrKeyReused, rid)
	}
	return ReplayAccepted{ID: rid, DeadLetters: prev.DeadLetters, Skipped: prev.Skipped, Position: evs[0].Position}, true, nil
}

// waitCaughtUp waits, up to 5 s, until the state reflects the log's head.
func (s *Service) waitCaughtUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return s.state.WaitCaughtUp(ctx)
}
