package cli

import (
	"github.com/spf13/cobra"

	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/internal/progress"
	"github.com/logbook/logbook/lab/bench"
)

func newBenchRegistryCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Time schema registry lookups and checked registrations",
		Long: `Measures the schema registry: lookups of a schema by id over HTTP, and
registrations checked for compatibility against earlier versions.`,
		Example: `  logbook bench registry --lookups 100000 --versions 100`,
		Args:    cliutil.NoArgs,
	}
	fs := cmd.Flags()
	var bf benchFlags
	bf.register(cmd)
	var cfg bench.RegistryConfig
	fs.IntVar(&cfg.Lookups, "lookups", 500_000, "schema lookups by id over HTTP")
	// 64 closed-loop clients keep the server busy: fewer leave it idle
	// between round trips; more only lengthen the queue (docs/benchmarks.md).
	fs.IntVar(&cfg.Writers, "clients", 64, "concurrent closed-loop lookup clients (over 4 pipelined keep-alive connections)")
	fs.IntVar(&cfg.Versions, "versions", 100, "earlier versions each timed registration is checked against (FULL_TRANSITIVE)")
	fs.IntVar(&cfg.Fields, "fields", 50, "fields of the registered record")
	fs.IntVar(&cfg.Timed, "timed", 10, "registrations timed after the earlier versions")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if cfg.Lookups <= 0 || cfg.Writers <= 0 || cfg.Versions <= 0 || cfg.Fields <= 1 || cfg.Timed <= 0 {
			return cliutil.Usage("--lookups, --clients, --versions and --timed must be positive, --fields above 1")
		}
		// The registry is served as logbook flights serve serves it, collector included.
		server.TuneGC(cmd.Context(), server.LeanFloor)
		return benchOn(cmd, e, &bf, func(s *cliutil.OpenedStore, _ *progress.Counter) (table, error) {
			return bench.RunRegistry(cmd.Context(), s, cfg)
		})
	}
	return cmd
}
