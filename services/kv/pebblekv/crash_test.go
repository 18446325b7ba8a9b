package pebblekv_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/logbook/logbook/internal/crashtest"
	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/pebblekv"
)

const crashKeys = 4

// TestCrashChild is the workload TestSIGKILLDuringContendedUpdates starts
// and kills: 16 clients update counters in crashKeys keys, printing "key
// version" for every acknowledged update. Each update writes the counter
// read plus one, so a key's counter is always its version minus one.
func TestCrashChild(t *testing.T) {
	out := crashtest.Child(t)
	b, err := pebblekv.Open(os.Getenv(crashEnvDir), pebblekv.Options{})
	if err != nil {
		out.Fail("open: %v", err)
	}
	r := kv.New(b, kv.Limits{})
	ctx := context.Background()
	for k := range crashKeys {
		err := r.Add(ctx, "c/"+strconv.Itoa(k), []byte("0"))
		if err != nil && !errors.Is(err, kv.ErrExists) {
			out.Fail("add: %v", err)
		}
	}
	out.Printf("READY")
	for c := range 16 {
		go func() {
			for i := 0; ; i++ {
				id := "c/" + strconv.Itoa((c+i)%crashKeys)
				e, ok, err := r.Get(ctx, id)
				if err != nil || !ok {
					out.Fail("get %s: %v %v", id, ok, err)
				}
				n, _ := strconv.Atoi(string(e.Value))
				v, err := r.Update(ctx, id, e.Version, []byte(strconv.Itoa(n+1)))
				if errors.Is(err, kv.ErrStale) {
					continue
				}
				if err != nil {
					out.Fail("update %s: %v", id, err)
				}
				out.Printf("%s %d", id, v)
			}
		}()
	}
	select {}
}

const crashEnvDir = "LOGBOOK_PEBBLEKV_CRASH_DIR"

// TestSIGKILLDuringContendedUpdates kills a process in the middle of
// contended compare-and-sets, twice, and checks after each crash that
// every acknowledged update is there, that no version was acknowledged
// twice, and that each key's counter equals its version minus one — no
// update lost, no version skipped or reused.
func TestSIGKILLDuringContendedUpdates(t *testing.T) {
	dir := t.TempDir()
	acked := map[string]map[uint64]bool{}
	for round := range 2 {
		lines := 0
		child := crashtest.Start(t, crashtest.Spec{
			Test: "TestCrashChild",
			Env:  []string{crashEnvDir + "=" + dir},
			Line: func(line string) {
				id, vs, _ := strings.Cut(line, " ")
				v, err := strconv.ParseUint(vs, 10, 64)
				if err != nil {
					return // READY
				}
				if acked[id] == nil {
					acked[id] = map[uint64]bool{}
				}
				if acked[id][v] {
					t.Errorf("%s: version %d acknowledged twice", id, v)
				}
				acked[id][v] = true
				lines++
			},
		})
		if !child.WaitFor("READY", 30*time.Second) {
			t.Fatal("child not ready after 30 s")
		}
		time.Sleep(time.Second + time.Duration(round)*300*time.Millisecond)
		child.Kill()
		if lines < 50 {
			t.Fatalf("round %d: only %d updates acknowledged before the kill", round, lines)
		}

		b, err := pebblekv.Open(dir, pebblekv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := kv.New(b, kv.Limits{})
		total := 0
		for k := range crashKeys {
			id := "c/" + strconv.Itoa(k)
			e, ok, err := r.Get(t.Context(), id)
			if err != nil || !ok {
				t.Fatalf("%s after the kill: %v %v", id, ok, err)
			}
			if string(e.Value) != strconv.FormatUint(e.Version-1, 10) {
				t.Errorf("%s at version %d holds counter %s: an update was lost or a version skipped", id, e.Version, e.Value)
			}
			for v := range acked[id] {
				if v > e.Version {
					t.Errorf("%s: version %d was acknowledged, the store has %d", id, v, e.Version)
				}
			}
			// The store goes on from where it was.
			if nv, err := r.Update(t.Context(), id, e.Version, []byte(strconv.FormatUint(e.Version, 10))); err != nil || nv != e.Version+1 {
				t.Fatalf("%s: update after recovery: %d %v", id, nv, err)
			}
			total += len(acked[id])
		}
		t.Logf("round %d: %d updates acknowledged in all, %d this round", round, total, lines)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
