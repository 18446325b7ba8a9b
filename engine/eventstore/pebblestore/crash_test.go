//go:build unix

package pebblestore

// Crash test: a child process appends under load and is killed with SIGKILL
// at random moments, again and again, against one data directory. After
// each kill the parent reopens the directory and checks that every
// acknowledged append is there, exactly where it was acknowledged, that no
// append is visible in part, and that the store's invariants hold.
//
// The child is this test binary itself, re-executed by the crashtest
// harness to run TestCrashChild with the crashEnv* variables set. It
// reports each acknowledged append as one line on stdout ("ACK {json}"),
// written after Append returned; a line the kill cut short is ignored.
//
// A SIGKILL leaves the operating system's page cache, so it cannot show
// that the store fails to fsync. TestPowerLoss runs the same workload in
// this process on a file system that loses what was not synced.
//
// The workload parameters (writer counts, kill delays, streams, sizes) come
// from a seed that is logged; set LOGBOOK_CRASH_SEED to change it. Where the
// kill lands is still up to the scheduler.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/internal/crashtest"
)

const (
	crashEnvSeed    = "LOGBOOK_CRASH_SEED"   // parent: overrides the default seed
	crashEnvRounds  = "LOGBOOK_CRASH_ROUNDS" // parent: overrides the number of rounds
	crashEnvDir     = "LOGBOOK_CRASH_CHILD_DIR"
	crashEnvChild   = "LOGBOOK_CRASH_CHILD_SEED"
	crashEnvWriters = "LOGBOOK_CRASH_CHILD_WRITERS"
	crashEnvRound   = "LOGBOOK_CRASH_CHILD_ROUND"

	crashDefaultSeed = 0x10fb00c
	crashStreams     = 36
	crashTags        = 6
	crashEventType   = "crash.test"
)

// crashAck is what the child reports for one acknowledged append.
type crashAck struct {
	Append   string `json:"a"`
	Stream   string `json:"s"`
	N        int    `json:"n"`
	Expect   int64  `json:"x"`
	FirstSeq uint64 `json:"fs"`
	LastSeq  uint64 `json:"ls"`
	FirstPos uint64 `json:"fp"`
	LastPos  uint64 `json:"lp"`
}

// crashStat is the child's running tally, reported every few milliseconds.
type crashStat struct {
	Acks      uint64 `json:"acks"`
	Events    uint64 `json:"events"`
	Conflicts uint64 `json:"conflicts"`
	Retries   uint64 `json:"retries"`
	Fsyncs    uint64 `json:"fsyncs"`
	MaxWait   int64  `json:"maxWaitMs"` // the slowest acknowledged append
}

// crashID derives an event's client-given ID from its append and index, so
// that the parent can check every stored ID without being told it.
func crashID(appendID string, i int) eventstore.ID {
	sum := sha256.Sum256([]byte(appendID + "/" + strconv.Itoa(i)))
	var id eventstore.ID
	copy(id[:], sum[:])
	return id
}

func crashSum(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// crashEvent builds event i of an n-event append. Its metadata names the
// append, so that a stored event tells which append it belongs to.
func crashEvent(appendID string, n, i int, tags []string, data []byte) eventstore.NewEvent {
	return eventstore.NewEvent{
		ID:      crashID(appendID, i),
		Type:    crashEventType,
		Version: 1,
		Tags:    tags,
		Meta: map[string]string{
			"append": appendID,
			"n":      strconv.Itoa(n),
			"i":      strconv.Itoa(i),
			"sum":    crashSum(data),
		},
		Data: data,
	}
}

func crashStream(i int) string { return fmt.Sprintf("stream-%02d", i) }
func crashTag(i int) string    { return fmt.Sprintf("tag-%d", i) }

// ---------------------------------------------------------------------------
// The workload.

// crashSink receives what a workload writer does. In the child process it
// reports to the parent; in TestPowerLoss it records in memory.
type crashSink struct {
	acked    func(a crashAck, tookMs int64) // an append returned successfully
	conflict func()                         // an append was refused for its expected version
	retried  func()                         // a retry of an acknowledged append was recognized
	// fail reports a problem the writer found; the writer then stops (in
	// the child, fail exits).
	fail func(format string, args ...any)
	// stopped says that the store is being closed under the writer: an
	// error from then on ends the writer quietly.
	stopped func() bool
}

// crashWriter appends until it fails or is stopped: 1..20 events to a
// random stream, some tagged, some with a big event (so that a batch spans
// several WAL blocks), half of them expecting the exact version the stream
// had a moment ago.
func crashWriter(st *Store, sink crashSink, round, w int, rng *rand.Rand) {
	ctx := context.Background()
	for k := 0; ; k++ {
		appendID := fmt.Sprintf("r%d.w%d.%d", round, w, k)
		stream := crashStream(rng.IntN(crashStreams))
		n := 1 + rng.IntN(20)
		var tags []string
		if rng.IntN(3) == 0 {
			tags = append(tags, crashTag(rng.IntN(crashTags)))
			if t := crashTag(rng.IntN(crashTags)); rng.IntN(2) == 0 && t != tags[0] {
				tags = append(tags, t)
			}
		}
		events := make([]eventstore.NewEvent, n)
		for i := range events {
			size := rng.IntN(400)
			if rng.IntN(150) == 0 {
				size = 32<<10 + rng.IntN(96<<10)
			}
			data := make([]byte, size)
			for j := range data {
				data[j] = byte(rng.Uint32())
			}
			var evTags []string
			if tags != nil && rng.IntN(4) != 0 {
				evTags = tags
			}
			events[i] = crashEvent(appendID, n, i, evTags, data)
		}
		expect := eventstore.Any
		if rng.IntN(2) == 0 {
			v, err := st.StreamVersion(ctx, stream)
			if err != nil {
				if !sink.stopped() {
					sink.fail("stream version of %s: %v", stream, err)
				}
				return
			}
			expect = eventstore.Exactly(v)
			if v == 0 && rng.IntN(2) == 0 {
				expect = eventstore.NoStream
			}
		}
		began := time.Now()
		res, err := st.Append(ctx, stream, expect, events)
		took := time.Since(began).Milliseconds()
		if errors.Is(err, eventstore.ErrVersionConflict) {
			sink.conflict()
			continue
		}
		if err != nil {
			if !sink.stopped() {
				sink.fail("append %s to %s: %v", appendID, stream, err)
			}
			return
		}
		ack := crashAck{
			Append: appendID, Stream: stream, N: n, Expect: int64(expect),
			FirstSeq: res.FirstSeq, LastSeq: res.LastSeq,
			FirstPos: res.FirstPosition, LastPos: res.LastPosition,
		}
		if res.Duplicate || res.Stream != stream || res.LastSeq-res.FirstSeq+1 != uint64(n) ||
			res.LastPosition-res.FirstPosition+1 != uint64(n) || res.FirstSeq == 0 || res.FirstPosition == 0 ||
			(expect >= 0 && res.FirstSeq != uint64(expect)+1) || (expect == eventstore.NoStream && res.FirstSeq != 1) {
			sink.fail("append %s: expected %s, got result %+v", appendID, expect, res)
			return
		}
		sink.acked(ack, took)

		if rng.IntN(25) == 0 {
			// A client retry of an acknowledged append must be answered
			// from the idempotency index, before the version check.
			again, err := st.Append(ctx, stream, expect, events)
			if err != nil && sink.stopped() {
				return
			}
			want := res
			want.Duplicate = true
			if err != nil || again != want {
				sink.fail("retry of %s: got %+v, %v; want %+v", appendID, again, err, want)
				return
			}
			sink.retried()
		}
	}
}

// crashSeed is the seed the test's workload parameters come from: the
// default, or LOGBOOK_CRASH_SEED.
func crashSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(crashDefaultSeed)
	if s := os.Getenv(crashEnvSeed); s != "" {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", crashEnvSeed, s, err)
		}
		seed = v
	}
	t.Logf("seed %#x (set %s to change it)", seed, crashEnvSeed)
	return seed
}

// crashRounds is how many rounds to run: def, 3 in short mode, or
// LOGBOOK_CRASH_ROUNDS for soak runs.
func crashRounds(t *testing.T, def int) int {
	t.Helper()
	rounds := def
	if testing.Short() {
		t.Log("short mode: 3 rounds")
		rounds = 3
	}
	if s := os.Getenv(crashEnvRounds); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("%s=%q: want a positive number", crashEnvRounds, s)
		}
		rounds = v
	}
	return rounds
}

// ---------------------------------------------------------------------------
// The child.

// TestCrashChild is not a test: it is the child process TestCrash starts
// and kills. Run directly, it skips.
func TestCrashChild(t *testing.T) {
	out := crashtest.Child(t)
	line := func(prefix string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			out.Fail("marshal: %v", err)
		}
		out.Printf("%s %s", prefix, b)
	}
	dir := os.Getenv(crashEnvDir)
	seed, err1 := strconv.ParseUint(os.Getenv(crashEnvChild), 10, 64)
	writers, err2 := strconv.Atoi(os.Getenv(crashEnvWriters))
	round, err3 := strconv.Atoi(os.Getenv(crashEnvRound))
	if err := errors.Join(err1, err2, err3); err != nil {
		out.Fail("bad environment: %v", err)
	}

	st, err := Open(dir, Options{}) // production settings: fsync on
	if err != nil {
		out.Fail("open: %v", err)
	}
	head, err := st.Head(context.Background())
	if err != nil {
		out.Fail("head: %v", err)
	}
	line("READY", map[string]uint64{"head": head})

	var mu sync.Mutex
	var stat crashStat
	sink := crashSink{
		acked: func(a crashAck, took int64) {
			line("ACK", a) // reported before it is counted
			mu.Lock()
			stat.Acks++
			stat.Events += uint64(a.N)
			stat.MaxWait = max(stat.MaxWait, took)
			mu.Unlock()
		},
		conflict: func() { mu.Lock(); stat.Conflicts++; mu.Unlock() },
		retried:  func() { mu.Lock(); stat.Retries++; mu.Unlock() },
		fail:     out.Fail,
		stopped:  func() bool { return false },
	}
	for w := 0; w < writers; w++ {
		go crashWriter(st, sink, round, w, rand.New(rand.NewPCG(seed, uint64(w)+1)))
	}
	for range time.Tick(20 * time.Millisecond) {
		mu.Lock()
		s := stat
		mu.Unlock()
		s.Fsyncs = st.Fsyncs()
		line("STAT", s)
	}
}

// ---------------------------------------------------------------------------
// The parent.

type crashRound struct {
	round   int
	writers int
	early   bool          // kill while the child starts up, not under load
	delay   time.Duration // from the first ack (from the start if early)
}

type crashChildResult struct {
	ready   bool
	acks    []crashAck
	stat    crashStat
	errs    []string
	partial string // the cut-off last line, if any
	loaded  time.Duration
}

func TestCrash(t *testing.T) {
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	rounds := crashRounds(t, 10)
	dir := t.TempDir()
	acked := make(map[string]crashAck) // every acknowledged append, all rounds
	start := time.Now()
	for r := 0; r < rounds; r++ {
		cr := crashRound{round: r, writers: []int{64, 4, 128, 16}[r%4], early: r%5 == 4}
		if cr.early {
			cr.delay = time.Duration(rng.IntN(150)) * time.Millisecond
		} else {
			cr.delay = time.Duration(50+rng.IntN(351)) * time.Millisecond
		}
		res := runCrashChild(t, dir, seed*1000+uint64(r), cr)
		if t.Failed() {
			t.Fatalf("round %d failed (seed %#x)", r, seed)
		}
		ackedEvents := 0
		for _, a := range res.acks {
			if _, dup := acked[a.Append]; dup {
				t.Fatalf("round %d: append %s acknowledged twice", r, a.Append)
			}
			acked[a.Append] = a
			ackedEvents += a.N
		}

		vstart := time.Now()
		st, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("round %d: reopen after kill: %v", r, err)
		}
		sum := verifyCrashStore(t, st, acked)
		unacked := 0
		for id := range sum.appends {
			if _, ok := acked[id]; !ok && strings.HasPrefix(id, fmt.Sprintf("r%d.", r)) {
				unacked++ // committed, but killed before it was acknowledged
			}
		}
		if !t.Failed() {
			crashAppendAfterReopen(t, st, rng, r, res.acks, acked)
		}
		if err := st.Close(); err != nil {
			t.Errorf("round %d: close: %v", r, err)
		}
		mode := "under load"
		if cr.early {
			mode = fmt.Sprintf("at startup (ready=%v)", res.ready)
		}
		perSync := 0.0
		if res.stat.Fsyncs > 0 {
			perSync = float64(res.stat.Acks) / float64(res.stat.Fsyncs)
		}
		t.Logf("round %d: %3d writers, killed %s after %v (%v of appending): %d appends / %d events acknowledged, "+
			"%d more committed unacknowledged, %d conflicts, %d retries, ~%.1f appends/fsync, slowest append %dms; store now %d events in %d appends; verified in %v",
			r, cr.writers, mode, cr.delay, res.loaded.Round(time.Millisecond), len(res.acks), ackedEvents,
			unacked, res.stat.Conflicts, res.stat.Retries, perSync, res.stat.MaxWait, sum.events, len(sum.appends), time.Since(vstart).Round(time.Millisecond))
		if res.partial != "" {
			t.Logf("round %d: ignored a cut-off last line of %d bytes", r, len(res.partial))
		}
		if t.Failed() {
			t.Fatalf("round %d failed (seed %#x)", r, seed)
		}
	}
	t.Logf("%d rounds in %v, %d acknowledged appends in total", rounds, time.Since(start).Round(time.Millisecond), len(acked))
}

// runCrashChild starts the child on dir, lets it run, kills it with
// SIGKILL and returns what it acknowledged.
func runCrashChild(t *testing.T, dir string, seed uint64, cr crashRound) crashChildResult {
	t.Helper()
	var res crashChildResult
	var firstAckAt time.Time
	child := crashtest.Start(t, crashtest.Spec{
		Test: "TestCrashChild",
		Env: []string{
			crashEnvDir + "=" + dir,
			crashEnvChild + "=" + strconv.FormatUint(seed, 10),
			crashEnvWriters + "=" + strconv.Itoa(cr.writers),
			crashEnvRound + "=" + strconv.Itoa(cr.round),
		},
		Line: func(line string) {
			kind, body, _ := strings.Cut(line, " ")
			switch kind {
			case "READY":
				res.ready = true
			case "ACK":
				var a crashAck
				if err := json.Unmarshal([]byte(body), &a); err != nil {
					res.errs = append(res.errs, fmt.Sprintf("bad ack line %q: %v", line, err))
					return
				}
				if len(res.acks) == 0 {
					firstAckAt = time.Now()
				}
				res.acks = append(res.acks, a)
			case "STAT":
				_ = json.Unmarshal([]byte(body), &res.stat)
			}
		},
	})

	const patience = 30 * time.Second
	if cr.early {
		time.Sleep(cr.delay)
	} else if child.WaitFor("READY", patience) && child.WaitFor("ACK", patience) {
		time.Sleep(cr.delay)
	}
	killAt := time.Now()
	out := child.Kill() // Line is called no more: res is ours
	res.partial = out.Partial
	if !firstAckAt.IsZero() {
		res.loaded = killAt.Sub(firstAckAt)
	}
	for _, e := range res.errs {
		t.Errorf("round %d: %s", cr.round, e)
	}
	if !cr.early && len(res.acks) == 0 && !t.Failed() {
		t.Errorf("round %d: child acknowledged nothing; stderr:\n%s", cr.round, out.Stderr)
	}
	return res
}

// ---------------------------------------------------------------------------
// A power loss, in this process.

// TestPowerLoss runs TestCrash's workload in this process on a file system
// that simulates a power loss. At a random moment under load it takes the
// disk as the machine would find it after losing power — the data last
// synced, and in some rounds part of what was written since — and opens
// the store on that copy: every append acknowledged before that moment
// must be there, in its place, and the head must be at least the head
// readers were shown. A SIGKILL cannot test this, because the operating
// system's page cache survives the kill; this test fails if appends are
// acknowledged before they are synced (as they are with Options.NoSync).
func TestPowerLoss(t *testing.T) {
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x9041))
	rounds := crashRounds(t, 8)
	const dir = "/store"
	fs := crashtest.NewFS()
	st, err := Open(dir, Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	acked := make(map[string]crashAck) // every append acknowledged before a crash
	for r := 0; r < rounds; r++ {
		writers := []int{8, 1, 32, 4}[r%4]
		keep := []int{0, 50}[r%2] // percent of the unsynced data that survives
		delay := time.Duration(10+rng.IntN(150)) * time.Millisecond

		var mu sync.Mutex
		var acks []crashAck
		var stop atomic.Bool
		var wg sync.WaitGroup
		sink := crashSink{
			acked:    func(a crashAck, _ int64) { mu.Lock(); acks = append(acks, a); mu.Unlock() },
			conflict: func() {},
			retried:  func() {},
			fail:     func(format string, args ...any) { t.Errorf("round %d: "+format, append([]any{r}, args...)...) },
			stopped:  stop.Load,
		}
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				crashWriter(st, sink, r, w, rand.New(rand.NewPCG(seed*1000+uint64(r), uint64(w)+1)))
			}()
		}
		time.Sleep(delay)

		// The power fails: what was acknowledged and shown before this
		// moment must survive it.
		mu.Lock()
		before := slices.Clone(acks)
		shown, err := st.Head(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		crashed := fs.Crash(keep, rng)
		mu.Unlock()
		stop.Store(true)
		if err := st.Close(); err != nil {
			t.Errorf("round %d: close: %v", r, err)
		}
		wg.Wait()
		if t.Failed() {
			t.Fatalf("round %d failed (seed %#x)", r, seed)
		}
		for _, a := range before {
			if _, dup := acked[a.Append]; dup {
				t.Fatalf("round %d: append %s acknowledged twice", r, a.Append)
			}
			acked[a.Append] = a
		}

		fs = crashed
		st, err = Open(dir, Options{FS: fs})
		if err != nil {
			t.Fatalf("round %d: open after the power loss: %v", r, err)
		}
		sum := verifyCrashStore(t, st, acked)
		if head, err := st.Head(context.Background()); err != nil || head < shown {
			t.Errorf("round %d: head %d after the power loss (%v); before it, readers were shown %d", r, head, err, shown)
		}
		if !t.Failed() {
			crashAppendAfterReopen(t, st, rng, r, before, acked)
		}
		t.Logf("round %d: %2d writers, power lost after %v keeping %d%% of unsynced blocks: %d appends acknowledged before, head %d shown; store now %d events in %d appends",
			r, writers, delay, keep, len(before), shown, sum.events, len(sum.appends))
		if t.Failed() {
			t.Fatalf("round %d failed (seed %#x)", r, seed)
		}
	}
	if err := st.Close(); err != nil {
		t.Error(err)
	}
}

type crashStoredAppend struct {
	stream             string
	n, count           int
	firstSeq, firstPos uint64
}

type crashSummary struct {
	events  int
	appends map[string]*crashStoredAppend
}

// verifyCrashStore reads the whole store through its API and its raw keys
// and checks it against the acknowledged appends and the invariants.
func verifyCrashStore(t *testing.T, st *Store, acked map[string]crashAck) crashSummary {
	t.Helper()
	ctx := context.Background()
	errorf := func(format string, args ...any) {
		t.Helper()
		t.Errorf("after reopen: "+format, args...)
	}
	head, err := st.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The global log: positions 1..head, nothing missing, nothing beyond.
	var all []eventstore.Event
	for from := uint64(1); ; {
		page, err := st.ReadAll(ctx, from, 0)
		if err != nil {
			t.Fatalf("read all from %d: %v", from, err)
		}
		if len(page) == 0 {
			break
		}
		all = append(all, page...)
		from = page[len(page)-1].Position + 1
	}
	if uint64(len(all)) != head {
		errorf("head is %d but ReadAll returned %d events", head, len(all))
	}

	sum := crashSummary{events: len(all), appends: make(map[string]*crashStoredAppend)}
	versions := make(map[string]uint64)
	byStream := make(map[string][]uint64)
	byTag := make(map[string][]uint64)
	ids := make(map[eventstore.ID]uint64)
	for k, ev := range all {
		if ev.Position != uint64(k+1) {
			errorf("ReadAll event %d has position %d: global log has a gap", k, ev.Position)
			return sum
		}
		if ev.Seq != versions[ev.Stream]+1 {
			errorf("position %d: stream %s seq %d follows seq %d: stream has a gap or is out of position order",
				ev.Position, ev.Stream, ev.Seq, versions[ev.Stream])
		}
		versions[ev.Stream] = ev.Seq
		byStream[ev.Stream] = append(byStream[ev.Stream], ev.Position)
		for _, tag := range ev.Tags {
			byTag[tag] = append(byTag[tag], ev.Position)
		}
		if p, dup := ids[ev.ID]; dup {
			errorf("event id %s stored at positions %d and %d", ev.ID, p, ev.Position)
		}
		ids[ev.ID] = ev.Position

		appendID := ev.Meta["append"]
		n, err1 := strconv.Atoi(ev.Meta["n"])
		i, err2 := strconv.Atoi(ev.Meta["i"])
		if appendID == "" || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n || ev.Type != crashEventType {
			errorf("position %d: not an event of this test: type %q meta %v", ev.Position, ev.Type, ev.Meta)
			continue
		}
		if ev.ID != crashID(appendID, i) {
			errorf("position %d (%s #%d): id %s, want %s", ev.Position, appendID, i, ev.ID, crashID(appendID, i))
		}
		if got := crashSum(ev.Data); got != ev.Meta["sum"] {
			errorf("position %d (%s #%d): data of %d bytes has checksum %s, want %s", ev.Position, appendID, i, len(ev.Data), got, ev.Meta["sum"])
		}
		a := sum.appends[appendID]
		if a == nil {
			a = &crashStoredAppend{stream: ev.Stream, n: n, firstSeq: ev.Seq - uint64(i), firstPos: ev.Position - uint64(i)}
			sum.appends[appendID] = a
		}
		// Each event at its place relative to the append's first: the
		// append is contiguous in its stream and in the global log, and
		// no index repeats (the ids are unique).
		if ev.Stream != a.stream || n != a.n || ev.Seq != a.firstSeq+uint64(i) || ev.Position != a.firstPos+uint64(i) {
			errorf("append %s is not contiguous: event #%d at %s seq %d position %d, append starts at %s seq %d position %d (n %d/%d)",
				appendID, i, ev.Stream, ev.Seq, ev.Position, a.stream, a.firstSeq, a.firstPos, n, a.n)
		}
		a.count++
	}
	for id, a := range sum.appends {
		if a.count != a.n {
			errorf("half-written append %s: %d of its %d events stored (stream %s from seq %d)", id, a.count, a.n, a.stream, a.firstSeq)
		}
	}

	// Every acknowledged append, exactly where it was acknowledged.
	lost := 0
	for id, ack := range acked {
		a := sum.appends[id]
		if a == nil {
			if lost++; lost <= 10 {
				errorf("acknowledged append %s (%s seq %d..%d, positions %d..%d) is lost", id, ack.Stream, ack.FirstSeq, ack.LastSeq, ack.FirstPos, ack.LastPos)
			}
			continue
		}
		if a.stream != ack.Stream || a.n != ack.N || a.firstSeq != ack.FirstSeq || a.firstSeq+uint64(a.n)-1 != ack.LastSeq ||
			a.firstPos != ack.FirstPos || a.firstPos+uint64(a.n)-1 != ack.LastPos {
			errorf("acknowledged append %s as %+v, but stored in %s seq %d.. position %d.. (%d events)", id, ack, a.stream, a.firstSeq, a.firstPos, a.n)
		}
		if ack.Expect >= 0 && ack.FirstSeq != uint64(ack.Expect)+1 {
			errorf("append %s expected version %d but starts at seq %d", id, ack.Expect, ack.FirstSeq)
		}
	}
	if lost > 10 {
		errorf("%d acknowledged appends lost in all", lost)
	}

	// The stream index agrees with the log.
	var streams []string
	for after := ""; ; {
		page, err := st.ListStreams(ctx, after, 0)
		if err != nil {
			t.Fatalf("list streams: %v", err)
		}
		if len(page) == 0 {
			break
		}
		streams = append(streams, page...)
		after = page[len(page)-1]
	}
	wantStreams := make([]string, 0, len(versions))
	for s := range versions {
		wantStreams = append(wantStreams, s)
	}
	slices.Sort(wantStreams)
	if !slices.Equal(streams, wantStreams) {
		errorf("ListStreams = %v, the log has %v", streams, wantStreams)
	}
	for _, s := range wantStreams {
		v, err := st.StreamVersion(ctx, s)
		if err != nil || v != versions[s] {
			errorf("StreamVersion(%s) = %d, %v; the log has %d events of it", s, v, err, versions[s])
		}
		var got []uint64
		for from := uint64(1); ; {
			page, err := st.ReadStream(ctx, s, from, 0)
			if err != nil {
				t.Fatalf("read stream %s: %v", s, err)
			}
			if len(page) == 0 {
				break
			}
			for _, ev := range page {
				if ev.Stream != s || ev.Seq != from || ev.Position == 0 || ev.Position > head || all[ev.Position-1].ID != ev.ID {
					errorf("ReadStream(%s) returned seq %d (want %d) at position %d, not the log's event", s, ev.Seq, from, ev.Position)
				}
				got = append(got, ev.Position)
				from = ev.Seq + 1
			}
		}
		if !slices.Equal(got, byStream[s]) {
			errorf("ReadStream(%s) has %d events at %v..., the log %d", s, len(got), got[:min(5, len(got))], len(byStream[s]))
		}
		back, err := st.ReadStreamBackward(ctx, s, 0, 3)
		if err != nil || len(back) == 0 || back[0].Seq != versions[s] || back[0].Position != byStream[s][len(byStream[s])-1] {
			errorf("ReadStreamBackward(%s) does not start at the stream's last event: %d events, %v", s, len(back), err)
		}
	}

	// The tag index agrees with the log.
	for k := 0; k < crashTags; k++ {
		tag := crashTag(k)
		var got []uint64
		for from := uint64(1); ; {
			page, err := st.ReadTag(ctx, tag, from, 0)
			if err != nil {
				t.Fatalf("read tag %s: %v", tag, err)
			}
			if len(page) == 0 {
				break
			}
			for _, ev := range page {
				got = append(got, ev.Position)
			}
			from = page[len(page)-1].Position + 1
		}
		if !slices.Equal(got, byTag[tag]) {
			errorf("ReadTag(%s) returned %d events, the log has %d with the tag", tag, len(got), len(byTag[tag]))
		}
	}

	verifyCrashKeys(t, st, all, head)
	return sum
}

// verifyCrashKeys scans every key in the database: no index entry may
// exist without its event (nor the other way round), so that nothing of an
// unfinished append is left behind even where no read path looks.
func verifyCrashKeys(t *testing.T, st *Store, all []eventstore.Event, head uint64) {
	t.Helper()
	iter, err := st.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer iter.Close()
	var nEvents, nStream, nTag, wantTags uint64
	for _, ev := range all {
		wantTags += uint64(len(ev.Tags))
	}
	event := func(pos uint64) *eventstore.Event {
		if pos == 0 || pos > uint64(len(all)) {
			return nil
		}
		return &all[pos-1]
	}
	bad := 0
	errorf := func(format string, args ...any) {
		t.Helper()
		if bad++; bad <= 10 {
			t.Errorf("raw keys after reopen: "+format, args...)
		}
	}
	for ok := iter.First(); ok; ok = iter.Next() {
		k, v := iter.Key(), iter.Value()
		switch k[0] {
		case prefixEvent:
			nEvents++
			if len(k) != 9 || be64(k[1:]) > head {
				errorf("event key %x beyond head %d", k, head)
			}
		case prefixStream:
			nStream++
			if len(k) < 11 || k[len(k)-9] != 0 || len(v) != 8 {
				errorf("malformed stream index entry %x -> %x", k, v)
				continue
			}
			stream, seq, pos := string(k[1:len(k)-9]), be64(k[len(k)-8:]), be64(v)
			if ev := event(pos); ev == nil || ev.Stream != stream || ev.Seq != seq {
				errorf("stream index %s seq %d -> position %d, which holds no such event", stream, seq, pos)
			}
		case prefixTag:
			nTag++
			if len(k) < 11 || k[len(k)-9] != 0 {
				errorf("malformed tag index entry %x", k)
				continue
			}
			tag, pos := string(k[1:len(k)-9]), be64(k[len(k)-8:])
			if ev := event(pos); ev == nil || !slices.Contains(ev.Tags, tag) {
				errorf("tag index %s -> position %d, whose event lacks the tag", tag, pos)
			}
		case prefixMeta:
			if !bytes.Equal(k, formatKey) {
				errorf("unknown meta key %q", k)
			}
		default:
			errorf("unknown key %x", k)
		}
	}
	if err := iter.Error(); err != nil {
		t.Errorf("scan: %v", err)
	}
	if nEvents != head || nStream != head || nTag != wantTags {
		t.Errorf("raw keys after reopen: %d events, %d stream index, %d tag index entries; want %d, %d, %d",
			nEvents, nStream, nTag, head, head, wantTags)
	}
}

// crashAppendAfterReopen checks that the reopened store still knows a
// pre-crash append (a retry is a duplicate) and accepts a new one right
// after the recovered head.
func crashAppendAfterReopen(t *testing.T, st *Store, rng *rand.Rand, round int, acks []crashAck, acked map[string]crashAck) {
	t.Helper()
	ctx := context.Background()
	if len(acks) > 0 {
		ack := acks[rng.IntN(len(acks))]
		stored, err := st.ReadStream(ctx, ack.Stream, ack.FirstSeq, ack.N)
		if err != nil || len(stored) != ack.N {
			t.Fatalf("round %d: reading back %s: %d events, %v", round, ack.Append, len(stored), err)
		}
		retry := make([]eventstore.NewEvent, len(stored))
		for i, ev := range stored {
			retry[i] = eventstore.NewEvent{ID: ev.ID, Type: ev.Type, Version: ev.Version, Tags: ev.Tags, Meta: ev.Meta, Data: ev.Data}
		}
		res, err := st.Append(ctx, ack.Stream, eventstore.Any, retry)
		want := eventstore.AppendResult{Stream: ack.Stream, FirstSeq: ack.FirstSeq, LastSeq: ack.LastSeq,
			FirstPosition: ack.FirstPos, LastPosition: ack.LastPos, Duplicate: true}
		if err != nil || res != want {
			t.Errorf("round %d: retry of acknowledged %s after reopen: %+v, %v; want %+v", round, ack.Append, res, err, want)
		}
	}

	head, err := st.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream := crashStream(rng.IntN(crashStreams))
	v, err := st.StreamVersion(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	appendID := fmt.Sprintf("p%d", round)
	const n = 3
	events := make([]eventstore.NewEvent, n)
	for i := range events {
		events[i] = crashEvent(appendID, n, i, []string{crashTag(i)}, []byte(fmt.Sprintf("after crash %d, event %d", round, i)))
	}
	res, err := st.Append(ctx, stream, eventstore.Exactly(v), events)
	want := eventstore.AppendResult{Stream: stream, FirstSeq: v + 1, LastSeq: v + n, FirstPosition: head + 1, LastPosition: head + n}
	if err != nil || res != want {
		t.Fatalf("round %d: append after reopen: %+v, %v; want %+v", round, res, err, want)
	}
	got, err := st.ReadAll(ctx, head+1, 0)
	if err != nil || len(got) != n {
		t.Fatalf("round %d: reading back the append after reopen: %d events, %v", round, len(got), err)
	}
	for i, ev := range got {
		if ev.ID != events[i].ID || ev.Stream != stream || ev.Seq != v+1+uint64(i) || ev.Meta["append"] != appendID {
			t.Errorf("round %d: append after reopen read back as %+v", round, ev)
		}
	}
	if h, _ := st.Head(ctx); h != head+n {
		t.Errorf("round %d: head %d after appending %d events at %d", round, h, n, head)
	}
	acked[appendID] = crashAck{Append: appendID, Stream: stream, N: n, Expect: int64(v),
		FirstSeq: res.FirstSeq, LastSeq: res.LastSeq, FirstPos: res.FirstPosition, LastPos: res.LastPosition}
}
