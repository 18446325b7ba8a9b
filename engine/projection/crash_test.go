//go:build unix

package projection_test

// Crash test: a child process runs a durable view over a pre-filled store,
// while it also appends, and is killed with SIGKILL at random moments,
// again and again, against the same store and view directories. After each
// kill the parent opens both and checks that the view holds the exactly-
// once effect of the log: for the atomic PebbleView, exactly the log up to
// its checkpoint; for the document view with a Dedup filter, each stream's
// document exactly its stream's first events, none behind the checkpoint.
// At the end, a runner in the parent catches the view up and it must equal
// the whole log.
//
// The child is this test binary, re-executed by the crashtest harness to
// run TestCrashChild with the crashEnv* variables set. It sleeps in the middle of each batch,
// so that most kills land inside one. Its stdout lines tell the parent how
// far it got ("B <position> <dropped>"); a line cut short by the kill has
// no newline and is ignored.

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/projection"
	"github.com/logbook/logbook/internal/crashtest"
)

const (
	crashEnvSeed   = "LOGBOOK_PROJECTION_CRASH_SEED"   // parent: overrides the default seed
	crashEnvRounds = "LOGBOOK_PROJECTION_CRASH_ROUNDS" // parent: overrides the number of rounds
	crashEnvMode   = "LOGBOOK_PROJECTION_CRASH_CHILD_MODE"
	crashEnvStore  = "LOGBOOK_PROJECTION_CRASH_CHILD_STORE"
	crashEnvView   = "LOGBOOK_PROJECTION_CRASH_CHILD_VIEW"
	crashEnvChild  = "LOGBOOK_PROJECTION_CRASH_CHILD_SEED"

	crashDefaultSeed = 0x5ca1ab1e
	crashStreams     = 40
	crashPrefill     = 12_000
	crashCPEvery     = 3 // the document view writes its checkpoint every 3 batches
)

func TestCrash(t *testing.T) {
	for _, mode := range []string{"atomic", "dedup"} {
		t.Run(mode, func(t *testing.T) { crashMode(t, mode) })
	}
}

func crashMode(t *testing.T, mode string) {
	seed := uint64(crashDefaultSeed)
	if s := os.Getenv(crashEnvSeed); s != "" {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", crashEnvSeed, s, err)
		}
		seed = v
	}
	t.Logf("seed %#x (set %s to change it)", seed, crashEnvSeed)
	rng := rand.New(rand.NewPCG(seed, uint64(len(mode))))
	rounds := 6
	if testing.Short() {
		rounds = 3
	}
	if s := os.Getenv(crashEnvRounds); s != "" { // for soak runs
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("%s=%q: want a positive number", crashEnvRounds, s)
		}
		rounds = v
	}

	storeDir, viewDir := t.TempDir(), t.TempDir()
	st, err := pebblestore.Open(storeDir, pebblestore.Options{NoSync: true}) // a clean Close makes it durable
	if err != nil {
		t.Fatal(err)
	}
	fill(t, st, crashStreams, crashPrefill, nil)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	dropped, midway := 0, 0
	for r := 0; r < rounds; r++ {
		// The kill comes after a number of batches rather than a time, so
		// that a loaded machine (CI runs packages side by side under
		// -race) still kills part way: some before the view's first
		// checkpoint of the round, most after one or more.
		after := 1 + rng.IntN(3*crashCPEvery)
		delay := time.Duration(rng.IntN(20)) * time.Millisecond
		res := runProjectionChild(t, mode, storeDir, viewDir, seed*100+uint64(r), after, delay)
		if t.Failed() {
			return
		}
		dropped += res.dropped
		cp, head := verifyCrashView(t, mode, storeDir, viewDir, false)
		if t.Failed() {
			t.Fatalf("round %d failed (seed %#x)", r, seed)
		}
		if cp > 0 && cp < head {
			midway++
		}
		t.Logf("round %d: killed %v after batch %d, at batch ending %d (%d batches seen); view at %d of %d after restart",
			r, delay, after, res.last, res.batches, cp, head)
	}
	cp, head := verifyCrashView(t, mode, storeDir, viewDir, true)
	t.Logf("%d rounds in %v; %d kills left the view between 0 and the head; caught up from %d to %d",
		rounds, time.Since(start).Round(time.Millisecond), midway, cp, head)
	if mode == "dedup" {
		t.Logf("the filter dropped %d replayed events", dropped)
	}
	if midway == 0 {
		t.Error("no kill left the view part way: the test exercised nothing")
	}
	if mode == "dedup" && dropped == 0 && rounds > 3 {
		t.Error("no replayed event was dropped: the kills never left the checkpoint behind the documents")
	}
}

type projectionChildResult struct {
	batches int
	last    uint64
	dropped int
}

// runProjectionChild starts the child, kills it delay after it reported
// its batch number after (or after 10 s, if it ends sooner) and returns
// what it reported.
func runProjectionChild(t *testing.T, mode, storeDir, viewDir string, seed uint64, after int, delay time.Duration) projectionChildResult {
	t.Helper()
	var res projectionChildResult
	reached := make(chan struct{})
	child := crashtest.Start(t, crashtest.Spec{
		Test: "TestCrashChild",
		Env: []string{
			crashEnvMode + "=" + mode,
			crashEnvStore + "=" + storeDir,
			crashEnvView + "=" + viewDir,
			crashEnvChild + "=" + strconv.FormatUint(seed, 10),
		},
		Line: func(line string) {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "B" {
				res.batches++
				res.last, _ = strconv.ParseUint(f[1], 10, 64)
				res.dropped, _ = strconv.Atoi(f[2])
				if res.batches == after {
					close(reached)
				}
			}
		},
	})
	if child.WaitFor("READY", 30*time.Second) {
		select {
		case <-reached:
		case <-time.After(10 * time.Second):
		}
		time.Sleep(delay)
	}
	child.Kill() // Line is called no more: res is ours
	return res
}

// verifyCrashView opens the store and the view after a kill and checks the
// view against the log; with catchUp it first runs the view to the head.
// It returns the view's checkpoint and the log's head.
func verifyCrashView(t *testing.T, mode, storeDir, viewDir string, catchUp bool) (uint64, uint64) {
	t.Helper()
	ctx := ctxTimeout(t)
	st, err := pebblestore.Open(storeDir, pebblestore.Options{})
	if err != nil {
		t.Fatalf("reopen store: %v", err)
	}
	defer st.Close()
	var view interface {
		projection.View
		io.Closer
	}
	if mode == "atomic" {
		view, err = projection.OpenPebbleView(viewDir, projection.PebbleOptions{}, updateTally)
	} else {
		view, err = openDocView(viewDir, crashCPEvery)
	}
	if err != nil {
		t.Fatalf("reopen view: %v", err)
	}
	defer view.Close()
	cp, err := view.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if catchUp {
		r := projection.NewRunner(st, view, projection.Options{})
		stop := running(t, r)
		if err := r.WaitCaughtUp(ctx); err != nil {
			t.Fatalf("catch up: %v", err)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
	head, err := st.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if mode == "atomic" {
		got, pos := readPebbleTally(t, view.(*projection.PebbleView))
		if pos > head {
			t.Errorf("view at %d, beyond the log's head %d", pos, head)
		}
		if catchUp && pos != head {
			t.Errorf("view at %d after catching up to %d", pos, head)
		}
		if want := expected(t, st, pos, ""); !maps.Equal(got, want) {
			t.Errorf("view at %d holds %v; the log up to there is %v", pos, got, want)
		}
		return cp, head
	}
	dv := view.(*docView)
	docs, err := dv.docs()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkDocs(st, docs, dv.cp, catchUp); err != nil {
		t.Errorf("documents at checkpoint %d: %v", dv.cp, err)
	}
	if dv.cp > head {
		t.Errorf("checkpoint %d beyond the log's head %d", dv.cp, head)
	}
	return cp, head
}

// TestCrashChild is not a test: it is the helper process TestCrash starts
// and kills. Run directly, it skips.
func TestCrashChild(t *testing.T) {
	out := crashtest.Child(t)
	line, fail := out.Printf, out.Fail
	mode := os.Getenv(crashEnvMode)
	seed, err := strconv.ParseUint(os.Getenv(crashEnvChild), 10, 64)
	if err != nil {
		fail("bad seed: %v", err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	var rngMu sync.Mutex
	pause := func(maxMicros int) {
		rngMu.Lock()
		d := time.Duration(rng.IntN(maxMicros)) * time.Microsecond
		rngMu.Unlock()
		time.Sleep(d)
	}

	st, err := pebblestore.Open(os.Getenv(crashEnvStore), pebblestore.Options{}) // fsync on: the view must never be ahead of the log
	if err != nil {
		fail("open store: %v", err)
	}
	var view projection.View
	dropped := func() int { return 0 }
	switch mode {
	case "atomic":
		// Sync or not, a kill may take back only whole batches.
		opts := projection.PebbleOptions{Sync: rng.IntN(2) == 0}
		view, err = projection.OpenPebbleView(os.Getenv(crashEnvView), opts, func(b *pebble.Batch, events []eventstore.Event) error {
			for i, ev := range events {
				if i == len(events)/2 {
					pause(3000) // in the middle of the batch
				}
				if err := addToKey(b, "t/"+ev.Stream, ev); err != nil {
					return err
				}
			}
			return nil
		})
	case "dedup":
		var dv *docView
		dv, err = openDocView(os.Getenv(crashEnvView), crashCPEvery)
		if dv != nil {
			dv.pause = func() { pause(400) }
			dv.write = pebble.Sync
			dropped = func() int { return dv.dropped }
		}
		view = dv
	default:
		fail("unknown mode %q", mode)
	}
	if err != nil {
		fail("open view: %v", err)
	}
	reporting := &reportingView{View: view, report: func(last uint64) { line("B %d %d", last, dropped()) }}

	// Keep the log growing while the view follows it.
	go func() {
		ctx := context.Background()
		for i := 0; ; i++ {
			rngMu.Lock()
			stream := fmt.Sprintf("s-%d", rng.IntN(crashStreams))
			n := 1 + rng.IntN(5)
			rngMu.Unlock()
			evs := make([]eventstore.NewEvent, n)
			for j := range evs {
				evs[j] = eventstore.NewEvent{Type: "value", Data: []byte(strconv.Itoa(1 + (i*31+j)%997))}
			}
			if _, err := st.Append(ctx, stream, eventstore.Any, evs); err != nil {
				fail("append: %v", err)
			}
		}
	}()
	maxBatch := []int{17, 100, 512, 1024}[rng.IntN(4)]
	line("READY")
	r := projection.NewRunner(st, reporting, projection.Options{Name: "crash", MaxBatch: maxBatch})
	if err := r.Run(context.Background()); err != nil {
		fail("run: %v", err)
	}
}

// reportingView reports the end of each batch it applied.
type reportingView struct {
	projection.View
	report func(last uint64)
}

func (v *reportingView) Apply(ctx context.Context, batch []eventstore.Event) error {
	if err := v.View.Apply(ctx, batch); err != nil {
		return err
	}
	v.report(batch[len(batch)-1].Position)
	return nil
}
