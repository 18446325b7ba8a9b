package httpapi

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/logbook/logbook/services/tickets"
)

// testGate is a gate with a store node per sport (db1, db2, db3) that
// counts the requests each node completes, makes none wait, and refuses
// the sports given an error in refuse with that error: what the API's
// counters, live stream and error mapping are checked against. (The
// gates with real queues and limits are lab/ticketrig's, tested there
// and, over this API, by lab/loadtest.)
type testGate struct {
	refuse map[int]error
	nodes  []*testNode
}

const testGateName = "test-gate"

type testNode struct{ n atomic.Uint64 }

func (c *testNode) Completed() uint64   { return c.n.Load() }
func (c *testNode) Busy() time.Duration { return time.Duration(c.n.Load()) * time.Millisecond }

func newTestGate(refuse map[int]error) *testGate {
	g := &testGate{refuse: refuse}
	for range tickets.DefaultSports {
		g.nodes = append(g.nodes, &testNode{})
	}
	return g
}

func (g *testGate) Do(ctx context.Context, sport int, op func() error) error {
	if err := g.refuse[sport]; err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := op()
	if sport != tickets.Control {
		g.nodes[sport].n.Add(1)
	}
	return err
}

func (g *testGate) Describe() tickets.GateInfo {
	info := tickets.GateInfo{Name: testGateName}
	for i, n := range g.nodes {
		info.Nodes = append(info.Nodes, tickets.GateNode{Name: fmt.Sprintf("db%d", i+1), Sports: []string{tickets.DefaultSports[i]}, Rate: 100, Meter: n})
	}
	return info
}

func (g *testGate) Close() {}
