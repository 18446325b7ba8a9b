package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"runtime/debug"
	"time"

	"github.com/logbook/logbook/internal/loadtest"
)

func runLoadtest(ctx context.Context, e *env, args []string) error {
	if os.Getenv("GOGC") == "" {
		// The generator's own garbage collection should not be what
		// the measured latency shows.
		debug.SetGCPercent(800)
	}
	return dispatch(ctx, e, "loadtest", []subcommand{
		{"read", runLoadtestRead},
		{"write", runLoadtestWrite},
	}, true, args)
}

type targetFlags struct {
	url, token string
	conns      int
	batchDelay time.Duration
}

func (t *targetFlags) register(fs *flag.FlagSet, conns int, role string) {
	fs.StringVar(&t.url, "url", "", "server, e.g. http://127.0.0.1:8080")
	fs.StringVar(&t.token, "token", "", "bearer token ("+role+")")
	fs.IntVar(&t.conns, "conns", conns, "HTTP/1.1 connections to pipeline requests over")
	fs.DurationVar(&t.batchDelay, "batch-delay", 200*time.Microsecond, "how long a request may wait to share a write with others (counted in its latency)")
}

func (t *targetFlags) check() error {
	if t.url == "" || t.token == "" {
		return usageError{"--url and --token are required"}
	}
	u, err := url.Parse(t.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError{fmt.Sprintf("--url %q: want http://host:port", t.url)}
	}
	if t.conns <= 0 || t.batchDelay < 0 {
		return usageError{"--conns must be positive and --batch-delay not negative"}
	}
	return nil
}

func runLoadtestRead(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "loadtest read", "loadtest read --url URL --token TOKEN [--rate R] [--ramp D] [--hold D] [--conns N] [--json]")
	var t targetFlags
	t.register(fs, 4, "a viewer's is enough")
	var cfg loadtest.ReadConfig
	fs.Float64Var(&cfg.Rate, "rate", 1000, "target requests per second")
	fs.DurationVar(&cfg.Ramp, "ramp", 10*time.Second, "ramp from 1 request/s to the rate")
	fs.DurationVar(&cfg.Hold, "hold", 20*time.Second, "hold the rate; only this phase is measured")
	query := fs.String("query", "", "query string added to each check, e.g. limit=5 or airline=LH")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := t.check(); err != nil {
		return err
	}
	if *query != "" {
		if _, err := url.ParseQuery(*query); err != nil {
			return usageError{fmt.Sprintf("--query %q: %v", *query, err)}
		}
		for _, p := range loadtest.CheckPaths {
			cfg.Paths = append(cfg.Paths, p+"?"+*query)
		}
	}
	if cfg.Rate < 1 || cfg.Hold <= 0 || cfg.Ramp < 0 {
		return usageError{"--rate must be at least 1, --hold positive, --ramp not negative"}
	}
	c := loadtest.NewClient(t.url, t.token, t.conns, t.batchDelay)
	defer c.Close()
	if _, _, err := c.Do(ctx, "GET", "/api/validity", ""); err != nil {
		return fmt.Errorf("server not ready: %w", err)
	}
	res, err := loadtest.RunRead(ctx, c, cfg)
	if err != nil {
		return err
	}
	return report(e.stdout, *asJSON, res, res.Rows())
}

func runLoadtestWrite(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "loadtest write", "loadtest write --url URL --token TOKEN [--users N] [--legs L] [--waves W] [--wave-interval D] [--conns N] [--json]")
	var t targetFlags
	t.register(fs, 8, "a planner's")
	var cfg loadtest.WriteConfig
	fs.IntVar(&cfg.Users, "users", 1000, "simulated planners")
	fs.IntVar(&cfg.Legs, "legs", 10, "legs each planner adds")
	fs.IntVar(&cfg.Waves, "waves", 10, "planners start in this many waves")
	fs.DurationVar(&cfg.WaveInterval, "wave-interval", 100*time.Millisecond, "time between waves")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := t.check(); err != nil {
		return err
	}
	if cfg.Users <= 0 || cfg.Legs < 0 || cfg.Waves <= 0 {
		return usageError{"--users and --waves must be positive, --legs not negative"}
	}
	c := loadtest.NewClient(t.url, t.token, t.conns, t.batchDelay)
	defer c.Close()
	res, err := loadtest.RunWrite(ctx, c, cfg)
	if err != nil {
		return err
	}
	return report(e.stdout, *asJSON, res, res.Rows())
}
