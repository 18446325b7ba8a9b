//go:build unix

package window

// Crash test: a child process (this test binary, re-executed) catches an
// aggregation up from a pre-filled store and is killed with SIGKILL at a
// random moment, mostly inside a batch (Extract sleeps now and then).
// After each kill the parent reopens the aggregation and checks that every
// window of every level equals a recomputation from the raw events up to
// the aggregation's checkpoint — nothing counted twice, nothing missed —
// then the next child resumes from there. At the end a runner in the
// parent catches up and the windows must equal the whole log's.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/projection"
	"github.com/logbook/logbook/internal/crashtest"
)

const (
	crashEnvStore = "LOGBOOK_WINDOW_CRASH_STORE"
	crashEnvAgg   = "LOGBOOK_WINDOW_CRASH_AGG"
	crashEnvSeed  = "LOGBOOK_WINDOW_CRASH_SEED"
)

func crashDef() Definition {
	return testDef("crash", Tumbling(time.Minute), 2*time.Minute, time.Hour, 24*time.Hour)
}

func TestCrash(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	storeDir, aggDir := t.TempDir(), t.TempDir()
	st, err := pebblestore.Open(storeDir, pebblestore.Options{NoSync: true}) // a clean Close makes it durable
	if err != nil {
		t.Fatal(err)
	}
	var evs []tev
	clock := at("2024-02-28T23:30:00Z").UnixNano()
	for range 15_000 {
		clock += int64(rng.IntN(int(time.Second)))
		ts := clock
		if rng.IntN(20) == 0 {
			ts -= int64(rng.IntN(int(5 * time.Minute))) // within grace or late
		}
		evs = append(evs, tev{T: ts, Sender: fmt.Sprintf("s%d", rng.IntN(5)), Kind: fmt.Sprintf("k%d", rng.IntN(3)),
			V: float64(rng.IntN(1000)), User: fmt.Sprintf("u%d", rng.IntN(50))})
	}
	appendEvents(t, st, evs)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	midway := 0
	rounds := 5
	for r := range rounds {
		delay := time.Duration(rng.IntN(300)) * time.Millisecond
		runCrashChild(t, storeDir, aggDir, seed+uint64(r), delay)
		cp, head := verifyCrash(t, storeDir, aggDir, false)
		if t.Failed() {
			t.Fatalf("round %d (seed %d)", r, seed)
		}
		if cp > 0 && cp < head {
			midway++
		}
		t.Logf("round %d: killed %v after start; aggregation at %d of %d", r, delay, cp, head)
	}
	verifyCrash(t, storeDir, aggDir, true)
	if midway == 0 {
		t.Error("no kill left the aggregation part way: the test exercised nothing")
	}
}

func runCrashChild(t *testing.T, storeDir, aggDir string, seed uint64, delay time.Duration) {
	t.Helper()
	child := crashtest.Start(t, crashtest.Spec{
		Test: "TestCrashChild",
		Env:  []string{crashEnvStore + "=" + storeDir, crashEnvAgg + "=" + aggDir, crashEnvSeed + "=" + strconv.FormatUint(seed, 10)},
	})
	if !child.WaitFor("READY", 30*time.Second) {
		t.Fatal("child not ready after 30 s")
	}
	time.Sleep(delay)
	child.Kill()
}

// verifyCrash compares every window of every level with the model of the
// log up to the aggregation's checkpoint; with catchUp, after running the
// aggregation to the head.
func verifyCrash(t *testing.T, storeDir, aggDir string, catchUpFirst bool) (uint64, uint64) {
	t.Helper()
	ctx := testCtx(t)
	st, err := pebblestore.Open(storeDir, pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	def := crashDef()
	a, err := Open(aggDir, def, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer a.Close()
	if catchUpFirst {
		catchUp(t, st, a, 256)
	}
	cp, err := a.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	head, err := st.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if catchUpFirst && cp != head {
		t.Errorf("caught up to %d of %d", cp, head)
	}
	m := newModel(def)
	for from := uint64(1); from <= cp; {
		page, err := st.ReadAll(ctx, from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			if e.Position > cp {
				break
			}
			if e.Type == "sent" {
				var x tev
				if err := json.Unmarshal(e.Data, &x); err != nil {
					t.Fatal(err)
				}
				m.add(x)
			}
			from = e.Position + 1
		}
	}
	for _, unit := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour} {
		q := Query{Unit: unit, GroupBy: []string{"sender", "kind"}}
		got, err := a.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if got.Position != cp {
			t.Errorf("answer at %d, checkpoint %d", got.Position, cp)
		}
		if g, w := show(got.Rows), show(m.query(q)); g != w {
			t.Errorf("unit %s at checkpoint %d:\ngot:\n%s\nwant:\n%s", unit, cp, g, w)
		}
	}
	return cp, head
}

// TestCrashChild is the workload TestCrash starts and kills.
func TestCrashChild(t *testing.T) {
	out := crashtest.Child(t)
	seed, _ := strconv.ParseUint(os.Getenv(crashEnvSeed), 10, 64)
	rng := rand.New(rand.NewPCG(seed, 1))
	st, err := pebblestore.Open(os.Getenv(crashEnvStore), pebblestore.Options{})
	if err != nil {
		out.Fail("open store: %v", err)
	}
	def := crashDef()
	def.Extract = func(e *eventstore.Event, r *Record) bool {
		if e.Position%97 == 0 {
			time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond) // inside a batch
		}
		return extractTest(e, r)
	}
	a, err := Open(os.Getenv(crashEnvAgg), def, Options{Sync: rng.IntN(2) == 0})
	if err != nil {
		out.Fail("open: %v", err)
	}
	out.Printf("READY")
	r := projection.NewRunner(st, a, projection.Options{Name: "crash", MaxBatch: []int{17, 100, 512}[rng.IntN(3)]})
	if err := r.Run(context.Background()); err != nil {
		out.Fail("run: %v", err)
	}
}
