// Package torture cuts the power under the embedded store again and again
// and checks, after each cut, what a durable log promises: every append
// acknowledged before the cut is there, whole, where it was acknowledged;
// nothing unacknowledged is half there; positions run 1, 2, 3 … with no
// gap; each stream's version is its number of events; the head readers
// were shown before the cut survives it. With Kind "projection" a
// checkpointed view follows the log through the same cuts, and after each
// it must hold exactly the effect of the events up to its checkpoint, and
// after catching up exactly the effect of the whole log.
//
// The power cut is simulated with Pebble's crash-consistent in-memory file
// system (vfs.NewCrashableMem and its crash clone): the clone keeps what
// was synced, and of the rest a random share of the 4 KiB blocks, which is
// what a disk may hold after power fails. A store that acknowledged an
// append before syncing it fails these checks (Config.NoSync shows it).
// `logbook torture` runs it.
package torture

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/projection"
	"github.com/logbook/logbook/internal/crashtest"
)

// Config is one torture run.
type Config struct {
	CrashPoints int
	Seed        uint64
	// Kind is "events" (the store alone) or "projection" (the store and
	// a checkpointed view following it).
	Kind string
	// NoSync acknowledges appends before they are synced (the store's
	// NoSync option): the checks must then find lost appends. It exists to
	// show that they would.
	NoSync bool
	// PointsPerStore is how many cuts one store lives through before the
	// run starts a fresh one (default 25): each check reads the whole
	// store, so this bounds its cost.
	PointsPerStore int
}

// Result is what a run found. LostAcknowledged and Violations must be 0.
type Result struct {
	Kind        string `json:"kind"`
	Seed        uint64 `json:"seed"`
	CrashPoints int    `json:"crash_points"`
	// Acknowledged counts the appends acknowledged before a cut, each
	// checked after it (and after every later cut of the same store).
	Acknowledged     int `json:"acknowledged"`
	LostAcknowledged int `json:"lost_acknowledged"`
	// Violations counts every other broken promise: a half-present
	// append, a gap, a wrong stream version, a head below the one shown,
	// a view that does not match the log.
	Violations     int      `json:"violations"`
	FirstProblems  []string `json:"first_problems,omitempty"`
	EventsAtCuts   int      `json:"events_at_cuts"` // the stores' sizes summed over the cuts
	ViewCheckpoint int      `json:"view_checkpoints_checked,omitempty"`
	Seconds        float64  `json:"seconds"`
}

const (
	streams    = 12
	storeDir   = "/store"
	viewDir    = "/view"
	maxProblem = 10
)

// Run runs cfg.CrashPoints cuts.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.CrashPoints <= 0 {
		return Result{}, errors.New("torture: crash points must be positive")
	}
	if cfg.Kind == "" {
		cfg.Kind = "events"
	}
	if cfg.Kind != "events" && cfg.Kind != "projection" {
		return Result{}, fmt.Errorf("torture: kind %q: want events or projection", cfg.Kind)
	}
	if cfg.PointsPerStore <= 0 {
		cfg.PointsPerStore = 25
	}
	start := time.Now()
	res := Result{Kind: cfg.Kind, Seed: cfg.Seed}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x70a7))
	var nextAppend uint64
	for res.CrashPoints < cfg.CrashPoints {
		n := min(cfg.PointsPerStore, cfg.CrashPoints-res.CrashPoints)
		t := &trial{cfg: cfg, res: &res, rng: rng, acked: map[uint64]ack{}, nextAppend: &nextAppend}
		if err := t.run(ctx, n); err != nil {
			return res, err
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// ack is an append the store acknowledged.
type ack struct {
	stream string
	n      int
	res    eventstore.AppendResult
}

// trial is one store's life through several cuts.
type trial struct {
	cfg        Config
	res        *Result
	rng        *rand.Rand
	acked      map[uint64]ack // every append acknowledged before a cut
	nextAppend *uint64
}

func (t *trial) problem(format string, args ...any) {
	t.res.Violations++
	if len(t.res.FirstProblems) < maxProblem {
		t.res.FirstProblems = append(t.res.FirstProblems, fmt.Sprintf("cut %d: ", t.res.CrashPoints)+fmt.Sprintf(format, args...))
	}
}

func (t *trial) lost(format string, args ...any) {
	t.res.LostAcknowledged++
	if len(t.res.FirstProblems) < maxProblem {
		t.res.FirstProblems = append(t.res.FirstProblems, fmt.Sprintf("cut %d: ", t.res.CrashPoints)+fmt.Sprintf(format, args...))
	}
}

// node is what runs on the file system between two cuts.
type node struct {
	store  *pebblestore.Store
	view   *projection.PebbleView
	runner *projection.Runner
	stop   context.CancelFunc
	ran    chan error
}

func (t *trial) open(fs *crashtest.FS) (*node, error) {
	st, err := pebblestore.Open(storeDir, pebblestore.Options{FS: fs, NoSync: t.cfg.NoSync, MemTableBytes: 1 << 20})
	if err != nil {
		return nil, fmt.Errorf("open the store after a cut: %w", err)
	}
	n := &node{store: st}
	if t.cfg.Kind != "projection" {
		return n, nil
	}
	n.view, err = projection.OpenPebbleView(viewDir, projection.PebbleOptions{Tune: func(o *pebble.Options) { o.FS = fs }}, countEvents)
	if err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("open the view after a cut: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	n.stop, n.ran = stop, make(chan error, 1)
	n.runner = projection.NewRunner(st, n.view, projection.Options{Name: "torture", MaxBatch: 64, Logger: slog.New(slog.DiscardHandler)})
	go func() { n.ran <- n.runner.Run(ctx) }()
	return n, nil
}

func (n *node) close() {
	if n.stop != nil {
		n.stop()
		<-n.ran
		_ = n.view.Close()
	}
	_ = n.store.Close()
}

func (t *trial) run(ctx context.Context, cuts int) error {
	fs := crashtest.NewFS()
	n, err := t.open(fs)
	if err != nil {
		return err
	}
	for range cuts {
		if ctx.Err() != nil {
			n.close()
			return ctx.Err()
		}
		crashed, shown, before := t.workload(n, fs)
		n.close()
		for id, a := range before {
			t.acked[id] = a
		}
		t.res.CrashPoints++
		fs = crashed
		if n, err = t.open(fs); err != nil {
			return err
		}
		if err := t.check(ctx, n, shown); err != nil {
			n.close()
			return err
		}
	}
	n.close()
	return nil
}

// workload appends from a few writers and cuts the power at a random
// moment while they run: it returns the file system as the cut left it,
// the head readers were shown and the appends acknowledged before it.
func (t *trial) workload(n *node, fs *crashtest.FS) (*crashtest.FS, uint64, map[uint64]ack) {
	writers := 1 + t.rng.IntN(6)
	cutAfter := t.rng.IntN(40) // acknowledgements before the cut
	keep := []int{0, 0, 30, 100}[t.rng.IntN(4)]
	var mu sync.Mutex
	acked := map[uint64]ack{}
	var stop atomic.Bool
	var wg sync.WaitGroup
	enough := make(chan struct{})
	var once sync.Once
	for w := range writers {
		wrng := rand.New(rand.NewPCG(t.rng.Uint64(), uint64(w)))
		wg.Go(func() {
			for !stop.Load() {
				mu.Lock()
				*t.nextAppend++
				id := *t.nextAppend
				mu.Unlock()
				stream := fmt.Sprintf("s-%02d", wrng.IntN(streams))
				k := 1 + wrng.IntN(4)
				evs := make([]eventstore.NewEvent, k)
				for i := range evs {
					evs[i] = eventstore.NewEvent{ID: eventID(id, i), Type: "torture", Data: payload(id, i, k, wrng.IntN(300))}
				}
				expect := eventstore.Any
				if wrng.IntN(3) == 0 {
					if v, err := n.store.StreamVersion(context.Background(), stream); err == nil {
						expect = eventstore.Exactly(v)
					}
				}
				r, err := n.store.Append(context.Background(), stream, expect, evs)
				if err != nil {
					continue // a conflict, or the store closing under the cut
				}
				mu.Lock()
				acked[id] = ack{stream: stream, n: k, res: r}
				if len(acked) >= cutAfter {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		})
	}
	select {
	case <-enough:
	case <-time.After(200 * time.Millisecond):
	}
	// The power fails now: what was acknowledged and shown before this
	// moment must survive.
	mu.Lock()
	shown, _ := n.store.Head(context.Background())
	crashed := fs.Crash(keep, t.rng)
	before := make(map[uint64]ack, len(acked))
	for id, a := range acked {
		before[id] = a
	}
	mu.Unlock()
	stop.Store(true)
	wg.Wait()
	return crashed, shown, before
}

// check reads the whole recovered store (and view) and counts what breaks
// the promises.
func (t *trial) check(ctx context.Context, n *node, shown uint64) error {
	head, err := n.store.Head(ctx)
	if err != nil {
		return fmt.Errorf("head after a cut: %w", err)
	}
	if head < shown {
		t.problem("head %d after the cut; readers were shown %d before it", head, shown)
	}
	var all []eventstore.Event
	for from := uint64(1); ; {
		evs, err := n.store.ReadAll(ctx, from, 1000)
		if err != nil {
			return fmt.Errorf("read after a cut: %w", err)
		}
		if len(evs) == 0 {
			break
		}
		all = append(all, evs...)
		from = evs[len(evs)-1].Position + 1
	}
	t.res.EventsAtCuts += len(all)
	if uint64(len(all)) != head {
		t.problem("%d events readable, head %d", len(all), head)
	}
	type stored struct {
		stream             string
		firstPos, firstSeq uint64
		n, k               int
	}
	appends := map[uint64]*stored{}
	perStream := map[string]uint64{}
	for i, ev := range all {
		if ev.Position != uint64(i+1) {
			t.problem("position %d at index %d: a gap", ev.Position, i)
			break
		}
		perStream[ev.Stream]++
		if ev.Seq != perStream[ev.Stream] {
			t.problem("stream %s: event %d has sequence number %d", ev.Stream, perStream[ev.Stream], ev.Seq)
		}
		id, idx, k, ok := parsePayload(ev.Data)
		if !ok || ev.ID != eventID(id, idx) {
			t.problem("position %d: payload or id damaged", ev.Position)
			continue
		}
		a := appends[id]
		if a == nil {
			a = &stored{stream: ev.Stream, firstPos: ev.Position, firstSeq: ev.Seq, k: k}
			appends[id] = a
		}
		if idx != a.n || ev.Stream != a.stream || ev.Position != a.firstPos+uint64(idx) || ev.Seq != a.firstSeq+uint64(idx) {
			t.problem("append %d: event %d out of place (position %d)", id, idx, ev.Position)
		}
		a.n++
	}
	for id, a := range appends {
		if a.n != a.k {
			t.problem("append %d is half there: %d of its %d events", id, a.n, a.k)
		}
	}
	for s, v := range perStream {
		got, err := n.store.StreamVersion(ctx, s)
		if err != nil {
			return err
		}
		if got != v {
			t.problem("stream %s: version %d, %d events", s, got, v)
		}
	}
	ids := make([]uint64, 0, len(t.acked))
	for id := range t.acked {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		a := t.acked[id]
		s := appends[id]
		switch {
		case s == nil:
			t.lost("append %d (%s, positions %d-%d) was acknowledged and is gone", id, a.stream, a.res.FirstPosition, a.res.LastPosition)
		case s.stream != a.stream || s.firstPos != a.res.FirstPosition || s.firstSeq != a.res.FirstSeq:
			t.problem("append %d: acknowledged at %s/%d position %d, found at %s/%d position %d", id, a.stream, a.res.FirstSeq, a.res.FirstPosition, s.stream, s.firstSeq, s.firstPos)
		}
	}
	t.res.Acknowledged += len(t.acked)
	if n.view != nil {
		return t.checkView(ctx, n, all)
	}
	return nil
}

// checkView: the recovered view holds exactly the effect of the log up to
// its checkpoint; caught up, exactly that of the whole log.
func (t *trial) checkView(ctx context.Context, n *node, all []eventstore.Event) error {
	head := uint64(len(all))
	compare := func(when string, wantPos uint64) error {
		return n.view.Read(func(r pebble.Reader, pos uint64) error {
			t.res.ViewCheckpoint++
			if pos > head || (wantPos > 0 && pos != wantPos) {
				t.problem("view %s: checkpoint %d, log head %d", when, pos, head)
				return nil
			}
			want := recount(all, pos)
			got, err := readCounts(r)
			if err != nil {
				return err
			}
			for s, c := range want {
				if got[s] != c {
					t.problem("view %s at checkpoint %d: stream %s counted %d times, the log has %d", when, pos, s, got[s], c)
				}
			}
			for s, c := range got {
				if _, ok := want[s]; !ok {
					t.problem("view %s at checkpoint %d: stream %s counted %d times, not in the log", when, pos, s, c)
				}
			}
			return nil
		})
	}
	// The runner is already catching up: whatever checkpoint the view's
	// snapshot holds, its state must be the log's up to it.
	if err := compare("after the cut", 0); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n.runner.WaitFor(wctx, head); err != nil {
		return fmt.Errorf("view catching up to %d after a cut: %w", head, err)
	}
	// The writers are stopped: caught up means exactly at the head.
	return compare("caught up", head)
}

// countEvents is the view's update: per stream, how many events it saw.
func countEvents(b *pebble.Batch, events []eventstore.Event) error {
	for _, ev := range events {
		key := append([]byte("c/"), ev.Stream...)
		var c uint64
		if v, closer, err := b.Get(key); err == nil {
			c = binary.BigEndian.Uint64(v)
			closer.Close()
		} else if !errors.Is(err, pebble.ErrNotFound) {
			return err
		}
		if err := b.Set(key, binary.BigEndian.AppendUint64(nil, c+1), nil); err != nil {
			return err
		}
	}
	return nil
}

func readCounts(r pebble.Reader) (map[string]uint64, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte("c/"), UpperBound: []byte("c0")})
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for it.First(); it.Valid(); it.Next() {
		out[string(it.Key()[2:])] = binary.BigEndian.Uint64(it.Value())
	}
	return out, it.Close()
}

func recount(all []eventstore.Event, upTo uint64) map[string]uint64 {
	out := map[string]uint64{}
	for _, ev := range all[:min(upTo, uint64(len(all)))] {
		out[ev.Stream]++
	}
	return out
}

func eventID(appendID uint64, i int) eventstore.ID {
	var id eventstore.ID
	binary.BigEndian.PutUint64(id[:8], appendID)
	binary.BigEndian.PutUint64(id[8:], uint64(i)+1)
	return id
}

// payload is the append's id, the event's index, the append's size, then
// filler whose bytes a checksum-free check can still verify: each is the
// low byte of the append id plus its offset.
func payload(appendID uint64, i, k, filler int) []byte {
	b := binary.BigEndian.AppendUint64(nil, appendID)
	b = append(b, byte(i), byte(k))
	for j := range filler {
		b = append(b, byte(appendID)+byte(j))
	}
	return b
}

func parsePayload(b []byte) (appendID uint64, i, k int, ok bool) {
	if len(b) < 10 {
		return 0, 0, 0, false
	}
	appendID, i, k = binary.BigEndian.Uint64(b), int(b[8]), int(b[9])
	for j, c := range b[10:] {
		if c != byte(appendID)+byte(j) {
			return 0, 0, 0, false
		}
	}
	return appendID, i, k, i < k
}
