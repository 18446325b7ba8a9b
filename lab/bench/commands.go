package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logbook/logbook/engine/aggregate"
	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/registry"
	"github.com/logbook/logbook/internal/progress"
	"github.com/logbook/logbook/lab/stats"
)

// The counter aggregate of `logbook bench commands`: the smallest domain
// that still goes the whole way — decide, append with fsync, evolve, reply.

type counterState struct {
	N int `json:"n"`
}

type increment struct{ By int }

type incremented struct {
	By int `json:"by" avro:"by"`
}

// incrementedSchema is the event's Avro schema, for --codec avro.
const incrementedSchema = `{"type":"record","name":"Incremented","namespace":"bench","fields":[{"name":"by","type":"long"}]}`

var errNegative = errors.New("counter: increment must be positive")

// counterEvents returns the event codec named by codec: "json" (the
// default) or "avro", which registers the event's schema in a schema
// registry on store and writes the registry's wire format.
func counterEvents(ctx context.Context, store eventstore.Store, codec string) (aggregate.EventCodec[incremented], func(), error) {
	switch codec {
	case "", "json":
		return aggregate.NewJSONCodec[incremented]().Register("Incremented", 1, incremented{}), func() {}, nil
	case "avro":
		reg, err := registry.Open(ctx, store, registry.Options{})
		if err != nil {
			return nil, nil, err
		}
		c := registry.NewAvroCodec[incremented](reg)
		if err := c.Register(ctx, "bench.Incremented", incremented{}, incrementedSchema); err != nil {
			reg.Close()
			return nil, nil, err
		}
		return c, func() { reg.Close() }, nil
	}
	return nil, nil, fmt.Errorf("bench commands: codec %q: want json or avro", codec)
}

func counterDefinition(events aggregate.EventCodec[incremented]) aggregate.Definition[counterState, increment, incremented] {
	return aggregate.Definition[counterState, increment, incremented]{
		Kind: "counter",
		Decide: func(s counterState, c increment) ([]incremented, error) {
			if c.By <= 0 {
				return nil, errNegative
			}
			return []incremented{{By: c.By}}, nil
		},
		Evolve: func(s counterState, e incremented) counterState { return counterState{N: s.N + e.By} },
		Events: events,
	}
}

// CommandsConfig describes a command workload.
type CommandsConfig struct {
	Aggregates int
	Commands   int
	Writers    int
	Shards     int    // 0: the runtime's default
	Codec      string // the event codec: json (default) or avro
	// Progress, if set, counts the commands answered.
	Progress *progress.Counter
	// Logger receives the aggregate runtime's logs (nil: slog.Default()).
	Logger *slog.Logger
}

// CommandsResult is what `logbook bench commands` reports.
type CommandsResult struct {
	Aggregates     int     `json:"aggregates"`
	Commands       int     `json:"commands"`
	Writers        int     `json:"writers"`
	Shards         int     `json:"shards"`
	Codec          string  `json:"codec"`
	Seconds        float64 `json:"seconds"`
	CommandsPerSec float64 `json:"commands_per_sec"`
	P50MS          float64 `json:"p50_ms"`
	P99MS          float64 `json:"p99_ms"`
	MaxMS          float64 `json:"max_ms"`
	Errors         int64   `json:"errors"`
	Fsyncs         *uint64 `json:"fsyncs,omitempty"` // nil: the backend does not count them
	PeakRSSMB      float64 `json:"peak_rss_mb"`
}

// Rows renders the result as a two-column table.
func (r CommandsResult) Rows() [][2]string {
	return [][2]string{
		{"aggregates / writers / shards", fmt.Sprintf("%d / %d / %d", r.Aggregates, r.Writers, r.Shards)},
		{"event codec", r.Codec},
		{"commands", fmt.Sprint(r.Commands)},
		{"seconds", fmt.Sprintf("%.3f", r.Seconds)},
		{"commands/s", fmt.Sprintf("%.0f", r.CommandsPerSec)},
		{"command p50 / p99 / max ms", fmt.Sprintf("%.3f / %.3f / %.3f", r.P50MS, r.P99MS, r.MaxMS)},
		{"errors", fmt.Sprint(r.Errors)},
		{"fsyncs", countOrNA(r.Fsyncs)},
		{"peak RSS MiB", fmt.Sprintf("%.0f", r.PeakRSSMB)},
	}
}

// RunCommands sends cfg.Commands increments from cfg.Writers closed-loop
// writers to random counters, then checks that the counters add up.
func RunCommands(ctx context.Context, store eventstore.Store, cfg CommandsConfig, fsyncs func() uint64) (CommandsResult, error) {
	if cfg.Aggregates <= 0 || cfg.Commands <= 0 || cfg.Writers <= 0 {
		return CommandsResult{}, errors.New("bench commands: aggregates, commands and writers must be positive")
	}
	if cfg.Codec == "" {
		cfg.Codec = "json"
	}
	events, closeEvents, err := counterEvents(ctx, store, cfg.Codec)
	if err != nil {
		return CommandsResult{}, err
	}
	defer closeEvents()
	rt, err := aggregate.New(store, counterDefinition(events), aggregate.Options{Shards: cfg.Shards, Logger: cfg.Logger})
	if err != nil {
		return CommandsResult{}, err
	}
	defer rt.Close()
	cfg.Shards = rt.Options().Shards
	runID := newRunID()
	ids := make([]string, cfg.Aggregates)
	for i := range ids {
		ids[i] = runID + "-" + strconv.Itoa(i)
	}
	var (
		next    atomic.Int64
		errs    atomic.Int64
		firstMu sync.Mutex
		first   error
		wg      sync.WaitGroup
	)
	lat := make([][]time.Duration, cfg.Writers)
	var before uint64
	if fsyncs != nil {
		before = fsyncs()
	}
	cfg.Progress.Start("commands", cfg.Commands)
	start := time.Now()
	for w := range cfg.Writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			lat[w] = make([]time.Duration, 0, cfg.Commands/cfg.Writers+1)
			for next.Add(1) <= int64(cfg.Commands) {
				id := ids[rng.IntN(len(ids))]
				t0 := time.Now()
				_, err := rt.Execute(ctx, id, increment{By: 1})
				lat[w] = append(lat[w], time.Since(t0))
				cfg.Progress.Add(1)
				if err != nil {
					errs.Add(1)
					firstMu.Lock()
					if first == nil {
						first = err
					}
					firstMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if first != nil {
		return CommandsResult{}, fmt.Errorf("bench commands: %d commands failed, first: %w", errs.Load(), first)
	}
	// Every acknowledged increment must be in some counter, exactly once.
	total := 0
	for _, id := range ids {
		s, _, err := rt.State(ctx, id)
		if err != nil && !errors.Is(err, aggregate.ErrNotFound) {
			return CommandsResult{}, err
		}
		total += s.N
	}
	if total != cfg.Commands {
		return CommandsResult{}, fmt.Errorf("bench commands: counters add up to %d, %d commands were acknowledged", total, cfg.Commands)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sum := stats.Summarize(all)
	r := CommandsResult{
		Aggregates: cfg.Aggregates, Commands: cfg.Commands, Writers: cfg.Writers, Shards: cfg.Shards, Codec: cfg.Codec,
		Seconds:        stats.Round(elapsed.Seconds(), 3),
		CommandsPerSec: stats.Round(float64(cfg.Commands)/elapsed.Seconds(), 0),
		P50MS:          sum.P50, P99MS: sum.P99, MaxMS: sum.Max,
		Errors:    errs.Load(),
		PeakRSSMB: stats.Round(PeakRSSMB(), 1),
	}
	if fsyncs != nil {
		n := fsyncs() - before
		r.Fsyncs = &n
	}
	return r, nil
}
