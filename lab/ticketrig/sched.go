package ticketrig

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/logbook/logbook/services/tickets"
)

// A Scheduler stands between requests and the store nodes: it decides
// which request a node serves next, and on which replica. The four
// architectures differ only here. A Scheduler is a tickets.Gate: Do runs
// a request's op on a node holding its sport (or, for sport
// tickets.Control, on no node), and returns tickets.ErrBusy or
// tickets.ErrKeyBusy at once if the request cannot be queued.
type Scheduler interface {
	tickets.Gate
	// Nodes are the store nodes, in name order.
	Nodes() []*Node
}

// Control is the sport of a control request (tickets.Control).
const Control = tickets.Control

// Overload and shutdown errors of Do: the service's (tickets.ErrBusy,
// ErrKeyBusy, ErrClosed), which its HTTP API answers with 503, 429 and
// 503.
var (
	ErrBusy    = tickets.ErrBusy
	ErrKeyBusy = tickets.ErrKeyBusy
	ErrClosed  = tickets.ErrClosed
)

// Arch names an architecture.
type Arch string

// The architectures: the paper's three, and fair.
const (
	// Micro: one worker and one node per sport, fully separate.
	Micro Arch = "micro"
	// Queue: one shared FIFO queue, a pool of workers, one node per sport.
	Queue Arch = "queue"
	// QueueRep: Queue with every sport on two nodes of a ring.
	QueueRep Arch = "queue-rep"
	// Fair: fair queuing per sport in front of the ring of QueueRep.
	Fair Arch = "fair"
)

// The replica choices of SchedConfig.ReplicaChoice.
const (
	ChooseRandom      = "random"
	ChooseFirst       = "first"
	ChooseLeastLoaded = "least-loaded"
)

// Archs lists the architectures.
var Archs = []Arch{Micro, Queue, QueueRep, Fair}

// SchedConfig configures a scheduler.
type SchedConfig struct {
	Arch     Arch
	Sports   int     // how many sports (keys)
	NodeRate float64 // each node's requests/s; 0: unlimited
	// Replicas is how many nodes hold each sport: 1 (the sport's own
	// node) or 2 (its own and the previous one on a ring, as Cassandra's
	// SimpleStrategy places a replication factor of 2). Default: 1 for
	// micro and queue, 2 for queue-rep and fair; micro allows only 1.
	Replicas int
	// ReplicaChoice is how a worker of the queue architectures picks one
	// of a sport's nodes when it has two: ChooseRandom (default, what the
	// paper's model assumed), ChooseFirst (always the sport's own node, as
	// a client sending each key to its first replica does — the uneven
	// load the paper measured with replication) or ChooseLeastLoaded (the
	// node with the least work waiting).
	ReplicaChoice string
	// Workers is the queue architectures' worker pool (default 16, the
	// paper's).
	Workers int
	// QueueLimit bounds the requests waiting: in the shared queue, in
	// each micro worker's queue, and in fair's queues all together
	// (default 4096).
	QueueLimit int
	// KeyLimit bounds one sport's waiting requests under fair (default
	// 1024).
	KeyLimit int
	// NodeInFlight bounds the requests fair lets into one node at once
	// (default 1 with a node rate, 64 without).
	NodeInFlight int
}

func (c SchedConfig) withDefaults() (SchedConfig, error) {
	if c.Sports < 1 {
		return c, fmt.Errorf("scheduler: %d sports", c.Sports)
	}
	if c.NodeRate < 0 {
		return c, fmt.Errorf("scheduler: node rate %v is negative", c.NodeRate)
	}
	if c.Replicas == 0 {
		c.Replicas = 1
		if c.Arch == QueueRep || c.Arch == Fair {
			c.Replicas = 2
		}
	}
	if c.Replicas < 1 || c.Replicas > 2 || (c.Replicas == 2 && c.Sports < 2) || (c.Arch == Micro && c.Replicas != 1) {
		return c, fmt.Errorf("scheduler: %d replicas of %d sports under %s", c.Replicas, c.Sports, c.Arch)
	}
	switch c.ReplicaChoice {
	case "":
		c.ReplicaChoice = ChooseRandom
	case ChooseRandom, ChooseFirst, ChooseLeastLoaded:
	default:
		return c, fmt.Errorf("scheduler: replica choice %q: want %s, %s or %s", c.ReplicaChoice, ChooseFirst, ChooseRandom, ChooseLeastLoaded)
	}
	if c.Workers <= 0 {
		c.Workers = 16
	}
	if c.QueueLimit <= 0 {
		c.QueueLimit = 4096
	}
	if c.KeyLimit <= 0 {
		c.KeyLimit = 1024
	}
	if c.NodeInFlight <= 0 {
		c.NodeInFlight = 1
		if c.NodeRate == 0 {
			c.NodeInFlight = 64
		}
	}
	return c, nil
}

// NewScheduler builds the nodes and the scheduler of c.Arch. Node i is
// named db<i+1> and holds sport i; with two replicas it also holds sport
// i+1 (mod the number of sports), so that sport j lives on nodes j and
// j-1: for the paper's three sports db1 holds athletics and cycling, db2
// cycling and diving, db3 diving and athletics.
func NewScheduler(c SchedConfig, sportNames []string) (Scheduler, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(sportNames) != c.Sports {
		return nil, fmt.Errorf("scheduler: %d sport names for %d sports", len(sportNames), c.Sports)
	}
	nodes := make([]*Node, c.Sports)
	placement := make([][]*Node, c.Sports)
	for i := range nodes {
		held := []string{sportNames[i]}
		if c.Replicas == 2 {
			held = append(held, sportNames[(i+1)%c.Sports])
		}
		nodes[i] = NewNode(fmt.Sprintf("db%d", i+1), c.NodeRate, held...)
	}
	for j := range placement {
		placement[j] = []*Node{nodes[j]}
		if c.Replicas == 2 {
			placement[j] = append(placement[j], nodes[(j-1+c.Sports)%c.Sports])
		}
	}
	info := tickets.GateInfo{Name: string(c.Arch)}
	for _, n := range nodes {
		info.Nodes = append(info.Nodes, tickets.GateNode{Name: n.Name, Sports: n.Sports, Rate: n.Rate, Meter: n})
	}
	switch c.Arch {
	case Micro:
		return newMicro(c, nodes, info), nil
	case Queue, QueueRep:
		info.Workers = c.Workers
		return newShared(c, nodes, placement, info), nil
	case Fair:
		return newFair(c, nodes, placement, info), nil
	}
	return nil, fmt.Errorf("scheduler: unknown architecture %q (micro, queue, queue-rep, fair)", c.Arch)
}

// job is a request waiting for a worker.
type job struct {
	ctx   context.Context
	sport int
	op    func() error
	done  chan error // buffered: the worker never waits for the caller
}

func newJob(ctx context.Context, sport int, op func() error) *job {
	return &job{ctx: ctx, sport: sport, op: op, done: make(chan error, 1)}
}

// wait returns the job's outcome, ctx's error if the caller leaves first
// (the worker then skips the job), or ErrClosed if the workers stop
// before taking it.
func (j *job) wait(closed <-chan struct{}) error {
	select {
	case err := <-j.done:
		return err
	case <-j.ctx.Done():
		return j.ctx.Err()
	case <-closed:
		select {
		case err := <-j.done:
			return err
		default:
			return ErrClosed
		}
	}
}

// workerPool is what micro and the shared queue have in common: workers
// taking jobs from channels until closed.
type workerPool struct {
	nodes  []*Node
	info   tickets.GateInfo
	closed chan struct{}
	wg     sync.WaitGroup
}

func (p *workerPool) Nodes() []*Node { return p.nodes }

func (p *workerPool) Describe() tickets.GateInfo { return p.info }

// run is one worker: it serves jobs from q, each on the node pick chooses.
func (p *workerPool) run(q <-chan *job, pick func(sport int) *Node) {
	defer p.wg.Done()
	for {
		select {
		case j := <-q:
			switch {
			case j.ctx.Err() != nil:
				j.done <- j.ctx.Err()
			case j.sport == Control:
				j.done <- j.op()
			default:
				j.done <- pick(j.sport).Serve(j.ctx, j.op)
			}
		case <-p.closed:
			for {
				select {
				case j := <-q:
					j.done <- ErrClosed
				default:
					return
				}
			}
		}
	}
}

func (p *workerPool) Close() {
	select {
	case <-p.closed:
	default:
		close(p.closed)
	}
	p.wg.Wait()
}

// enqueue offers j to q without waiting.
func (p *workerPool) enqueue(q chan<- *job, j *job) error {
	select {
	case <-p.closed:
		return ErrClosed
	default:
	}
	select {
	case q <- j:
		return j.wait(p.closed)
	default:
		return ErrBusy
	}
}

// micro is the microservices architecture: each sport has its own queue,
// its own single worker and its own node, sharing nothing. Control
// requests are answered by the caller, touching nothing.
type micro struct {
	workerPool
	queues []chan *job
}

func newMicro(c SchedConfig, nodes []*Node, info tickets.GateInfo) *micro {
	m := &micro{workerPool: workerPool{nodes: nodes, info: info, closed: make(chan struct{})}}
	m.queues = make([]chan *job, len(nodes))
	for i := range nodes {
		m.queues[i] = make(chan *job, c.QueueLimit)
		m.wg.Add(1)
		node := nodes[i]
		go m.run(m.queues[i], func(int) *Node { return node })
	}
	return m
}

func (m *micro) Do(ctx context.Context, sport int, op func() error) error {
	if sport == Control {
		return op()
	}
	return m.enqueue(m.queues[sport], newJob(ctx, sport, op))
}

// shared is the paper's queue architecture, with one or two replicas: one
// FIFO queue that every request, control included, goes through, and a
// pool of workers that each take the oldest request and wait for its node.
// With two replicas a worker picks one of the sport's nodes as
// SchedConfig.ReplicaChoice says: by default at random with equal
// probability, as the paper's model assumed.
//
// Under skewed demand the workers end up waiting on the hot sport's nodes,
// and the queue fills with hot requests in the ratio of the demands: every
// sport is then served at the rate the workers come back, split in that
// ratio — a cold sport's throughput falls with the hot sport's demand.
type shared struct {
	workerPool
	q chan *job
}

func newShared(c SchedConfig, nodes []*Node, placement [][]*Node, info tickets.GateInfo) *shared {
	s := &shared{workerPool: workerPool{nodes: nodes, info: info, closed: make(chan struct{})}, q: make(chan *job, c.QueueLimit)}
	for range c.Workers {
		rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		s.wg.Add(1)
		go s.run(s.q, chooser(c.ReplicaChoice, placement, rng))
	}
	return s
}

func (s *shared) Do(ctx context.Context, sport int, op func() error) error {
	return s.enqueue(s.q, newJob(ctx, sport, op))
}

// chooser returns how a worker picks a node for a sport among those
// holding it.
func chooser(choice string, placement [][]*Node, rng *rand.Rand) func(sport int) *Node {
	switch choice {
	case ChooseFirst:
		return func(sport int) *Node { return placement[sport][0] }
	case ChooseLeastLoaded:
		return func(sport int) *Node {
			r := placement[sport]
			best, bestLoad, ties := r[0], r[0].Backlog(), 1
			for _, n := range r[1:] {
				switch l := n.Backlog(); {
				case l < bestLoad:
					best, bestLoad, ties = n, l, 1
				case l == bestLoad:
					ties++
					if rng.IntN(ties) == 0 {
						best = n
					}
				}
			}
			return best
		}
	default:
		return func(sport int) *Node {
			r := placement[sport]
			return r[rng.IntN(len(r))]
		}
	}
}
