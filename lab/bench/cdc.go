package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/logbook/logbook/services/notify/userscdc"
)

// CDCConfig configures RunCDC.
type CDCConfig struct {
	UsersDB string // the users' database (postgres://…), wal_level=logical
	Schema  string // created for the run and dropped after (default logbook_cdc_bench)
	Users   int    // users generated before the snapshot
	Changes int    // settings changes timed, one transaction each
	Load    int    // other changes per second written meanwhile (0: none)
	Dir     string // the view's directory ("" a temporary one)
}

// CDCResult is what RunCDC measured.
type CDCResult struct {
	Users             int     `json:"users"`
	SnapshotS         float64 `json:"snapshot_s"`
	SnapshotUsersPerS float64 `json:"snapshot_users_per_s"`
	Changes           int     `json:"changes"`
	LoadPerS          int     `json:"load_per_s"`
	LoadWritten       int64   `json:"load_written"`
	MeanMS            float64 `json:"mean_ms"`
	P50MS             float64 `json:"p50_ms"`
	P99MS             float64 `json:"p99_ms"`
	MaxMS             float64 `json:"max_ms"`
	FloorP99MS        float64 `json:"floor_p99_ms"`
	Pass              bool    `json:"pass"`
}

// Rows renders the result as a two-column table.
func (r CDCResult) Rows() [][2]string {
	verdict := "pass"
	if !r.Pass {
		verdict = "FAIL"
	}
	return [][2]string{
		{"users in the snapshot", fmt.Sprint(r.Users)},
		{"snapshot s (users/s)", fmt.Sprintf("%.2f (%.0f)", r.SnapshotS, r.SnapshotUsersPerS)},
		{"settings changes timed", fmt.Sprint(r.Changes)},
		{"other changes/s meanwhile (written)", fmt.Sprintf("%d (%d)", r.LoadPerS, r.LoadWritten)},
		{"visible to the check: mean / p50 ms", fmt.Sprintf("%.2f / %.2f", r.MeanMS, r.P50MS)},
		{"p99 / max ms", fmt.Sprintf("%.2f / %.2f", r.P99MS, r.MaxMS)},
		{"floor: p99 ≤ 1000 ms", verdict},
	}
}

const cdcFloor = time.Second

// RunCDC measures how soon a settings change made in the users' database
// is seen by the preference check: it creates the source tables in a
// fresh schema, generates cfg.Users users, starts a follower (timing the
// snapshot), then makes cfg.Changes settings changes one transaction at a
// time while other writers change names at cfg.Load per second, and
// times each from its transaction's start until the view's lookup shows
// it. The schema, publication and slot are dropped at the end.
func RunCDC(ctx context.Context, cfg CDCConfig) (CDCResult, error) {
	if cfg.UsersDB == "" || cfg.Users <= 0 || cfg.Changes <= 0 || cfg.Load < 0 {
		return CDCResult{}, errors.New("bench cdc: a users database, and positive users and changes, are needed")
	}
	if cfg.Schema == "" {
		cfg.Schema = "logbook_cdc_bench"
	}
	name := cfg.Schema
	fcfg := userscdc.Config{URL: cfg.UsersDB, Schema: cfg.Schema, Publication: name + "_pub", Slot: name + "_slot"}
	admin, err := pgx.Connect(ctx, cfg.UsersDB)
	if err != nil {
		return CDCResult{}, fmt.Errorf("bench cdc: %w", err)
	}
	defer admin.Close(context.Background())
	cleanup := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for {
			_, err := admin.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, fcfg.Slot)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return err
			}
			time.Sleep(100 * time.Millisecond) // its walsender is still ending
		}
		if _, err := admin.Exec(ctx, `DROP PUBLICATION IF EXISTS `+fcfg.Publication); err != nil {
			return err
		}
		_, err := admin.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{cfg.Schema}.Sanitize()+` CASCADE`)
		return err
	}
	if err := cleanup(); err != nil {
		return CDCResult{}, fmt.Errorf("bench cdc: clear an earlier run: %w", err)
	}
	defer cleanup()

	src, err := userscdc.OpenSource(ctx, cfg.UsersDB, cfg.Schema)
	if err != nil {
		return CDCResult{}, err
	}
	defer src.Close()
	if err := src.Generate(ctx, userscdc.Population{Users: cfg.Users, Type: "like_update", Refuse: 0.1, OptOut: 0.02, NoEmail: 0.1, NoPush: 0.2, Seed: 1}); err != nil {
		return CDCResult{}, err
	}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "logbook-bench-cdc-"); err != nil {
			return CDCResult{}, err
		}
		defer os.RemoveAll(dir)
	}
	v, err := userscdc.OpenView(dir, userscdc.ViewOptions{})
	if err != nil {
		return CDCResult{}, err
	}
	defer v.Close()
	start := time.Now()
	f, err := userscdc.Start(ctx, v, fcfg)
	if err != nil {
		return CDCResult{}, err
	}
	defer f.Close()
	snap := time.Since(start)

	// Other writers: names change under the measured settings changes.
	var written atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if cfg.Load > 0 {
		tick := time.NewTicker(time.Second / time.Duration(cfg.Load))
		defer tick.Stop()
		for w := range 4 {
			wg.Go(func() {
				for i := int64(w); ; i += 4 {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					id := 1 + (i*104729)%int64(cfg.Users)
					_, err := src.Pool.Exec(ctx, `UPDATE `+src.Table("users")+` SET name = $1 WHERE id = $2`, fmt.Sprintf("User %d v%d", id, i), id)
					if err != nil {
						return
					}
					written.Add(1)
				}
			})
		}
	}
	lag, err := userscdc.MeasureLag(ctx, src, v, cfg.Changes, "like_update")
	close(stop)
	wg.Wait()
	if err != nil {
		return CDCResult{}, err
	}
	if err := f.Close(); err != nil {
		return CDCResult{}, err
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return CDCResult{
		Users: cfg.Users, SnapshotS: snap.Seconds(), SnapshotUsersPerS: float64(cfg.Users) / snap.Seconds(),
		Changes: lag.N, LoadPerS: cfg.Load, LoadWritten: written.Load(),
		MeanMS: ms(lag.Mean), P50MS: ms(lag.P50), P99MS: ms(lag.P99), MaxMS: ms(lag.Max),
		FloorP99MS: ms(cdcFloor), Pass: lag.P99 <= cdcFloor,
	}, nil
}
