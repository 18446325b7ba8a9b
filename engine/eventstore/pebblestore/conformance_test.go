package pebblestore_test

import (
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/eventstore/storetest"
)

func opener(opts pebblestore.Options) storetest.Opener {
	return func(t *testing.T) eventstore.Store {
		t.Helper()
		s, err := pebblestore.Open(t.TempDir(), opts)
		if err != nil {
			t.Fatalf("pebblestore.Open: %v", err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	}
}

// TestConformance runs the whole suite without fsync, for speed.
func TestConformance(t *testing.T) {
	storetest.Run(t, opener(pebblestore.Options{NoSync: true}))
}

// TestConformanceSync runs the core of the suite at the production
// settings, where appends wait for the WAL fsync.
func TestConformanceSync(t *testing.T) {
	storetest.RunOnly(t, opener(pebblestore.Options{}), "Append", "Read", "Subscribe")
}

// TestConformanceSmallCaches runs the suite where it stresses paging and
// the sequencer's stream version cache, with a read cap below the sizes
// the suite asks for and a version cache that holds just two streams.
func TestConformanceSmallCaches(t *testing.T) {
	storetest.RunOnly(t, opener(pebblestore.Options{NoSync: true, MaxReadBatch: 5, VersionCacheSize: 2}),
		"Read", "Subscribe", "Concurrent", "Idempotency")
}

// TestConformanceDeletion runs the deletion tests, the background sweep
// off (the tests sweep themselves), with small sweep batches so that a
// stream's reclaim takes several.
func TestConformanceDeletion(t *testing.T) {
	storetest.RunDeletion(t, func(t *testing.T, clock *storetest.Clock) eventstore.Store {
		return opener(pebblestore.Options{NoSync: true, Clock: clock.Now, SweepInterval: -1, SweepBatch: 7})(t)
	})
}

// TestConformanceDeletionSync runs them at the production settings, the
// background sweep on as well.
func TestConformanceDeletionSync(t *testing.T) {
	storetest.RunDeletion(t, func(t *testing.T, clock *storetest.Clock) eventstore.Store {
		return opener(pebblestore.Options{Clock: clock.Now, SweepInterval: 5 * time.Millisecond})(t)
	}, storetest.BackgroundSweep())
}
