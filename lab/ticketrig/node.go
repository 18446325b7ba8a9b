package ticketrig

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Node emulates one store node of the paper's measured systems: a
// partition of the tickets (some sports) behind a single server that
// serves at most Rate requests per second, each taking an exponentially
// distributed time (mean 1/Rate) — the M/M/1 server of the Markov models
// the paper solved, and the one-core database virtual machines it
// measured. With Rate 0 the node adds nothing: requests go straight to the
// real store.
//
// The server is kept in virtual time: each request is given the interval
// after the work accepted before it, and its caller sleeps until that
// interval ends. A late wake-up (a busy machine) then delays one caller
// but never lowers the node's capacity, as sleeping inside a lock would.
type Node struct {
	Name   string
	Sports []string // the sports it holds, its primary partition first
	Rate   float64  // requests per second; 0: unlimited

	mu   sync.Mutex
	free time.Time // when the server finishes the work accepted so far
	rng  *rand.Rand

	completed atomic.Uint64
	busy      atomic.Int64 // nanoseconds of service time accepted
}

// NewNode returns a node serving sports at rate requests/s.
func NewNode(name string, rate float64, sports ...string) *Node {
	return &Node{Name: name, Sports: sports, Rate: rate, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
}

// Serve holds the node's server for one service time, then runs op (the
// request's real work on the store) and counts a completion. If ctx ends
// while it waits, the service time is spent anyway — the server was
// reserved — and op does not run.
func (n *Node) Serve(ctx context.Context, op func() error) error {
	return n.ServeFrom(ctx, time.Now(), op)
}

// ServeFrom is Serve for a request that has been ready for the node since
// ready (no later than now): its service starts when the node finished
// the work accepted before it, or at ready if the node was idle then —
// not when the caller got here. A scheduler that holds requests until a
// node has room admits the next one when the caller of the previous one
// has woken up, which on a busy machine can be well after the node (in
// virtual time) was free; counting from ready, such late wake-ups delay
// callers but leave the node busy, so its capacity is what it should be
// however few requests are let in at once.
func (n *Node) ServeFrom(ctx context.Context, ready time.Time, op func() error) error {
	if n.Rate > 0 {
		n.mu.Lock()
		start := n.free
		if start.Before(ready) {
			start = ready
		}
		service := time.Duration(n.rng.ExpFloat64() / n.Rate * float64(time.Second))
		n.free = start.Add(service)
		done := n.free
		n.busy.Add(int64(service))
		n.mu.Unlock()
		if d := time.Until(done); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		} else if err := ctx.Err(); err != nil {
			return err
		}
	}
	err := op()
	n.completed.Add(1)
	return err
}

// Backlog is the work the node has accepted and not yet finished: how
// long a request sent now would wait before its service starts. Zero for
// a node without a rate.
func (n *Node) Backlog() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return max(0, time.Until(n.free))
}

// Completed is how many requests the node has served.
func (n *Node) Completed() uint64 { return n.completed.Load() }

// Busy is the service time the node's server has accepted so far: the
// sum of the service times drawn for its requests. Completed divided by
// Busy over an interval is the node's measured service rate — what a
// performance model of the system is calibrated with. Zero for a node
// without a rate.
func (n *Node) Busy() time.Duration { return time.Duration(n.busy.Load()) }
