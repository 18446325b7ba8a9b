package pgstore

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/storetest"
	"github.com/logbook/logbook/internal/testenv"
)

// TestLinearizable records histories of 16 clients appending with
// expected versions and reading versions and streams, and checks them
// with porcupine (storetest.CheckLinearizable): on one process, and on
// two processes sharing the database, each operation sent to either.
func TestLinearizable(t *testing.T) {
	t.Run("one process", func(t *testing.T) {
		s := opener(Options{MaxConns: 16})(t)
		storetest.Linearizability(t, s, storetest.LinearizabilityOptions{Rounds: 3, Seed: 1})
	})
	t.Run("two processes", func(t *testing.T) {
		url, schema := testenv.URL(t), testenv.Schema(t)
		var procs [2]*Store
		for i := range procs {
			s, err := Open(t.Context(), url, Options{Schema: schema, MaxConns: 16})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			procs[i] = s
		}
		storetest.Linearizability(t, &alternate{Store: procs[0], procs: procs}, storetest.LinearizabilityOptions{Rounds: 3, Seed: 2})
	})
}

// alternate sends each append and read to the next of two processes.
type alternate struct {
	eventstore.Store
	procs [2]*Store
	n     atomic.Uint64
}

func (a *alternate) next() *Store { return a.procs[a.n.Add(1)%2] }

func (a *alternate) Append(ctx context.Context, stream string, expect eventstore.ExpectedVersion, evs []eventstore.NewEvent) (eventstore.AppendResult, error) {
	return a.next().Append(ctx, stream, expect, evs)
}

func (a *alternate) StreamVersion(ctx context.Context, stream string) (uint64, error) {
	return a.next().StreamVersion(ctx, stream)
}

func (a *alternate) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]eventstore.Event, error) {
	return a.next().ReadStream(ctx, stream, from, max)
}
