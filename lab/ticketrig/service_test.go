package ticketrig

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/services/tickets"
)

// newService runs the tickets service on a fresh embedded store behind
// the scheduler of c.
func newService(t *testing.T, cat tickets.Catalogue, c SchedConfig) *tickets.Service {
	t.Helper()
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	c.Sports = len(cat.Sports)
	gate, err := NewScheduler(c, cat.Sports)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := tickets.New(ctx, store, tickets.Config{Catalogue: cat, Gate: gate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		store.Close()
	})
	return s
}

// 256 bookers race for a few seats through each scheduler, booking and
// returning at random. Afterwards the log never sold a seat twice, holds
// exactly the acknowledged bookings and returns, the view agrees with it,
// and every request reached the service through a node: the nodes
// completed as many as the sports were served.
func TestServiceUnderEveryArch(t *testing.T) {
	for _, arch := range Archs {
		t.Run(string(arch), func(t *testing.T) {
			cat := tickets.Catalogue{Sports: tickets.DefaultSports, PerSport: 8, Days: 2}
			s := newService(t, cat, SchedConfig{Arch: arch, Workers: 16, QueueLimit: 1 << 14, KeyLimit: 1 << 14})
			ctx := context.Background()
			var (
				mu    sync.Mutex
				acked int
				wg    sync.WaitGroup
			)
			for b := range 256 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					owner := fmt.Sprintf("booker-%d", b)
					rng := rand.New(rand.NewPCG(uint64(b), 1))
					var mine []string
					for range 12 {
						var (
							res tickets.Booking
							err error
						)
						if len(mine) > 0 && rng.IntN(3) == 0 {
							i := rng.IntN(len(mine))
							res, err = s.Return(ctx, mine[i], owner)
							mine = slices.Delete(mine, i, i+1)
						} else {
							id := tickets.TicketID(cat.Sports[rng.IntN(len(cat.Sports))], rng.IntN(cat.PerSport))
							if res, err = s.Book(ctx, id, owner); err == nil && res.Result.Position != 0 {
								mine = append(mine, id)
							}
						}
						switch {
						case errors.Is(err, tickets.ErrTaken):
						case err != nil:
							t.Errorf("%s: %v", owner, err)
							return
						case res.Result.Position != 0:
							mu.Lock()
							acked++
							mu.Unlock()
						}
					}
				}()
			}
			wg.Wait()
			audit, err := tickets.AuditLog(ctx, s.Store)
			if err != nil {
				t.Fatal(err)
			}
			if len(audit.Violations) > 0 || audit.Events != acked {
				t.Fatalf("log: %d events for %d acknowledged, violations %v", audit.Events, acked, audit.Violations)
			}
			head, _ := s.Store.Head(ctx)
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := s.Search.WaitFor(wctx, head); err != nil {
				t.Fatal(err)
			}
			booked := 0
			for _, sport := range cat.Sports {
				booked += s.Search.Current().Find(tickets.Query{Sport: sport, Limit: tickets.MaxLimit}).Matches
				booked -= s.Search.Current().Find(tickets.Query{Sport: sport, Available: true, Limit: tickets.MaxLimit}).Matches
			}
			if booked != audit.Booked {
				t.Errorf("view has %d booked, the log %d", booked, audit.Booked)
			}
			st := s.Stats()
			var served, completed uint64
			for _, n := range st.Sports {
				served += n
			}
			for _, n := range st.Nodes {
				completed += n
			}
			if st.Arch != string(arch) || len(st.Nodes) != 3 || served == 0 || completed != served {
				t.Errorf("stats %+v: want %s, 3 nodes completing every request served", st, arch)
			}
		})
	}
}

// The service reports what the scheduler is: its architecture, its
// worker pool (the queue architectures only), its nodes and placement.
func TestSchedulerDescribesItself(t *testing.T) {
	for _, c := range []struct {
		arch    Arch
		workers int
		athl    string
	}{
		{Micro, 0, "db1"},
		{Queue, 7, "db1"},
		{QueueRep, 7, "db1,db3"},
		{Fair, 0, "db1,db3"},
	} {
		s := newService(t, tickets.Catalogue{Sports: tickets.DefaultSports, PerSport: 4, Days: 1}, SchedConfig{Arch: c.arch, NodeRate: 40, Workers: 7})
		st := s.Stats()
		info := s.GateInfo()
		if st.Arch != string(c.arch) || st.Workers != c.workers || st.NodeRate != 40 || len(info.Nodes) != 3 || info.Nodes[1].Name != "db2" ||
			strings.Join(st.Placement["athletics"], ",") != c.athl {
			t.Errorf("%s: stats %+v, info %+v", c.arch, st, info)
		}
	}
}
