package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"text/tabwriter"

	"github.com/logbook/logbook/internal/bench"
)

const benchDataDir = "./data-bench"

func runBench(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "bench", []subcommand{
		{"append", runBenchAppend},
		{"read", runBenchRead},
		{"commands", runBenchCommands},
		{"crush", runBenchCrush},
		{"registry", runBenchRegistry},
	}, true, args)
}

// startProfile writes a CPU profile to file until stop is called; with an
// empty file name it does nothing.
func startProfile(file string) (stop func(), err error) {
	if file == "" {
		return func() {}, nil
	}
	pf, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		pf.Close()
	}, nil
}

// cutProfileFlag takes --cpuprofile FILE out of a bench's arguments, so
// that every benchmark can be profiled the same way.
func cutProfileFlag(args []string) ([]string, string, error) {
	var rest []string
	profile := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--cpuprofile" || a == "-cpuprofile":
			if i+1 >= len(args) {
				return nil, "", usageError{"--cpuprofile needs a file name"}
			}
			profile = args[i+1]
			i++
		case strings.HasPrefix(a, "--cpuprofile="):
			profile = strings.TrimPrefix(a, "--cpuprofile=")
		default:
			rest = append(rest, a)
		}
	}
	return rest, profile, nil
}

func runBenchAppend(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "bench append", "bench append [--events N] [--batch B] [--writers W] [--payload BYTES] [--streams S] [--data DIR] [--json]")
	var sf storeFlags
	sf.register(fs, benchDataDir)
	var cfg bench.AppendConfig
	fs.IntVar(&cfg.Events, "events", 1_000_000, "events to append")
	fs.IntVar(&cfg.Batch, "batch", 100, "events per append call")
	fs.IntVar(&cfg.Writers, "writers", 1, "concurrent writers")
	fs.IntVar(&cfg.Payload, "payload", 100, "bytes of data per event")
	fs.IntVar(&cfg.Streams, "streams", 1000, "streams to spread the events over")
	fs.BoolVar(&cfg.StoreIDs, "store-ids", false, "let the store generate event ids instead of the writers")
	fs.BoolVar(&cfg.ExpectAny, "expect-any", false, "append with expected version any instead of the exact version")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	if cfg.Events <= 0 || cfg.Batch <= 0 || cfg.Writers <= 0 || cfg.Streams <= 0 || cfg.Payload < 0 {
		return usageError{"--events, --batch, --writers and --streams must be positive and --payload not negative"}
	}
	return benchOn(&sf, e, *asJSON, func(s *openedStore) (table, error) {
		return bench.RunAppend(ctx, s, cfg, s.fsyncs)
	})
}

func runBenchCommands(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "bench commands", "bench commands [--aggregates A] [--commands C] [--writers W] [--shards N] [--codec json|avro] [--data DIR] [--json]")
	var sf storeFlags
	sf.register(fs, benchDataDir)
	var cfg bench.CommandsConfig
	fs.IntVar(&cfg.Aggregates, "aggregates", 10_000, "counter aggregates to spread the commands over")
	fs.IntVar(&cfg.Commands, "commands", 500_000, "commands to send")
	fs.IntVar(&cfg.Writers, "writers", 256, "concurrent closed-loop writers")
	fs.IntVar(&cfg.Shards, "shards", 0, "shards of the aggregate runtime (0: its default)")
	fs.StringVar(&cfg.Codec, "codec", "json", "event codec: json, or avro (the schema registry's wire format)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	if cfg.Aggregates <= 0 || cfg.Commands <= 0 || cfg.Writers <= 0 || cfg.Shards < 0 {
		return usageError{"--aggregates, --commands and --writers must be positive, --shards not negative"}
	}
	if cfg.Codec != "json" && cfg.Codec != "avro" {
		return usageError{"--codec is json or avro"}
	}
	return benchOn(&sf, e, *asJSON, func(s *openedStore) (table, error) {
		return bench.RunCommands(ctx, s, cfg, s.fsyncs)
	})
}

func runBenchRead(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "bench read", "bench read [--batch B] [--data DIR] [--json]")
	var sf storeFlags
	sf.register(fs, benchDataDir)
	batch := fs.Int("batch", 1000, "events per read call")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *batch <= 0 {
		return usageError{"--batch must be positive"}
	}
	return benchOn(&sf, e, *asJSON, func(s *openedStore) (table, error) {
		return bench.RunRead(ctx, s, *batch)
	})
}

// table is a benchmark result: JSON for machines, rows for people.
type table interface{ Rows() [][2]string }

// benchOn opens the store, runs a benchmark on it and reports the result.
func benchOn(sf *storeFlags, e *env, asJSON bool, run func(s *openedStore) (table, error)) error {
	s, err := sf.open()
	if err != nil {
		return err
	}
	defer s.Close()
	res, err := run(s)
	if err != nil {
		return err
	}
	return report(e.stdout, asJSON, res, res.Rows())
}

// report prints v as JSON, or rows as an aligned table.
func report(w io.Writer, asJSON bool, v any, rows [][2]string) error {
	if asJSON {
		enc := json.NewEncoder(w)
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}
