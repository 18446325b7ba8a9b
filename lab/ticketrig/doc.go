// Package ticketrig is the experiment rig of the tickets service
// (services/tickets): emulated store nodes and the schedulers that put
// requests on them, as gates (tickets.Gate) the service runs every
// request through. It reproduces the experiments of "Performance
// modelling and simulation of skewed demand in complex systems"
// (Shephard, 2017), "the paper" below: a ticketing system for a
// multi-sport event whose demand is skewed — one sport (athletics) is
// wanted far more than the others — measured on store nodes of limited
// capacity under three architectures, to see how the hot sport's demand
// spreads to the cold ones.
//
// A Node (node.go) emulates one of the paper's store nodes: a partition of
// the tickets (some sports) behind one server with exponentially
// distributed service times (an M/M/1 server, kept in virtual time).
// NewScheduler builds the nodes and one of four schedulers:
//
//   - micro (the paper's microservices architecture): each sport has its
//     own queue, its own single worker and its own node; nothing is
//     shared.
//   - queue (the paper's queue architecture): one FIFO queue every
//     request goes through, a pool of workers (16), one node per sport.
//     Under skewed demand the workers all end up waiting on the hot
//     sport's node, and cold sports starve.
//   - queue-rep (the paper's queue architecture with replication): queue
//     with every sport on two nodes of a ring, a worker picking one of
//     them at random.
//   - fair (not in the paper; fair.go): fair queuing per sport in front
//     of queue-rep's ring — round robin per node, one request in service
//     per node, the least loaded replica — which keeps every cold sport
//     at its demand while the hot one uses the capacity left.
//
// `logbook tickets serve --arch ARCH --node-rate R` runs the service
// behind one of these gates (Flags, registered through lab/cli; without
// --arch the service runs requests straight on its store);
// `logbook loadtest tickets` (lab/loadtest) offers it the skewed demand
// step by step, and lab/ticketmodel predicts the same runs from PEPA
// models of the four architectures.
package ticketrig
