// Package ticketmodel writes PEPA models of the four architectures of
// the tickets experiment rig (lab/ticketrig, in front of the tickets
// service), calibrates them with what a load test measured — the rate
// each sport and the control requests were offered, and each emulated
// store node's measured service rate — and predicts
// every sport's throughput at every step of the run, to set beside what
// the service actually served.
//
// The models are continuous-time Markov chains written in PEPA and solved
// by lab/pepa. Each is the architecture as the scheduler implements
// it, at the level of detail that decides throughput:
//
//   - queue and queue-rep: one pool of Workers places (the workers of the
//     shared FIFO queue). A request that arrives while every place is
//     taken is lost (in the service it would wait in the FIFO, whose
//     overflow and time-outs make the same loss at saturation); otherwise
//     it takes a place, chooses one of its sport's replicas at random
//     (the arrival stream is split evenly among them) and holds the place
//     until that node has served it. A node is one exponential server
//     shared by the places waiting on it, in proportion to their numbers
//     (PEPA's passive rates), which for equal service times gives the
//     same throughput as first-come first-served. Control requests take a
//     place and leave it at once.
//   - micro: each sport its own queue of Places places, its own worker
//     and node.
//   - fair: each sport its own queue of Places places; a node that is
//     free picks the next request from the sports waiting for it, in
//     turn (each waiting sport at the same rate), and a sport with two
//     replicas is picked by whichever frees first. One request in flight
//     per node, as the service lets by default. Control requests touch no
//     node and are not modelled.
//
// Why a lossy pool of places predicts a service whose queue holds
// thousands: below saturation both serve what they are offered; at
// saturation both admit requests whatever their sport, so every sport is
// served in proportion to its demand — the cold sports' throughput falls
// as the hot sport's demand grows, which is the paper's finding. Only
// near saturation does the pool's size matter, and there the pool of
// workers is what the service has too.
package ticketmodel

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Spec describes the system to model.
type Spec struct {
	Arch      string              // micro, queue, queue-rep or fair
	Sports    []string            // in catalogue order
	Placement map[string][]string // the nodes holding each sport
	// Places is the size of the pool of places: the queue architectures'
	// workers, and for micro and fair each sport's queue in the model.
	Places int
	// Control says whether the model has a control stream (it is left
	// out under micro and fair, whose control requests touch nothing
	// shared with the sports).
	Control bool
}

// Names of a model's rates and actions. Sports and nodes are written into
// identifiers as they are when they are identifiers already, else as
// sport<i> and node<i>.
type Names struct {
	sport map[string]string
	node  map[string]string
}

// identRE: names used as they are. No underscores, so that the actions
// arrive_<sport>_<node> cannot be read two ways.
var identRE = regexp.MustCompile(`^[a-z][a-z0-9]*$`)

// fresh returns id if it is an identifier not used yet, else the first
// of prefix1, prefix2, … not used.
func fresh(id, prefix string, used map[string]bool) string {
	if identRE.MatchString(id) && !used[id] {
		return id
	}
	for i := 1; ; i++ {
		if c := fmt.Sprintf("%s%d", prefix, i); !used[c] {
			return c
		}
	}
}

func newNames(spec Spec) (*Names, []string, error) {
	n := &Names{sport: map[string]string{}, node: map[string]string{}}
	used := map[string]bool{"control": true} // the control stream's
	for _, s := range spec.Sports {
		if s == "control" {
			return nil, nil, fmt.Errorf("ticketmodel: a sport may not be called control: the load test's control stream has that name")
		}
		if _, dup := n.sport[s]; dup {
			return nil, nil, fmt.Errorf("ticketmodel: sport %q twice", s)
		}
		id := fresh(strings.ToLower(s), "sport", used)
		used[id] = true
		n.sport[s] = id
	}
	var nodes []string
	for _, s := range spec.Sports {
		reps := spec.Placement[s]
		if len(reps) == 0 {
			return nil, nil, fmt.Errorf("ticketmodel: no node holds sport %q", s)
		}
		for _, nd := range reps {
			if _, ok := n.node[nd]; !ok {
				n.node[nd] = ""
				nodes = append(nodes, nd)
			}
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodeLess(nodes[i], nodes[j]) })
	for _, nd := range nodes {
		id := fresh(strings.ToLower(nd), "node", used)
		used[id] = true
		n.node[nd] = id
	}
	return n, nodes, nil
}

// nodeLess orders db2 before db10.
func nodeLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// Rate is the name of the rate at which sport (or "control") arrives.
func (n *Names) Rate(sport string) string {
	if sport == "control" {
		return "rate_control"
	}
	return "rate_" + n.sport[sport]
}

// Service is the name of node's service rate.
func (n *Names) Service(node string) string { return "mu_" + n.node[node] }

// arrive is the action of sport's requests arriving for node (node ""
// under fair and micro, where a request does not choose a replica on
// arrival).
func (n *Names) arrive(sport, node string) string {
	if node == "" {
		return "arrive_" + n.sport[sport]
	}
	return "arrive_" + n.sport[sport] + "_" + n.node[node]
}

// Model is a generated model: its PEPA text and how to read its results.
type Model struct {
	Spec  Spec
	Text  string
	Names *Names
	Nodes []string
	// Arrivals lists, per sport and "control", the actions whose summed
	// throughput is that sport's.
	Arrivals map[string][]string
}

// New writes the model of spec. Every rate is 1 until calibrated.
func New(spec Spec) (*Model, error) {
	if spec.Places < 1 {
		return nil, fmt.Errorf("ticketmodel: %d places", spec.Places)
	}
	if len(spec.Sports) == 0 {
		return nil, fmt.Errorf("ticketmodel: no sports")
	}
	names, nodes, err := newNames(spec)
	if err != nil {
		return nil, err
	}
	m := &Model{Spec: spec, Names: names, Nodes: nodes, Arrivals: map[string][]string{}}
	var b strings.Builder
	switch spec.Arch {
	case "queue", "queue-rep":
		m.shared(&b)
	case "micro":
		if err := m.micro(&b); err != nil {
			return nil, err
		}
	case "fair":
		m.fair(&b)
	default:
		return nil, fmt.Errorf("ticketmodel: unknown architecture %q (micro, queue, queue-rep, fair)", spec.Arch)
	}
	m.Text = b.String()
	return m, nil
}

func (m *Model) header(b *strings.Builder, what string) {
	n := m.Names
	fmt.Fprintf(b, "/*\n * The tickets service's %s architecture (logbook tickets serve --arch %s).\n", what, m.Spec.Arch)
	b.WriteString(" * Written by lab/ticketmodel; rates in requests per second.\n")
	for _, s := range m.Spec.Sports {
		if n.sport[s] != s {
			fmt.Fprintf(b, " * %s is sport %q.\n", n.sport[s], s)
		}
	}
	for _, nd := range m.Nodes {
		if n.node[nd] != nd {
			fmt.Fprintf(b, " * %s is node %q.\n", n.node[nd], nd)
		}
	}
	b.WriteString(" */\n\n")
	for _, s := range m.Spec.Sports {
		fmt.Fprintf(b, "%s = 1.0;\t// offered requests of %s\n", n.Rate(s), s)
	}
	if m.Spec.Control {
		fmt.Fprintf(b, "%s = 1.0;\t// offered control requests\n", n.Rate("control"))
	}
	for _, nd := range m.Nodes {
		fmt.Fprintf(b, "%s = 1.0;\t// service rate of node %s\n", n.Service(nd), nd)
	}
}

// shared writes queue and queue-rep: a pool of places (the workers), each
// request holding its place until its node has served it.
func (m *Model) shared(b *strings.Builder) {
	n := m.Names
	what := "shared-queue"
	if m.Spec.Arch == "queue-rep" {
		what = "replicated shared-queue"
	}
	m.header(b, what)
	fmt.Fprintf(b, "n = %d;\t// workers: requests being served or waiting at a node\n", m.Spec.Places)
	if m.Spec.Control {
		b.WriteString("w = 10000.0;\t// a worker's turnaround for a control request\n")
	}
	// Each sport's stream is split evenly among its replicas.
	for _, s := range m.Spec.Sports {
		if k := len(m.Spec.Placement[s]); k > 1 {
			fmt.Fprintf(b, "%s_each = %s / %d;\n", n.Rate(s), n.Rate(s), k)
		}
	}
	b.WriteString("\n")
	var arrivals, free, coopArrive, serves []string
	var places []string
	for _, s := range m.Spec.Sports {
		reps := m.Spec.Placement[s]
		rate := n.Rate(s)
		if len(reps) > 1 {
			rate += "_each"
		}
		for _, nd := range reps {
			act := n.arrive(s, nd)
			m.Arrivals[s] = append(m.Arrivals[s], act)
			arrivals = append(arrivals, fmt.Sprintf("(%s, %s).Requests", act, rate))
			place := "At_" + n.sport[s] + "_" + n.node[nd]
			free = append(free, fmt.Sprintf("(%s, T).%s", act, place))
			coopArrive = append(coopArrive, act)
			places = append(places, fmt.Sprintf("%s = (serve_%s, T).Free;", place, n.node[nd]))
		}
	}
	if m.Spec.Control {
		m.Arrivals["control"] = []string{"arrive_control"}
		arrivals = append(arrivals, fmt.Sprintf("(arrive_control, %s).Requests", n.Rate("control")))
		free = append(free, "(arrive_control, T).Control")
		coopArrive = append(coopArrive, "arrive_control")
		places = append(places, "Control = (done_control, w).Free;")
	}
	var nodes []string
	for _, nd := range m.Nodes {
		serves = append(serves, "serve_"+n.node[nd])
		nodes = append(nodes, "Node_"+n.node[nd])
	}
	b.WriteString("// The load: every stream, one arrival at a time.\n")
	fmt.Fprintf(b, "Requests = %s;\n\n", strings.Join(arrivals, "\n\t+ "))
	b.WriteString("// One place (a worker): free, or holding a request until its node serves it.\n")
	fmt.Fprintf(b, "Free = %s;\n", strings.Join(free, "\n\t+ "))
	for _, p := range places {
		b.WriteString(p + "\n")
	}
	b.WriteString("\n// The store nodes: one exponential server each, shared by the places waiting on it.\n")
	for _, nd := range m.Nodes {
		fmt.Fprintf(b, "Node_%s = (serve_%s, %s).Node_%s;\n", n.node[nd], n.node[nd], n.Service(nd), n.node[nd])
	}
	fmt.Fprintf(b, "\nRequests <%s> Free[n] <%s> (%s)\n", strings.Join(coopArrive, ", "), strings.Join(serves, ", "), strings.Join(nodes, " || "))
}

// micro writes one queue, worker and node per sport, sharing nothing.
func (m *Model) micro(b *strings.Builder) error {
	n := m.Names
	m.header(b, "microservices")
	fmt.Fprintf(b, "k = %d;\t// places in each sport's queue (in the model)\n\n", m.Spec.Places)
	var parts []string
	owner := map[string]string{}
	for _, s := range m.Spec.Sports {
		reps := m.Spec.Placement[s]
		if len(reps) != 1 {
			return fmt.Errorf("ticketmodel: micro keeps each sport on one node, %q is on %d", s, len(reps))
		}
		if o, ok := owner[reps[0]]; ok {
			return fmt.Errorf("ticketmodel: micro gives each sport a node of its own, but %q and %q share %s", o, s, reps[0])
		}
		owner[reps[0]] = s
		sp, nd := n.sport[s], n.node[reps[0]]
		act := n.arrive(s, "")
		m.Arrivals[s] = []string{act}
		fmt.Fprintf(b, "Load_%s = (%s, %s).Load_%s;\n", sp, act, n.Rate(s), sp)
		fmt.Fprintf(b, "Free_%s = (%s, T).Wait_%s;\n", sp, act, sp)
		fmt.Fprintf(b, "Wait_%s = (serve_%s, T).Free_%s;\n", sp, nd, sp)
		fmt.Fprintf(b, "Node_%s = (serve_%s, %s).Node_%s;\n\n", nd, nd, n.Service(reps[0]), nd)
		parts = append(parts, fmt.Sprintf("(Load_%s <%s> Free_%s[k] <serve_%s> Node_%s)", sp, act, sp, nd, nd))
	}
	b.WriteString(strings.Join(parts, "\n|| ") + "\n")
	return nil
}

// fair writes a queue per sport and nodes that take turns among the
// sports waiting for them.
func (m *Model) fair(b *strings.Builder) {
	n := m.Names
	m.header(b, "fair")
	fmt.Fprintf(b, "k = %d;\t// places in each sport's queue (in the model)\n", m.Spec.Places)
	b.WriteString("p = 10000.0;\t// a free node's rate of taking the next request, per sport waiting\n\n")
	var sportParts, coop []string
	picks := map[string][]string{} // node → its pick prefixes
	for _, s := range m.Spec.Sports {
		sp := n.sport[s]
		act := n.arrive(s, "")
		m.Arrivals[s] = []string{act}
		fmt.Fprintf(b, "Load_%s = (%s, %s).Load_%s;\n", sp, act, n.Rate(s), sp)
		fmt.Fprintf(b, "Free_%s = (%s, T).Wait_%s;\n", sp, act, sp)
		var waits []string
		for _, nd := range m.Spec.Placement[s] {
			id := n.node[nd]
			pick := fmt.Sprintf("pick_%s_%s", sp, id)
			waits = append(waits, fmt.Sprintf("(%s, T).On_%s_%s", pick, sp, id))
			fmt.Fprintf(b, "On_%s_%s = (done_%s, T).Free_%s;\n", sp, id, id, sp)
			picks[nd] = append(picks[nd], pick)
			coop = append(coop, pick)
		}
		fmt.Fprintf(b, "Wait_%s = %s;\n\n", sp, strings.Join(waits, " + "))
		sportParts = append(sportParts, fmt.Sprintf("(Load_%s <%s> Free_%s[k])", sp, act, sp))
	}
	var nodes []string
	for _, nd := range m.Nodes {
		id := n.node[nd]
		var alts []string
		for _, pk := range picks[nd] {
			alts = append(alts, fmt.Sprintf("(%s, p).Busy_%s", pk, id))
		}
		fmt.Fprintf(b, "Node_%s = %s;\n", id, strings.Join(alts, " + "))
		fmt.Fprintf(b, "Busy_%s = (done_%s, %s).Node_%s;\n", id, id, n.Service(nd), id)
		nodes = append(nodes, "Node_"+id)
		coop = append(coop, "done_"+id)
	}
	fmt.Fprintf(b, "\n(%s)\n<%s>\n(%s)\n", strings.Join(sportParts, " || "), strings.Join(coop, ", "), strings.Join(nodes, " || "))
}
