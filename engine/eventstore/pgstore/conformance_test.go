package pgstore

import (
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/storetest"
	"github.com/logbook/logbook/internal/testenv"
)

func opener(opts Options) storetest.Opener {
	return func(t *testing.T) eventstore.Store {
		t.Helper()
		opts := opts
		opts.Schema = testenv.Schema(t)
		s, err := Open(t.Context(), testenv.URL(t), opts)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	}
}

// TestConformance runs the whole suite against PostgreSQL.
func TestConformance(t *testing.T) {
	storetest.Run(t, opener(Options{MaxConns: 16}))
}

// TestConformanceSmallReads runs the paging-sensitive groups with a read
// cap below the sizes the suite asks for.
func TestConformanceSmallReads(t *testing.T) {
	storetest.RunOnly(t, opener(Options{MaxConns: 16, MaxReadBatch: 5}), "Read", "Subscribe")
}

// TestConformanceDeletion runs the deletion tests, the background sweep
// off (the tests sweep themselves), with small sweep batches so that a
// stream's reclaim takes several.
func TestConformanceDeletion(t *testing.T) {
	storetest.RunDeletion(t, func(t *testing.T, clock *storetest.Clock) eventstore.Store {
		return opener(Options{MaxConns: 16, Clock: clock.Now, SweepInterval: -1, SweepBatch: 7})(t)
	})
}
