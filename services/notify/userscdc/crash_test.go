//go:build unix

package userscdc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/logbook/logbook/internal/crashtest"
)

// countApplications makes every applied source transaction count itself
// in the view, in its own batch: key 'x' + end LSN → how many times.
func countApplications(sleep bool) {
	testHookCommit = func(b *pebble.Batch, end LSN) error {
		k := binary.BigEndian.AppendUint64([]byte{'x'}, uint64(end))
		var n uint64
		raw, closer, err := b.Get(k)
		switch {
		case err == nil:
			n = binary.BigEndian.Uint64(raw)
			_ = closer.Close()
		case !errors.Is(err, pebble.ErrNotFound):
			return err
		}
		if sleep && mrand.IntN(3) == 0 {
			time.Sleep(time.Duration(mrand.IntN(3000)) * time.Microsecond) // a kill lands mid-batch
		}
		return b.Set(k, binary.BigEndian.AppendUint64(nil, n+1), nil)
	}
}

// TestCrashChild is the workload of TestCrashRestartExactlyOnce: a
// follower in a process the test kills.
func TestCrashChild(t *testing.T) {
	out := crashtest.Child(t)
	countApplications(true)
	v, err := OpenView(os.Getenv("USERSCDC_DIR"), ViewOptions{})
	if err != nil {
		out.Fail("open view: %v", err)
	}
	cfg := Config{URL: os.Getenv("USERSCDC_URL"), Schema: os.Getenv("USERSCDC_SCHEMA"), Publication: os.Getenv("USERSCDC_PUB"),
		Slot: os.Getenv("USERSCDC_SLOT"), StatusInterval: 20 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := Start(ctx, v, cfg)
	if err != nil {
		out.Fail("start: %v", err)
	}
	out.Printf("ready %s", v.Position())
	<-f.Done()
	out.Fail("follower stopped: %v", f.Err())
}

// A follower SIGKILLed again and again while the source changes, also
// while it is down: afterwards the view equals the source, and every
// source transaction was applied exactly once (each counted itself in
// the batch that applied it).
func TestCrashRestartExactlyOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.src.Generate(ctx, Population{Users: 60, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	e.write(t, func(w *Writer) error { return w.PutUser(user(0, "c0"), 0) })
	dir := t.TempDir()
	spec := crashtest.Spec{Test: "TestCrashChild", Env: []string{
		"USERSCDC_DIR=" + dir, "USERSCDC_URL=" + e.url, "USERSCDC_SCHEMA=" + e.cfg.Schema,
		"USERSCDC_PUB=" + e.cfg.Publication, "USERSCDC_SLOT=" + e.cfg.Slot,
	}}

	p := crashtest.Start(t, spec)
	if !p.WaitFor("ready", time.Minute) {
		t.Fatal("the first child never got ready")
	}
	// Every transaction changes the counter row, so each is one the
	// follower sees.
	var written atomic.Int64
	var last atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() {
		rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 9))
		for seq := 1; ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			lsn, err := e.src.Write(ctx, func(w *Writer) error {
				if err := w.Exec(`UPDATE `+w.Table("users")+` SET name = $1 WHERE id = 0`, fmt.Sprintf("c%d", seq)); err != nil {
					return err
				}
				return randomTx(rng, w)
			})
			if err != nil {
				werr = err
				return
			}
			written.Add(1)
			last.Store(uint64(lsn))
		}
	})
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 10))
	for round := range 6 {
		if round > 0 {
			p = crashtest.Start(t, spec)
			if !p.WaitFor("ready", time.Minute) {
				t.Fatalf("child %d never got ready", round)
			}
		}
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		p.Kill()
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond) // changes while down
	}
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}

	countApplications(false)
	defer func() { testHookCommit = nil }()
	v := openView(t, dir)
	e.start(t, v)
	wait(t, v, LSN(last.Load()))
	e.same(t, v)

	var counted, twice int64
	err := func(r pebble.Reader) error {
		iter, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{'x'}, UpperBound: []byte{'y'}})
		if err != nil {
			return err
		}
		defer iter.Close()
		for ok := iter.First(); ok; ok = iter.Next() {
			counted++
			if n := binary.BigEndian.Uint64(iter.Value()); n != 1 {
				twice++
				t.Errorf("transaction ending at %s applied %d times", LSN(binary.BigEndian.Uint64(iter.Key()[1:])), n)
			}
		}
		return nil
	}(v.db)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d transactions written, %d applied, %d more than once, over 6 kills", written.Load(), counted, twice)
	if counted != written.Load() {
		t.Fatalf("%d transactions applied, %d written", counted, written.Load())
	}
}

// TestSnapshotCrashChild is the workload of TestKilledDuringSnapshot.
func TestSnapshotCrashChild(t *testing.T) {
	out := crashtest.Child(t)
	v, err := OpenView(os.Getenv("USERSCDC_DIR"), ViewOptions{})
	if err != nil {
		out.Fail("open view: %v", err)
	}
	cfg := Config{URL: os.Getenv("USERSCDC_URL"), Schema: os.Getenv("USERSCDC_SCHEMA"), Publication: os.Getenv("USERSCDC_PUB"),
		Slot: os.Getenv("USERSCDC_SLOT"), MaxBatchBytes: 256 << 10}
	serve := os.Getenv("USERSCDC_SERVE") != ""
	if serve {
		// Serve while copying, slowly enough to be killed mid-copy.
		cfg.ServeDuringCopy = true
		TestHookCopy = func(context.Context, string) { time.Sleep(20 * time.Millisecond) }
	}
	out.Printf("starting")
	ctx := context.Background()
	if _, err := Start(ctx, v, cfg); err != nil {
		out.Fail("start: %v", err)
	}
	out.Printf("ready")
	for said := false; serve; time.Sleep(time.Millisecond) {
		st, err := v.Ready()
		us, lerr := v.Users(ctx, []int64{1, 2, 3, 50_000})
		if err != nil || lerr != nil || len(us) != 4 {
			out.Fail("a lookup while serving (%s, %v): %d users, %v", st, err, len(us), lerr)
		}
		if st == "snapshot" && !said {
			out.Printf("serving-snapshot")
			said = true
		}
	}
	select {}
}

// A follower killed while it copies the snapshot leaves a view that the
// next Start empties and fills again from a new slot; also one that
// answered lookups from the source's snapshot meanwhile
// (ServeDuringCopy).
func TestKilledDuringSnapshot(t *testing.T) {
	t.Run("copying", func(t *testing.T) { testKilledDuringSnapshot(t, false) })
	t.Run("serving", func(t *testing.T) { testKilledDuringSnapshot(t, true) })
}

func testKilledDuringSnapshot(t *testing.T, serve bool) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.src.Generate(ctx, Population{Users: 100_000, Type: "like_update", Refuse: 0.1, Seed: 4}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := []string{
		"USERSCDC_DIR=" + dir, "USERSCDC_URL=" + e.url, "USERSCDC_SCHEMA=" + e.cfg.Schema,
		"USERSCDC_PUB=" + e.cfg.Publication, "USERSCDC_SLOT=" + e.cfg.Slot,
	}
	if serve {
		env = append(env, "USERSCDC_SERVE=1")
	}
	p := crashtest.Start(t, crashtest.Spec{Test: "TestSnapshotCrashChild", Env: env})
	if !p.WaitFor("starting", time.Minute) {
		t.Fatal("the child never started")
	}
	if serve && !p.WaitFor("serving-snapshot", time.Minute) {
		t.Fatal("the child never served from the snapshot")
	}
	time.Sleep(time.Duration(100+mrand.IntN(200)) * time.Millisecond)
	p.Kill()

	v := openView(t, dir)
	marker, err := v.snapshotting()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed with the view at %s, snapshot marker %q", v.Position(), marker)
	if marker == "" && v.Position() != 0 {
		if serve {
			t.Fatal("the kill came after the slowed copy")
		}
		t.Log("the kill came after the snapshot: nothing to start over")
	}
	lsn := e.write(t, func(w *Writer) error { return w.SetSetting(5, "like_update", "email", false) })
	e.start(t, v)
	wait(t, v, lsn)
	e.same(t, v)
}
