package backup_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/logbook/logbook/engine/backup"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/projection"
)

// countView counts events per stream: key = stream, value = count.
func countUpdate(b *pebble.Batch, events []eventstore.Event) error {
	for _, ev := range events {
		var n uint64
		v, closer, err := b.Get([]byte(ev.Stream))
		if err == nil {
			n = binary.BigEndian.Uint64(v)
			closer.Close()
		} else if !errors.Is(err, pebble.ErrNotFound) {
			return err
		}
		if err := b.Set([]byte(ev.Stream), binary.BigEndian.AppendUint64(nil, n+1), nil); err != nil {
			return err
		}
	}
	return nil
}

func readCounts(t *testing.T, v *projection.PebbleView) (map[string]uint64, uint64) {
	t.Helper()
	counts := map[string]uint64{}
	var at uint64
	err := v.Read(func(r pebble.Reader, pos uint64) error {
		at = pos
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{1}})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			counts[string(it.Key())] = binary.BigEndian.Uint64(it.Value())
		}
		return it.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	return counts, at
}

type acked struct {
	stream string
	first  uint64
	ids    []eventstore.ID
	// beforeBackup: acknowledged before Take was called.
	beforeBackup bool
}

// TestBackupUnderLoad takes a backup while writers append and a view is
// fed, restores it, and checks: every append acknowledged before the
// backup began is in it; every acknowledged append is either wholly in
// it (at its positions, with its ids) or wholly absent, by the backup's
// position; the restored store verifies; the view restored with it
// equals a view rebuilt from the restored log up to its checkpoint, and
// caught up, one rebuilt from the whole restored log.
func TestBackupUnderLoad(t *testing.T) {
	root := t.TempDir()
	store, err := pebblestore.Open(filepath.Join(root, "data"), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	view, err := projection.OpenPebbleView(filepath.Join(root, "view"), projection.PebbleOptions{}, countUpdate)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	runner := projection.NewRunner(store, view, projection.Options{Name: "counts", MaxBatch: 64})
	runDone := make(chan error, 1)
	go func() { runDone <- runner.Run(ctx) }()

	var (
		mu           sync.Mutex
		acks         []acked
		backupCalled bool
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const writers = 6
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				stream := fmt.Sprintf("w%d-%d", w, i%7)
				n := 1 + i%4 // appends of 1 to 4 events
				evs := make([]eventstore.NewEvent, n)
				for k := range evs {
					evs[k] = eventstore.NewEvent{Type: "Tick", Tags: []string{fmt.Sprintf("writer-%d", w)}, Data: []byte(fmt.Sprintf("%d/%d/%d", w, i, k))}
				}
				res, err := store.Append(ctx, stream, eventstore.Any, evs)
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				a := acked{stream: stream, first: res.FirstPosition}
				for _, e := range evs {
					a.ids = append(a.ids, e.ID)
				}
				mu.Lock()
				a.beforeBackup = !backupCalled
				acks = append(acks, a)
				mu.Unlock()
			}
		}()
	}
	time.Sleep(400 * time.Millisecond)
	mu.Lock()
	backupCalled = true
	mu.Unlock()
	out := filepath.Join(root, "backup")
	m, err := backup.Take(store, map[string]backup.View{"counts": view}, out)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // appends go on after the backup
	close(stop)
	wg.Wait()
	cancel()
	<-runDone
	if err := errors.Join(view.Close(), store.Close()); err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		return
	}
	var before, after int
	for _, a := range acks {
		if a.beforeBackup {
			before++
		} else {
			after++
		}
	}
	t.Logf("backup at position %d; %d appends acknowledged before it began, %d after; view checkpoint %d", m.Position, before, after, m.Views[0].Checkpoint)
	if before == 0 || after == 0 {
		t.Fatalf("load too light to test anything: %d appends before the backup, %d after", before, after)
	}
	if len(m.Views) != 1 || m.Views[0].Checkpoint > m.Position || m.Views[0].Checkpoint == 0 {
		t.Fatalf("manifest views %+v, position %d", m.Views, m.Position)
	}
	if got, err := backup.ReadManifest(out); err != nil || got.Position != m.Position {
		t.Fatalf("manifest on disk %+v, %v", got, err)
	}

	// Restore, and check the log against the acknowledged appends.
	data, views := filepath.Join(root, "restored"), filepath.Join(root, "restored-views")
	res, err := backup.Restore(out, data, views)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Report.OK() || res.Report.Head != m.Position {
		t.Fatalf("restored store report %+v, backup position %d", res.Report, m.Position)
	}
	rs, err := pebblestore.Open(data, pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	byPos := map[uint64]eventstore.Event{}
	for from := uint64(1); ; {
		page, err := rs.ReadAll(t.Context(), from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, ev := range page {
			byPos[ev.Position] = ev
		}
		from = page[len(page)-1].Position + 1
	}
	if uint64(len(byPos)) != m.Position {
		t.Fatalf("restored log holds %d events, backup position %d", len(byPos), m.Position)
	}
	var whole, absent uint64
	for _, a := range acks {
		last := a.first + uint64(len(a.ids)) - 1
		switch {
		case last <= m.Position:
			for k, id := range a.ids {
				ev, ok := byPos[a.first+uint64(k)]
				if !ok || ev.ID != id || ev.Stream != a.stream {
					t.Fatalf("acknowledged append at %d (event %d) missing or different in the restored log: %+v", a.first, k, ev)
				}
			}
			whole += uint64(len(a.ids))
		case a.first > m.Position:
			if a.beforeBackup {
				t.Fatalf("append acknowledged before the backup began is at %d, past the backup's position %d", a.first, m.Position)
			}
			absent++
		default:
			t.Fatalf("append at %d–%d straddles the backup's position %d", a.first, last, m.Position)
		}
	}
	if whole != m.Position {
		t.Fatalf("the restored log holds %d events not from a whole acknowledged append", m.Position-whole)
	}

	// The restored view equals one rebuilt from the restored log up to its
	// checkpoint.
	rv, err := projection.OpenPebbleView(filepath.Join(views, "counts"), projection.PebbleOptions{}, countUpdate)
	if err != nil {
		t.Fatal(err)
	}
	defer rv.Close()
	got, at := readCounts(t, rv)
	if at != m.Views[0].Checkpoint {
		t.Fatalf("restored view at %d, manifest says %d", at, m.Views[0].Checkpoint)
	}
	want := map[string]uint64{}
	for p := uint64(1); p <= at; p++ {
		want[byPos[p].Stream]++
	}
	if !maps.Equal(got, want) {
		t.Fatalf("restored view differs from the one rebuilt from the restored log up to %d", at)
	}
	// Caught up by its runner, it equals the whole restored log's.
	rctx, rcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer rcancel()
	rr := projection.NewRunner(rs, rv, projection.Options{Name: "counts"})
	go func() { _ = rr.Run(rctx) }()
	if err := rr.WaitFor(rctx, m.Position); err != nil {
		t.Fatal(err)
	}
	rcancel()
	got, at = readCounts(t, rv)
	for p := uint64(1); p <= m.Position; p++ {
		if p > m.Views[0].Checkpoint {
			want[byPos[p].Stream]++
		}
	}
	if at != m.Position || !maps.Equal(got, want) {
		t.Fatalf("caught-up view at %d differs from the restored log's (position %d)", at, m.Position)
	}
}

func TestRestoreRefuses(t *testing.T) {
	root := t.TempDir()
	store, err := pebblestore.Open(filepath.Join(root, "data"), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(t.Context(), "s", eventstore.NoStream, []eventstore.NewEvent{{Type: "T"}}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "backup")
	if _, err := backup.Take(store, nil, out); err != nil {
		t.Fatal(err)
	}
	// A second backup into the same directory is refused.
	if _, err := backup.Take(store, nil, out); !errors.Is(err, backup.ErrNotEmpty) {
		t.Errorf("backup into a non-empty directory: %v", err)
	}
	store.Close()

	full := filepath.Join(root, "full")
	os.MkdirAll(full, 0o755)
	os.WriteFile(filepath.Join(full, "x"), nil, 0o644)
	if _, err := backup.Restore(out, full, ""); !errors.Is(err, backup.ErrNotEmpty) {
		t.Errorf("restore into a non-empty directory: %v", err)
	}
	if _, err := backup.Restore(filepath.Join(root, "data"), filepath.Join(root, "r1"), ""); !errors.Is(err, backup.ErrNotBackup) {
		t.Errorf("restore from a store, not a backup: %v", err)
	}
	if _, err := backup.Restore(filepath.Join(root, "nothing"), filepath.Join(root, "r2"), ""); err == nil {
		t.Error("restore from a missing directory succeeded")
	}
	// A backup whose store lost an event is refused before anything is
	// copied.
	os.WriteFile(filepath.Join(out, backup.ManifestFile), []byte(`{"format":"logbook-backup-1","position":7,"views":[]}`), 0o644)
	if _, err := backup.Restore(out, filepath.Join(root, "r3"), ""); err == nil {
		t.Error("restore of a backup whose store ends before its manifest's position succeeded")
	}
	if _, err := os.Stat(filepath.Join(root, "r3")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused restore left %s behind", filepath.Join(root, "r3"))
	}
	// Into an empty directory it works.
	os.WriteFile(filepath.Join(out, backup.ManifestFile), []byte(`{"format":"logbook-backup-1","position":1,"views":[]}`), 0o644)
	empty := filepath.Join(root, "empty")
	os.MkdirAll(empty, 0o755)
	if res, err := backup.Restore(out, empty, ""); err != nil || res.Report.Head != 1 {
		t.Errorf("restore into an empty directory: %+v, %v", res, err)
	}
}
