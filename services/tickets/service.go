package tickets

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/projection"
)

// Kind is the ticket aggregate's kind: its streams are "ticket-<id>" and
// its events are tagged "ticket".
const Kind = "ticket"

func ticketEvents() *aggregate.JSONCodec[Event] {
	return aggregate.NewJSONCodec[Event]().
		Register("TicketBooked", 1, TicketBooked{}).
		Register("TicketReturned", 1, TicketReturned{})
}

// Config configures a Service.
type Config struct {
	Catalogue Catalogue
	// Gate is what every request runs through (nil: Direct). The
	// service closes it when it closes.
	Gate       Gate
	Aggregates aggregate.Options
	Registerer prometheus.Registerer // metrics (nil: none)
}

// Service is the ticketing service: the ticket aggregates (the write
// model), the search view (the read model), and the gate through which
// every request reaches the store.
//
// Book and return append events to the ticket's stream; the search view
// follows the log and answers searches. This is the split by operation
// that the paper proposes as future work — book and return produce events,
// search consumes them — and it is simply how logbook works: the log is
// the event stream between them.
type Service struct {
	Catalogue Catalogue
	Store     eventstore.Store
	Tickets   *aggregate.Runtime[Ticket, Command, Event]
	Search    *projection.Live[*Search]
	Gate      Gate
	gate      GateInfo // what Gate.Describe said

	served  []atomic.Uint64 // completed requests per sport
	control atomic.Uint64
}

// New starts the service on store. If it fails, it closes cfg.Gate.
func New(ctx context.Context, store eventstore.Store, cfg Config) (*Service, error) {
	gate := cfg.Gate
	if gate == nil {
		gate = Direct()
	}
	cat := cfg.Catalogue
	if err := cat.Validate(); err != nil {
		gate.Close()
		return nil, err
	}
	s := &Service{Catalogue: cat, Store: store, Gate: gate, gate: gate.Describe(), served: make([]atomic.Uint64, len(cat.Sports))}
	ao := cfg.Aggregates
	ao.Registerer = cfg.Registerer
	var err error
	s.Tickets, err = aggregate.New(store, aggregate.Definition[Ticket, Command, Event]{
		Kind: Kind,
		Initial: func(id string) Ticket {
			t, err := cat.Ticket(id)
			if err != nil {
				return Ticket{ID: id} // no sport: Decide refuses it
			}
			return t
		},
		Decide: Decide,
		Evolve: Evolve,
		Events: ticketEvents(),
	}, ao)
	if err != nil {
		gate.Close()
		return nil, err
	}
	s.Search, err = projection.StartLive(ctx, store, func(context.Context) (*Search, error) {
		return NewSearch(cat), nil
	}, projection.Options{Name: "tickets-search", Filter: eventstore.Tagged(Kind), Registerer: cfg.Registerer})
	if err != nil {
		s.Tickets.Close()
		gate.Close()
		return nil, fmt.Errorf("tickets: search view: %w", err)
	}
	if cfg.Registerer != nil {
		if err := s.register(cfg.Registerer); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close stops the gate, the view and the runtime.
func (s *Service) Close() error {
	s.Gate.Close()
	return errors.Join(s.Search.Close(), s.Tickets.Close())
}

// Find answers a search through the gate.
func (s *Service) Find(ctx context.Context, q Query) (Result, error) {
	if err := q.Validate(s.Catalogue); err != nil {
		return Result{}, err
	}
	sport := s.Catalogue.SportIndex(q.Sport)
	var res Result
	err := s.Gate.Do(ctx, sport, func() error {
		res = s.Search.Current().Find(q)
		s.served[sport].Add(1)
		return nil
	})
	return res, err
}

// FindJSON is Find with the answer encoded as JSON (see
// Search.FindJSON): the view's cached answer for the position it
// reflects, once the gate lets the request in.
func (s *Service) FindJSON(ctx context.Context, q Query) ([]byte, error) {
	if err := q.Validate(s.Catalogue); err != nil {
		return nil, err
	}
	sport := s.Catalogue.SportIndex(q.Sport)
	var body []byte
	err := s.Gate.Do(ctx, sport, func() error {
		var err error
		body, err = s.Search.Current().FindJSON(q)
		s.served[sport].Add(1)
		return err
	})
	return body, err
}

// Booking is the outcome of a book or return: the ticket after it, and
// the command's result (version, log position, whether it was a retry).
type Booking struct {
	Ticket Ticket
	Result aggregate.Result[Event]
}

// Book allocates ticket id to owner. Options are the aggregate runtime's:
// an idempotency key makes a retry safe.
func (s *Service) Book(ctx context.Context, id, owner string, opts ...aggregate.Option) (Booking, error) {
	return s.execute(ctx, id, Book{Owner: owner}, opts)
}

// Return releases owner's ticket id.
func (s *Service) Return(ctx context.Context, id, owner string, opts ...aggregate.Option) (Booking, error) {
	return s.execute(ctx, id, Return{Owner: owner}, opts)
}

func (s *Service) execute(ctx context.Context, id string, cmd Command, opts []aggregate.Option) (Booking, error) {
	t, err := s.Catalogue.Ticket(id)
	if err != nil {
		return Booking{}, err
	}
	sport := s.Catalogue.SportIndex(t.Sport)
	var b Booking
	err = s.Gate.Do(ctx, sport, func() error {
		s.served[sport].Add(1) // served, whatever the answer
		var err error
		if b.Result, err = s.Tickets.Execute(ctx, id, cmd, opts...); err != nil {
			return err
		}
		b.Ticket, _, err = s.Tickets.State(ctx, id)
		return err
	})
	return b, err
}

// Control goes through the gate like any request but touches no store:
// its throughput is the service's overhead ceiling.
func (s *Service) Control(ctx context.Context) error {
	return s.Gate.Do(ctx, Control, func() error {
		s.control.Add(1)
		return nil
	})
}

// Stats are the service's counters since it started.
type Stats struct {
	// Arch names the gate (GateInfo.Name): direct, or a lab rig's
	// architecture.
	Arch string `json:"arch"`
	// Sports counts the requests each sport had served, whatever their
	// answer (a refused booking was served too).
	Sports  map[string]uint64 `json:"sports"`
	Control uint64            `json:"control"` // control requests served
	// Nodes counts the requests each of the gate's store nodes
	// completed (none for the direct gate).
	Nodes map[string]uint64 `json:"nodes"`
	// NodeBusy is each node's accepted service time in seconds (see
	// NodeMeter.Busy): with Nodes, it gives each node's measured service
	// rate over any interval.
	NodeBusy map[string]float64 `json:"node_busy_seconds"`
	// Workers is the gate's worker pool (0 if it has none).
	Workers int `json:"workers,omitempty"`
	// NodeRate is each node's capacity in requests/s (0: unlimited), and
	// Placement which nodes hold each sport.
	NodeRate  float64             `json:"node_rate"`
	Placement map[string][]string `json:"placement"`
	PerSport  int                 `json:"tickets_per_sport"`
}

// Counters writes the requests served per sport, in catalogue order,
// into sports and those completed per node, in the order of the gate's
// nodes (GateInfo), into nodes (each as long as its list), and returns the control
// requests served: what Stats counts, without building maps, for a
// caller that reads it every second.
func (s *Service) Counters(sports, nodes []uint64) (control uint64) {
	for i := range s.served {
		sports[i] = s.served[i].Load()
	}
	for i, n := range s.gate.Nodes {
		nodes[i] = n.Meter.Completed()
	}
	return s.control.Load()
}

// GateInfo is what the service's gate said it is: its name, and its
// store nodes in the order Counters writes them (none for Direct).
func (s *Service) GateInfo() GateInfo { return s.gate }

// Stats returns the counters.
func (s *Service) Stats() Stats {
	st := Stats{Arch: s.gate.Name, Sports: map[string]uint64{}, Nodes: map[string]uint64{}, NodeBusy: map[string]float64{}, Control: s.control.Load(), Placement: map[string][]string{}, PerSport: s.Catalogue.PerSport, Workers: s.gate.Workers}
	for i, name := range s.Catalogue.Sports {
		st.Sports[name] = s.served[i].Load()
	}
	for _, n := range s.gate.Nodes {
		st.Nodes[n.Name] = n.Meter.Completed()
		st.NodeBusy[n.Name] = n.Meter.Busy().Seconds()
		st.NodeRate = n.Rate
		for _, sp := range n.Sports {
			st.Placement[sp] = append(st.Placement[sp], n.Name)
		}
	}
	return st
}

func (s *Service) register(reg prometheus.Registerer) error {
	served := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "logbook_tickets_control_total", Help: "Control requests served."},
		func() float64 { return float64(s.control.Load()) })
	if err := reg.Register(served); err != nil {
		return err
	}
	for i, name := range s.Catalogue.Sports {
		c := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "logbook_tickets_served_total", Help: "Ticket requests served, by sport.", ConstLabels: prometheus.Labels{"sport": name}},
			func() float64 { return float64(s.served[i].Load()) })
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	for _, n := range s.gate.Nodes {
		c := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "logbook_tickets_node_completed_total", Help: "Requests completed by each store node of the service's gate.", ConstLabels: prometheus.Labels{"node": n.Name}},
			func() float64 { return float64(n.Meter.Completed()) })
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
