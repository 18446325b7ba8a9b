package main

import (
	"context"

	"github.com/logbook/logbook/internal/bench"
)

func runBenchRegistry(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "bench registry", "bench registry [--lookups N] [--clients C] [--versions V] [--fields F] [--timed T] [--data DIR] [--json]")
	var sf storeFlags
	sf.register(fs, benchDataDir)
	var cfg bench.RegistryConfig
	fs.IntVar(&cfg.Lookups, "lookups", 500_000, "schema lookups by id over HTTP")
	fs.IntVar(&cfg.Writers, "clients", 16, "concurrent keep-alive lookup clients")
	fs.IntVar(&cfg.Versions, "versions", 100, "earlier versions each timed registration is checked against (FULL_TRANSITIVE)")
	fs.IntVar(&cfg.Fields, "fields", 50, "fields of the registered record")
	fs.IntVar(&cfg.Timed, "timed", 10, "registrations timed after the earlier versions")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	if cfg.Lookups <= 0 || cfg.Writers <= 0 || cfg.Versions <= 0 || cfg.Fields <= 1 || cfg.Timed <= 0 {
		return usageError{"--lookups, --clients, --versions and --timed must be positive, --fields above 1"}
	}
	return benchOn(&sf, e, *asJSON, func(s *openedStore) (table, error) {
		return bench.RunRegistry(ctx, s, cfg)
	})
}
