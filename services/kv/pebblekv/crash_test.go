package pebblekv_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/pebblekv"
)

const crashKeys = 4

// TestMain lets the test binary play the process that gets killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("PEBBLEKV_CRASH_CHILD"); dir != "" {
		crashChild(dir)
		return
	}
	os.Exit(m.Run())
}

// crashChild updates counters in crashKeys keys from 16 clients until it
// is killed, printing "key version" for every acknowledged update. Each
// update writes the counter read plus one, so a key's counter is always
// its version minus one.
func crashChild(dir string) {
	b, err := pebblekv.Open(dir, pebblekv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	r := kv.New(b, kv.Limits{})
	ctx := context.Background()
	for k := range crashKeys {
		err := r.Add(ctx, "c/"+strconv.Itoa(k), []byte("0"))
		if err != nil && !errors.Is(err, kv.ErrExists) {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	var mu sync.Mutex
	fmt.Println("ready")
	for c := range 16 {
		go func() {
			for i := 0; ; i++ {
				id := "c/" + strconv.Itoa((c+i)%crashKeys)
				e, ok, err := r.Get(ctx, id)
				if err != nil || !ok {
					fmt.Fprintln(os.Stderr, "get:", ok, err)
					os.Exit(1)
				}
				n, _ := strconv.Atoi(string(e.Value))
				v, err := r.Update(ctx, id, e.Version, []byte(strconv.Itoa(n+1)))
				if errors.Is(err, kv.ErrStale) {
					continue
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "update:", err)
					os.Exit(1)
				}
				mu.Lock()
				fmt.Printf("%s %d\n", id, v)
				mu.Unlock()
			}
		}()
	}
	select {}
}

// TestSIGKILLDuringContendedUpdates kills a process in the middle of
// contended compare-and-sets, twice, and checks after each crash that
// every acknowledged update is there, that no version was acknowledged
// twice, and that each key's counter equals its version minus one — no
// update lost, no version skipped or reused.
func TestSIGKILLDuringContendedUpdates(t *testing.T) {
	dir := t.TempDir()
	acked := map[string]map[uint64]bool{}
	for round := range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "PEBBLEKV_CRASH_CHILD="+dir)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		if !sc.Scan() || sc.Text() != "ready" {
			_ = cmd.Process.Kill()
			t.Fatalf("child did not start: %q", sc.Text())
		}
		lines := 0
		timer := time.AfterFunc(time.Second+time.Duration(round)*300*time.Millisecond, func() {
			_ = cmd.Process.Signal(syscall.SIGKILL)
		})
		for sc.Scan() {
			id, vs, _ := strings.Cut(sc.Text(), " ")
			v, err := strconv.ParseUint(vs, 10, 64)
			if err != nil {
				continue // a line cut by the kill
			}
			if acked[id] == nil {
				acked[id] = map[uint64]bool{}
			}
			if acked[id][v] {
				t.Errorf("%s: version %d acknowledged twice", id, v)
			}
			acked[id][v] = true
			lines++
		}
		timer.Stop()
		_ = cmd.Wait()
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
