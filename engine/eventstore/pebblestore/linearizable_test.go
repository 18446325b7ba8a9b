package pebblestore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/eventstore/storetest"
)

// TestLinearizable records histories of 16 clients appending with
// expected versions and reading versions and streams, and checks them
// with porcupine (storetest.CheckLinearizable), with fsync as in
// production and without.
func TestLinearizable(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		t.Run(map[bool]string{false: "sync", true: "nosync"}[noSync], func(t *testing.T) {
			s := opener(pebblestore.Options{NoSync: noSync})(t)
			storetest.Linearizability(t, s, storetest.LinearizabilityOptions{Rounds: 5, Seed: 1})
		})
	}
}

// staleVersions is a planted bug: it answers StreamVersion from a cache
// that appends made through it do not refresh.
type staleVersions struct {
	eventstore.Store
	mu sync.Mutex
	v  map[string]uint64
}

func (s *staleVersions) StreamVersion(ctx context.Context, stream string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.v[stream]; ok {
		return v, nil
	}
	v, err := s.Store.StreamVersion(ctx, stream)
	if err == nil {
		s.v[stream] = v
	}
	return v, err
}

// TestLinearizabilityCatchesStaleReads shows that the check fails on a
// store whose version reads can be stale.
func TestLinearizabilityCatchesStaleReads(t *testing.T) {
	s := &staleVersions{Store: opener(pebblestore.Options{NoSync: true})(t), v: map[string]uint64{}}
	_, err := storetest.CheckLinearizable(t.Context(), s, storetest.LinearizabilityOptions{Seed: 1, VisualizeDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "not linearizable") {
		t.Fatalf("a store with stale version reads passed: %v", err)
	}
	t.Log(err)
}
