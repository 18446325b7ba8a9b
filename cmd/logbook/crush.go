package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/progress"
	"github.com/logbook/logbook/lab/bench"
)

func newBenchCrushCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "crush", Short: "many live stream queries at once under a concurrency limit", Args: noArgs}
	fs := cmd.Flags()
	var bf benchFlags
	bf.register(fs)
	var cfg bench.CrushConfig
	fs.IntVar(&cfg.IDs, "ids", 100_000, "streams to write, and live queries to run in by-id mode")
	fs.IntVar(&cfg.EventsPerID, "events-per-id", 100, "events per stream")
	fs.IntVar(&cfg.Buffer, "buffer", 100, "the queries' max-buffer-size: events per backend query")
	fs.IntVar(&cfg.MaxConcurrentQueries, "max-concurrent-queries", 100, "backend queries allowed to run at once")
	fs.StringVar(&cfg.Mode, "mode", bench.CrushByID, "by-id: one EventsByStream query per stream; all-events: one AllEvents query fanned out to a projection per stream")
	fs.IntVar(&cfg.Writers, "writers", 8, "concurrent writers in the write phase")
	fs.IntVar(&cfg.Batch, "batch", 0, "events per append in the write phase (default: events-per-id, at most 1000)")
	fs.IntVar(&cfg.Payload, "payload", 32, "bytes of data per event")
	fs.BoolVar(&cfg.Poll, "poll", false, "hide the store's commit signal: live queries poll every --refresh-interval, as on a SQL backend")
	fs.DurationVar(&cfg.RefreshInterval, "refresh-interval", time.Second, "how often polling queries ask again (with --poll)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if cfg.IDs <= 0 || cfg.EventsPerID <= 0 || cfg.Buffer <= 0 || cfg.MaxConcurrentQueries <= 0 || cfg.Writers <= 0 || cfg.Batch < 0 || cfg.Payload < 0 || cfg.RefreshInterval <= 0 {
			return usageError{"--ids, --events-per-id, --buffer, --max-concurrent-queries, --writers and --refresh-interval must be positive, --batch and --payload not negative"}
		}
		if cfg.Mode != bench.CrushByID && cfg.Mode != bench.CrushAllEvents {
			return usageError{"--mode must be by-id or all-events"}
		}
		// Room for every permitted query plus the writers of the write
		// phase: the permitter, not the pool, must be what bounds the
		// queries.
		bf.store.pgConns = int32(cfg.MaxConcurrentQueries + cfg.Writers + 4)
		return benchOn(cmd, e, &bf, func(s *openedStore, p *progress.Counter) (table, error) {
			if s.pg != nil {
				pool := s.pg.Pool()
				cfg.BusyConns = func() int { return int(pool.Stat().AcquiredConns()) }
			}
			cfg.Progress = p
			return bench.RunCrush(cmd.Context(), s, cfg)
		})
	}
	return cmd
}
