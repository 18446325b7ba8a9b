package ticketrig

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/logbook/logbook/services/tickets"
)

// fair is the architecture that keeps every cold sport at its full demand
// while the hot sport uses whatever capacity is left. It combines three
// published ideas:
//
//   - Fair queuing per key, as in "Efficient Fair Queuing using Deficit
//     Round Robin" (Shreedhar and Varghese, SIGCOMM 1995), Kubernetes' API
//     Priority and Fairness and Amazon SQS fair queues: each sport waits
//     in its own FIFO queue, and a node that has room takes the next
//     request from the sports waiting for it in turn, one request per
//     turn. Every request costs a node one service time, so deficit round
//     robin with a quantum of one request is plain round robin. A sport
//     with few requests is served as soon as its turn comes, however many
//     requests the hot sport has queued.
//   - A small in-flight limit per node (NodeInFlight, default 1 with a
//     node rate). The shared-queue architecture starves cold sports
//     because its workers all wait on the hot sport's node: the
//     scheduler hands out work before a node can take it, and the order
//     is then fixed. Here a request leaves its sport's queue only when a
//     node holding that sport has room, so the hot sport's backlog stays
//     in the hot sport's queue, where it delays nobody else, and the
//     choice of what runs next is made at the last moment. With one
//     request in a node a cold request admitted there waits for at most
//     the one in service; with four (the old default) athletics filled
//     every slot of its nodes and a cold request waited behind three.
//     A late caller costs no capacity: a queued request's service starts
//     when the node became free or when it was queued, whichever is later
//     (Node.ServeFrom), not when the previous caller woke up to let it in.
//   - With replicas, the least loaded replica, as in "The Power of Two
//     Choices in Randomized Load Balancing" (Mitzenmacher, 2001): a
//     request that finds a replica with room goes to the one with the
//     fewest in flight, and a queued request goes to whichever of its
//     replicas frees first. A cold arrival takes its free replica if it
//     has one; otherwise it is served by whichever of its nodes finishes
//     first (the hot sport's included, in its round-robin turn), and the
//     hot sport gets all of its two nodes' remaining capacity.
//
// Why a cold sport keeps its demand: at each of its nodes it is one of at
// most K sports taking turns, so it gets at least 1/K of the node's
// capacity whenever it has requests waiting; as long as its demand is
// below that share (and below its other replica's free capacity), it is
// served at its arrival rate, and a request waits at most for the
// requests in flight and one turn of each other sport on the node — a
// bound that does not depend on the hot sport's backlog.
//
// Kubernetes shuffle-shards flows onto a fixed number of queues because
// its flows are unbounded in number. Sports are known and queues exist
// only while a sport has requests waiting, so memory is bounded by the
// waiting requests (QueueLimit in all, KeyLimit per sport); beyond those
// limits requests are refused at once (ErrBusy, ErrKeyBusy).
type fair struct {
	nodes []*Node
	info  tickets.GateInfo

	mu         sync.Mutex
	closed     bool
	fn         []*fairNode
	flows      []*flow
	queued     int // live requests waiting in all flows
	queueLimit int
	keyLimit   int
	rng        *rand.Rand
}

// fairNode is a node's scheduling state.
type fairNode struct {
	node     *Node
	inflight int
	limit    int
	// ring holds, in turn order, the flows waiting for this node. A flow
	// is in the ring of each of its replicas while it has live requests
	// (lazily: an entry whose flow has emptied is dropped when reached).
	ring deque[ringEntry]
}

type ringEntry struct {
	f *flow
	r int // which of f's replicas this node is
}

// flow is one sport's queue.
type flow struct {
	replicas []*fairNode
	inRing   []bool // parallel to replicas
	q        deque[*fairReq]
	live     int // requests in q not abandoned
}

// fairReq is a queued request. ready receives the node it may use, or nil
// if the scheduler closed.
type fairReq struct {
	arrived   time.Time // when it was queued: ready for a node since
	ready     chan *fairNode
	abandoned bool      // the caller left; skip it
	node      *fairNode // set when dispatched
}

func newFair(c SchedConfig, nodes []*Node, placement [][]*Node, info tickets.GateInfo) *fair {
	f := &fair{nodes: nodes, info: info, queueLimit: c.QueueLimit, keyLimit: c.KeyLimit, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	byNode := map[*Node]*fairNode{}
	for _, n := range nodes {
		fn := &fairNode{node: n, limit: c.NodeInFlight}
		f.fn = append(f.fn, fn)
		byNode[n] = fn
	}
	for _, reps := range placement {
		fl := &flow{inRing: make([]bool, len(reps))}
		for _, n := range reps {
			fl.replicas = append(fl.replicas, byNode[n])
		}
		f.flows = append(f.flows, fl)
	}
	return f
}

func (f *fair) Nodes() []*Node { return f.nodes }

func (f *fair) Describe() tickets.GateInfo { return f.info }

func (f *fair) Do(ctx context.Context, sport int, op func() error) error {
	if sport == Control {
		return op()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return ErrClosed
	}
	fl := f.flows[sport]
	if fl.live == 0 {
		if n := f.pickFree(fl); n != nil {
			n.inflight++
			f.mu.Unlock()
			return f.serve(ctx, n, time.Now(), op)
		}
	}
	if fl.live >= f.keyLimit {
		f.mu.Unlock()
		return ErrKeyBusy
	}
	if f.queued >= f.queueLimit {
		f.mu.Unlock()
		return ErrBusy
	}
	req := &fairReq{arrived: time.Now(), ready: make(chan *fairNode, 1)}
	fl.q.push(req)
	fl.live++
	f.queued++
	for i, n := range fl.replicas {
		if !fl.inRing[i] {
			fl.inRing[i] = true
			n.ring.push(ringEntry{fl, i})
		}
	}
	f.mu.Unlock()

	select {
	case n := <-req.ready:
		if n == nil {
			return ErrClosed
		}
		return f.serve(ctx, n, req.arrived, op)
	case <-ctx.Done():
		f.mu.Lock()
		if req.node != nil {
			// Dispatched as the caller left: give the slot back.
			f.release(req.node)
		} else if !req.abandoned {
			req.abandoned = true
			fl.live--
			f.queued--
		}
		f.mu.Unlock()
		return ctx.Err()
	}
}

// serve runs op on n's node for a request ready since ready, then frees
// the slot for the next request.
func (f *fair) serve(ctx context.Context, n *fairNode, ready time.Time, op func() error) error {
	err := n.node.ServeFrom(ctx, ready, op)
	f.mu.Lock()
	f.release(n)
	f.mu.Unlock()
	return err
}

// pickFree returns the replica of fl with room and the fewest requests in
// flight (ties broken at random), or nil. Called with mu held.
func (f *fair) pickFree(fl *flow) *fairNode {
	var best *fairNode
	ties := 0
	for _, n := range fl.replicas {
		switch {
		case n.inflight >= n.limit:
		case best == nil || n.inflight < best.inflight:
			best, ties = n, 1
		case n.inflight == best.inflight:
			ties++
			if f.rng.IntN(ties) == 0 {
				best = n
			}
		}
	}
	return best
}

// release frees one of n's slots and fills free slots from n's ring,
// one request per flow per turn. Called with mu held.
func (f *fair) release(n *fairNode) {
	n.inflight--
	for n.inflight < n.limit && n.ring.len() > 0 {
		e := n.ring.pop()
		fl := e.f
		for fl.live > 0 {
			req := fl.q.pop()
			if req.abandoned {
				continue
			}
			fl.live--
			f.queued--
			req.node = n
			n.inflight++
			req.ready <- n
			break
		}
		if fl.live > 0 {
			n.ring.push(e) // its next turn
		} else {
			fl.inRing[e.r] = false
			fl.q = deque[*fairReq]{} // only abandoned requests remain
		}
	}
}

func (f *fair) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.closed = true
	for _, fl := range f.flows {
		for fl.q.len() > 0 {
			if req := fl.q.pop(); !req.abandoned {
				req.abandoned = true
				req.ready <- nil
			}
		}
		fl.live = 0
	}
	f.queued = 0
}

// deque is a FIFO queue on a ring buffer.
type deque[T any] struct {
	buf        []T
	head, size int
}

func (d *deque[T]) len() int { return d.size }

func (d *deque[T]) push(v T) {
	if d.size == len(d.buf) {
		nb := make([]T, max(8, 2*len(d.buf)))
		for i := range d.size {
			nb[i] = d.buf[(d.head+i)%len(d.buf)]
		}
		d.buf, d.head = nb, 0
	}
	d.buf[(d.head+d.size)%len(d.buf)] = v
	d.size++
}

func (d *deque[T]) pop() T {
	var zero T
	v := d.buf[d.head]
	d.buf[d.head] = zero
	d.head = (d.head + 1) % len(d.buf)
	d.size--
	return v
}
