package pebblestore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/logbook/logbook/engine/eventstore"
)

// TestStalledDisk: when the WAL's fsync hangs (a stalled network disk),
// appends give up when their context says so instead of piling up, and
// Close returns, with an error, instead of waiting for the disk for ever.
func TestStalledDisk(t *testing.T) {
	fs, stalled, release := stallingFS()
	s, err := Open(t.TempDir(), Options{FS: fs, closeWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Once the disk answers again, a second Close finishes closing.
		close(release)
		s.opts.closeWait = 10 * time.Second
		if err := s.Close(); err != nil {
			t.Errorf("Close after the disk recovered: %v", err)
		}
	}()
	if _, err := s.Append(context.Background(), "s", eventstore.Any, []eventstore.NewEvent{{Type: "t", Data: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	stalled.Store(true)

	const appends = 2000
	var wg sync.WaitGroup
	var slowest atomic.Int64
	var acked atomic.Int64
	for i := range appends {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := s.Append(ctx, "s", eventstore.Any, []eventstore.NewEvent{{Type: "t", Data: make([]byte, 100+i%1000)}})
			d := time.Since(start)
			for old := slowest.Load(); int64(d) > old && !slowest.CompareAndSwap(old, int64(d)); old = slowest.Load() {
			}
			switch {
			case err == nil:
				acked.Add(1)
			case !errors.Is(err, context.DeadlineExceeded):
				t.Errorf("append on a stalled disk: %v, want the context's deadline", err)
			}
		})
	}
	wg.Wait()
	if acked.Load() != 0 {
		t.Errorf("%d appends acknowledged while no fsync could finish", acked.Load())
	}
	// Without the deadline an append would wait for the disk until the
	// test ends; with it, the slowest returns soon after 100 ms — within
	// 2 s even when CI's loaded cores wake 2,000 goroutines late (520 ms
	// was seen under -race at load average 25).
	if d := time.Duration(slowest.Load()); d > 2*time.Second {
		t.Errorf("the slowest append with a 100 ms deadline took %v", d)
	}

	start := time.Now()
	err = s.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close on a stalled disk took %v", d)
	}
	if err == nil || !strings.Contains(err.Error(), "stalled") {
		t.Errorf("Close on a stalled disk: %v, want an error that says so", err)
	}
	if _, err := s.Append(context.Background(), "s", eventstore.Any, []eventstore.NewEvent{{Type: "t"}}); !errors.Is(err, eventstore.ErrClosed) {
		t.Errorf("append after Close: %v, want ErrClosed", err)
	}
}

// stallingFS is the operating system's file system, except that once
// stalled is set every sync of a WAL file waits until release is closed:
// a disk that stopped answering.
func stallingFS() (fs vfs.FS, stalled *atomic.Bool, release chan struct{}) {
	stalled, release = new(atomic.Bool), make(chan struct{})
	fs = errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if stalled.Load() && strings.HasSuffix(op.Path, ".log") &&
			(op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo) {
			<-release
		}
		return nil
	}))
	return fs, stalled, release
}
