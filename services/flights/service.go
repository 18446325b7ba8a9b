package flights

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/projection"
)

// Codecs of the three aggregates' events; the names are what the log
// stores, and what the validation view reads.
func rotationEvents() *aggregate.JSONCodec[RotationEvent] {
	return aggregate.NewJSONCodec[RotationEvent]().
		Register("RotationCreated", 1, RotationCreated{}).
		Register("RotationRemoved", 1, RotationRemoved{}).
		Register("LegsAdded", 1, LegsAdded{}).
		Register("LegRemoved", 1, LegRemoved{}).
		Register("LegMoved", 1, LegMoved{})
}

func airplaneEvents() *aggregate.JSONCodec[AirplaneEvent] {
	return aggregate.NewJSONCodec[AirplaneEvent]().
		Register("AirplaneCreated", 1, AirplaneCreated{}).
		Register("AirplaneRemoved", 1, AirplaneRemoved{}).
		Register("RotationAssigned", 1, RotationAssigned{}).
		Register("RotationUnassigned", 1, RotationUnassigned{}).
		Register("AirplaneMinGroundTimeSet", 1, AirplaneMinGroundTimeSet{})
}

func airportEvents() *aggregate.JSONCodec[AirportEvent] {
	return aggregate.NewJSONCodec[AirportEvent]().Register("AirportMinGroundTimeSet", 1, AirportMinGroundTimeSet{})
}

// Service is the flights write model (three aggregate runtimes) and its
// validation read model, on one store.
type Service struct {
	Store      eventstore.Store
	Rotations  *aggregate.Runtime[Rotation, RotationCommand, RotationEvent]
	Airplanes  *aggregate.Runtime[Airplane, AirplaneCommand, AirplaneEvent]
	Airports   *aggregate.Runtime[Airport, AirportCommand, AirportEvent]
	Validation *projection.Live[*Validation]
}

// Options tune a Service.
type Options struct {
	Aggregates aggregate.Options     // for all three runtimes
	Registerer prometheus.Registerer // metrics (nil: none)
	Logger     *slog.Logger          // for the runtimes and the view (nil: slog.Default())
	// CommandsOnly starts the runtimes without the validation view: a
	// write node of a cluster whose queries go to read replicas, which
	// would otherwise spend CPU keeping a view nobody asks. Its view
	// queries answer 421.
	CommandsOnly bool
}

// rotationWeight is about what a rotation's state holds in memory: its
// legs (a Leg and its strings, about 250 bytes) and their ids' index
// (about 100 bytes each). A planner's rotation of 750 legs weighs a
// quarter of a megabyte; the aggregate cache keeps 32 MiB of those not
// in use by default (aggregate.Options.CacheBytes; flights serve
// --aggregate-cache-mib), the rest are reloaded from their snapshot
// when used again.
func rotationWeight(r Rotation) int { return 256 + 350*len(r.Legs) }

// New starts the runtimes and the validation view (unless
// CommandsOnly), which catches up from the log in the background
// (Validation.WaitCaughtUp).
func New(ctx context.Context, store eventstore.Store, opts Options) (*Service, error) {
	s := &Service{Store: store}
	ao := opts.Aggregates
	ao.Registerer = opts.Registerer
	if ao.Logger == nil {
		ao.Logger = opts.Logger
	}
	var err error
	s.Rotations, err = aggregate.New(store, aggregate.Definition[Rotation, RotationCommand, RotationEvent]{
		Kind:          "rotation",
		Initial:       func(id string) Rotation { return Rotation{ID: id} },
		Decide:        DecideRotation,
		Evolve:        EvolveRotation,
		Events:        rotationEvents(),
		Snapshots:     RotationSnapshots{},
		SnapshotEvery: 250,
		Weight:        rotationWeight,
	}, ao)
	if err != nil {
		return nil, err
	}
	s.Airplanes, err = aggregate.New(store, aggregate.Definition[Airplane, AirplaneCommand, AirplaneEvent]{
		Kind:    "airplane",
		Initial: func(id string) Airplane { return Airplane{Registration: id} },
		Decide:  DecideAirplane,
		Evolve:  EvolveAirplane,
		Events:  airplaneEvents(),
	}, ao)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.Airports, err = aggregate.New(store, aggregate.Definition[Airport, AirportCommand, AirportEvent]{
		Kind:    "airport",
		Initial: func(id string) Airport { return Airport{Code: id} },
		Decide:  DecideAirport,
		Evolve:  EvolveAirport,
		Events:  airportEvents(),
	}, ao)
	if err != nil {
		s.Close()
		return nil, err
	}
	if opts.CommandsOnly {
		return s, nil
	}
	s.Validation, err = projection.StartLive(ctx, store, func(context.Context) (*Validation, error) {
		return NewValidation(), nil
	}, projection.Options{Name: "validation", Registerer: opts.Registerer, Logger: opts.Logger})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("flights: validation view: %w", err)
	}
	return s, nil
}

// NewReplica starts only the validation view, on a store that follows a
// primary (httpreplica.Store): a read replica in another process, serving the
// validation queries from a view it builds from the log on its own, so
// that reads scale out by adding replicas. Its Handler refuses commands.
func NewReplica(ctx context.Context, store eventstore.Store, opts Options) (*Service, error) {
	s := &Service{Store: store}
	var err error
	s.Validation, err = projection.StartLive(ctx, store, func(context.Context) (*Validation, error) {
		return NewValidation(), nil
	}, projection.Options{Name: "validation", Registerer: opts.Registerer, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("flights: validation view: %w", err)
	}
	return s, nil
}

// Close stops the runtimes and the view.
func (s *Service) Close() error {
	var errs []error
	if s.Validation != nil {
		errs = append(errs, s.Validation.Close())
	}
	if s.Rotations != nil {
		errs = append(errs, s.Rotations.Close())
	}
	if s.Airplanes != nil {
		errs = append(errs, s.Airplanes.Close())
	}
	if s.Airports != nil {
		errs = append(errs, s.Airports.Close())
	}
	return errors.Join(errs...)
}
