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
//
// With Removals, a remover deletes (softly and for good), truncates and
// sets a retention rule on half of the streams and sweeps (the other half
// it never touches, so their appends are all checked for loss), while the writers
// append and the power is cut: an acknowledged append may then be gone
// only if a removal attempted before the cut covers it, and what an
// acknowledged removal covers must stay gone; positions only grow (a
// removed event leaves a hole), and never go back below the head shown.
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
	"strings"
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
	// Removals adds deletions, truncations, a retention rule and sweeps
	// to the workload (Kind "events" only: the view's check assumes the
	// log only grows).
	Removals bool
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
	Removals       int      `json:"removals,omitempty"` // removals acknowledged before a cut
	RemovedEvents  int      `json:"removed_events,omitempty"`
	FirstProblems  []string `json:"first_problems,omitempty"`
	EventsAtCuts   int      `json:"events_at_cuts"` // the stores' sizes summed over the cuts
	ViewCheckpoint int      `json:"view_checkpoints_checked,omitempty"`
	Seconds        float64  `json:"seconds"`
}

const (
	streams = 12
	// keptStreams is how many of the streams (s-00 up) the remover never
	// touches; retentionPrefix names the streams the retention rule
	// covers (s-10 and s-11, which may also be deleted for good).
	keptStreams     = 6
	retentionPrefix = "s-1"
	storeDir        = "/store"
	viewDir         = "/view"
	maxProblem      = 10
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
	if cfg.Removals && cfg.Kind != "events" {
		return Result{}, errors.New("torture: removals only with kind events")
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
		t := &trial{cfg: cfg, res: &res, rng: rng, acked: map[uint64]ack{}, nextAppend: &nextAppend, removed: map[string]*removal{}}
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

	// What the remover did to each stream, and the retention rule's
	// count (0: none attempted); guarded by the workload's mutex.
	removed   map[string]*removal
	retention uint64
}

// removal is what was removed from one stream: maybe is the highest
// truncation point attempted (events below it may be gone), must the
// highest acknowledged before a cut (events below it must be gone).
// A hard delete is a truncation point of "everything".
type removal struct {
	maybe, must uint64
}

const everything = ^uint64(0)

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
	// Small memtables: many write-ahead logs between cuts, most of them
	// made from spares (pebblekit.SpareWALs) once the store has written
	// a sixteenth of one.
	st, err := pebblestore.Open(storeDir, pebblestore.Options{FS: fs, NoSync: t.cfg.NoSync, MemTableBytes: 256 << 10, SweepInterval: -1, SweepBatch: 16})
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
	var excl sync.RWMutex // the remover reads a version and removes with no append in between
	mustNow := map[string]uint64{}
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
				excl.RLock()
				r, err := n.store.Append(context.Background(), stream, expect, evs)
				excl.RUnlock()
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
	if t.cfg.Removals {
		rrng := rand.New(rand.NewPCG(t.rng.Uint64(), 99))
		wg.Go(func() { t.remove(n, rrng, &stop, &excl, &mu, mustNow) })
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
	for st, b := range mustNow {
		r := t.removed[st]
		r.must = max(r.must, b)
		t.res.Removals++
	}
	mu.Unlock()
	stop.Store(true)
	wg.Wait()
	return crashed, shown, before
}

// remove deletes, truncates and expires while the writers append, until
// stop: each removal is recorded as attempted before it is made, and as
// acknowledged (in must) once it returns.
func (t *trial) remove(n *node, rng *rand.Rand, stop *atomic.Bool, excl *sync.RWMutex, mu *sync.Mutex, must map[string]uint64) {
	ctx := context.Background()
	for !stop.Load() {
		if rng.IntN(4) == 0 {
			time.Sleep(time.Millisecond)
		}
		// Removals touch only the upper half of the streams (kept streams
		// s-00 to s-05 are never removed from), so that most acknowledged
		// appends are still checked for loss.
		stream := fmt.Sprintf("s-%02d", keptStreams+rng.IntN(streams-keptStreams))
		op := rng.IntN(20)
		if op == 19 {
			// Sweep: reclaim what was removed, and apply the retention.
			if _, err := n.store.Sweep(ctx); err == nil {
				continue
			}
			continue
		}
		if op == 18 {
			mu.Lock()
			if t.retention == 0 {
				t.retention = 40
			}
			mu.Unlock()
			_ = n.store.SetRetention(ctx, eventstore.Retention{Prefix: retentionPrefix, MaxCount: 40})
			continue
		}
		excl.Lock()
		v, err := n.store.StreamVersion(ctx, stream)
		if err != nil || v < 2 {
			excl.Unlock()
			continue
		}
		var before uint64
		var do func() error
		switch {
		case op == 17 && rng.IntN(4) == 0 && stream >= "s-10":
			before, do = everything, func() error { return n.store.DeleteStream(ctx, stream, eventstore.DeleteHard) }
		case op < 4:
			before, do = v+1, func() error { return n.store.DeleteStream(ctx, stream, eventstore.DeleteSoft) }
		default:
			before = v/2 + 1
			do = func() error { return n.store.TruncateStream(ctx, stream, before) }
		}
		mu.Lock()
		r := t.removed[stream]
		if r == nil {
			r = &removal{}
			t.removed[stream] = r
		}
		r.maybe = max(r.maybe, before)
		mu.Unlock()
		err = do()
		if err == nil {
			mu.Lock()
			must[stream] = max(must[stream], before)
			mu.Unlock()
		}
		excl.Unlock()
	}
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
	if !t.cfg.Removals && uint64(len(all)) != head {
		t.problem("%d events readable, head %d", len(all), head)
	}
	if len(all) > 0 && all[len(all)-1].Position > head {
		t.problem("position %d readable, past the head %d", all[len(all)-1].Position, head)
	}
	type stored struct {
		stream             string
		firstPos, firstSeq uint64
		firstIdx           int
		n, k               int
	}
	appends := map[uint64]*stored{}
	perStream := map[string]uint64{} // the last seq seen of each stream
	firstSeq := map[string]uint64{}
	for i, ev := range all {
		if !t.cfg.Removals && ev.Position != uint64(i+1) {
			t.problem("position %d at index %d: a gap", ev.Position, i)
			break
		}
		if i > 0 && ev.Position <= all[i-1].Position {
			t.problem("position %d after %d: out of order", ev.Position, all[i-1].Position)
			break
		}
		if r := t.removed[ev.Stream]; r != nil && ev.Seq < r.must {
			t.problem("stream %s: event %d is readable after an acknowledged removal of the events before %d", ev.Stream, ev.Seq, r.must)
		}
		if last, ok := perStream[ev.Stream]; ok && ev.Seq != last+1 {
			t.problem("stream %s: event %d follows %d", ev.Stream, ev.Seq, last)
		}
		if _, ok := firstSeq[ev.Stream]; !ok {
			firstSeq[ev.Stream] = ev.Seq
			if !t.cfg.Removals && ev.Seq != 1 {
				t.problem("stream %s starts at %d", ev.Stream, ev.Seq)
			}
		}
		perStream[ev.Stream] = ev.Seq
		id, idx, k, ok := parsePayload(ev.Data)
		if !ok || ev.ID != eventID(id, idx) {
			t.problem("position %d: payload or id damaged", ev.Position)
			continue
		}
		a := appends[id]
		if a == nil {
			a = &stored{stream: ev.Stream, firstPos: ev.Position, firstSeq: ev.Seq, firstIdx: idx, k: k}
			appends[id] = a
		}
		if idx != a.firstIdx+a.n || ev.Stream != a.stream || ev.Position != a.firstPos+uint64(idx-a.firstIdx) || ev.Seq != a.firstSeq+uint64(idx-a.firstIdx) {
			t.problem("append %d: event %d out of place (position %d)", id, idx, ev.Position)
		}
		a.n++
	}
	for id, a := range appends {
		// A truncation may cut an append: what is left is its end, from
		// the stream's first event on.
		cut := a.firstIdx > 0 && a.firstSeq == firstSeq[a.stream] && t.mayBeGone(a.stream, a.firstSeq-1, perStream[a.stream])
		if a.firstIdx+a.n != a.k || (a.firstIdx > 0 && !cut) {
			t.problem("append %d is half there: events %d-%d of its %d", id, a.firstIdx, a.firstIdx+a.n-1, a.k)
		}
	}
	for s, v := range perStream {
		got, err := n.store.StreamVersion(ctx, s)
		if err != nil {
			return err
		}
		if got != v {
			t.problem("stream %s: version %d, last event %d", s, got, v)
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
		case s == nil && t.cfg.Removals && t.mayBeGone(a.stream, a.res.LastSeq, t.version(ctx, n, a.stream)):
			t.res.RemovedEvents += a.n
		case s == nil:
			t.lost("append %d (%s, positions %d-%d) was acknowledged and is gone", id, a.stream, a.res.FirstPosition, a.res.LastPosition)
		case s.stream != a.stream || s.firstPos != a.res.FirstPosition+uint64(s.firstIdx) || s.firstSeq != a.res.FirstSeq+uint64(s.firstIdx):
			t.problem("append %d: acknowledged at %s/%d position %d, found at %s/%d position %d", id, a.stream, a.res.FirstSeq, a.res.FirstPosition, s.stream, s.firstSeq, s.firstPos)
		}
	}
	t.res.Acknowledged += len(t.acked)
	if n.view != nil {
		return t.checkView(ctx, n, all)
	}
	return nil
}

// mayBeGone reports whether a removal attempted before the cut may have
// removed event seq of stream, whose version is now version.
func (t *trial) mayBeGone(stream string, seq, version uint64) bool {
	if r := t.removed[stream]; r != nil && seq < r.maybe {
		return true
	}
	return t.retention > 0 && strings.HasPrefix(stream, retentionPrefix) && version >= t.retention && seq <= version-t.retention
}

func (t *trial) version(ctx context.Context, n *node, stream string) uint64 {
	v, _ := n.store.StreamVersion(ctx, stream)
	return v
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
