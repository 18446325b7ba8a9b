package tickets

import (
	"context"
	"errors"
	"time"
)

// A Gate stands between the service's requests and the store: every
// search, booking, return and control request runs its work (op) through
// Do. The default, Direct, runs it at once. A gate may instead queue
// requests, choose the order they run in and refuse them when its queues
// are full — lab/ticketrig's gates do, in front of emulated store nodes,
// to measure how demand for one sport spreads to the others.
type Gate interface {
	// Do runs op for a request on sport (an index into the catalogue's
	// sports, or Control for a request that touches no store). It
	// returns op's error; ErrBusy or ErrKeyBusy at once if the request
	// cannot wait; ErrClosed after Close; or ctx's error if the caller
	// gives up first, in which case op has not run.
	Do(ctx context.Context, sport int, op func() error) error
	// Describe says what the gate is and which store nodes it sends
	// requests to. The service calls it once, when it starts.
	Describe() GateInfo
	// Close stops the gate. Requests still waiting get ErrClosed. It
	// may be called more than once.
	Close()
}

// Control is the sport of a control request: it touches no store node
// and measures the overhead of everything else.
const Control = -1

// Overload and shutdown errors of a gate's Do. The HTTP API answers them
// with 503, 429 and 503.
var (
	// ErrBusy: every queue the request could wait in is full.
	ErrBusy = errors.New("the service's queues are full")
	// ErrKeyBusy: the request's sport has as many requests waiting as
	// one sport may have; other sports are still served.
	ErrKeyBusy = errors.New("too many requests for this sport are waiting")
	// ErrClosed: the gate stopped.
	ErrClosed = errors.New("the service is closed")
)

// GateInfo describes a gate, for the service's Stats, metrics, live
// stream and session.
type GateInfo struct {
	// Name names the gate's kind ("direct", or the architecture of a lab
	// rig: micro, queue, queue-rep, fair).
	Name string
	// Workers is the gate's worker pool, if it has one (0 otherwise).
	Workers int
	// Nodes are the store nodes requests are served on, in name order;
	// none for a gate that runs requests on the store directly.
	Nodes []GateNode
}

// GateNode is one store node a gate sends requests to.
type GateNode struct {
	Name   string
	Sports []string // the sports it holds, its primary partition first
	Rate   float64  // its capacity in requests/s; 0: unlimited
	Meter  NodeMeter
}

// A NodeMeter counts a node's work: what the service reports per node.
type NodeMeter interface {
	// Completed is how many requests the node has served.
	Completed() uint64
	// Busy is the service time the node has accepted: with Completed,
	// its measured service rate over any interval.
	Busy() time.Duration
}

// DirectName is Direct's GateInfo.Name.
const DirectName = "direct"

// Direct returns the gate that runs every request at once on the store,
// with no queue and no limit of its own: what the service does unless
// it is given another gate.
func Direct() Gate { return direct{} }

// direct's Close does nothing: the service closes the gate before the
// runtime and the view, which then refuse work themselves.

type direct struct{}

func (direct) Do(ctx context.Context, _ int, op func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return op()
}

func (direct) Describe() GateInfo { return GateInfo{Name: DirectName} }

func (direct) Close() {}
