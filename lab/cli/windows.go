package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/spf13/cobra"

	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/internal/progress"
	"github.com/logbook/logbook/lab/bench"
)

// newBenchWindowsCmd is `logbook bench windows`: windowed aggregation of a
// generated day of notifications (lab/bench/windows.go).
func newBenchWindowsCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "windows",
		Short: "Aggregate a day of events into windows, query them under load",
		Long: `Appends a generated day of notification events, aggregates them into
one-minute windows rolled up to hours and days (events/s), then times pull
queries while a live ingest continues. --verify recomputes every minute
window from the raw events and counts mismatches.`,
		Example: `  logbook bench windows --events 1000000 --verify`,
		Args:    cliutil.NoArgs,
	}
	fs := cmd.Flags()
	var bf benchFlags
	// The bench needs an empty store: by default a temporary one.
	bf.store.Register(fs, "")
	bf.out = cliutil.OutputFlag(cmd)
	var cfg bench.WindowsConfig
	fs.IntVar(&cfg.Events, "events", 10_000_000, "events appended first, then aggregated (timed)")
	fs.IntVar(&cfg.Senders, "senders", 1000, "distinct senders")
	fs.IntVar(&cfg.Types, "types", 20, "distinct notification types")
	fs.IntVar(&cfg.LiveEvents, "live-events", 0, "events appended while queries run (default events/10, at most 1,000,000)")
	fs.IntVar(&cfg.LiveRate, "live-rate", 0, "events per second of that live ingest (0: as fast as the store takes them)")
	fs.IntVar(&cfg.MaxBatch, "batch", 65536, "events per aggregation commit")
	fs.BoolVar(&cfg.Verify, "verify", false, "recompute every minute window from the raw events and count mismatches")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if cfg.Events <= 0 || cfg.Senders <= 0 || cfg.Senders > 65536 || cfg.Types <= 0 || cfg.Types > 256 || cfg.LiveEvents < 0 || cfg.MaxBatch <= 0 {
			return cliutil.Usage("--events and --batch must be positive, --senders 1-65536, --types 1-256, --live-events not negative")
		}
		if bf.store.Data == "" && bf.store.URL == "" {
			dir, err := os.MkdirTemp("", "logbook-bench-windows-store-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			bf.store.Data = dir
		}
		// The aggregation runs as it would in logbook notify serve,
		// collector included.
		server.TuneGC(cmd.Context(), server.AllocFloor)
		return benchOn(cmd, e, &bf, func(s *cliutil.OpenedStore, _ *progress.Counter) (table, error) {
			if p, ok := s.Store.(interface{ Metrics() *pebble.Metrics }); ok {
				cfg.Settle = func(ctx context.Context) error { return settle(ctx, p.Metrics) }
			}
			return bench.RunWindows(cmd.Context(), s, cfg)
		})
	}
	return cmd
}

// settle waits, up to two minutes, until the embedded store has run no
// flush or compaction for a second: the state a store reaches when its
// writers pause, and the one the aggregation's catch-up is timed from.
// (Pebble's estimate of compaction debt never reaches zero on a log that
// only grows, so the test is on work running.)
func settle(ctx context.Context, metrics func() *pebble.Metrics) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for quiet := 0; quiet < 10; {
		m := metrics()
		if m.Compact.NumInProgress == 0 && m.Flush.NumInProgress == 0 {
			quiet++
		} else {
			quiet = 0
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("flushes and compactions still running: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}
