package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/logbook/logbook/loadtest"
)

func runLoadtest(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" {
		fmt.Fprintln(e.stderr, "Usage: logbook loadtest read|write --url URL --token TOKEN [flags]  (logbook loadtest read --help)")
		if len(args) == 0 {
			return usageError{"which load test?"}
		}
		return nil
	}
	switch args[0] {
	case "read":
		return runLoadtestRead(ctx, e, args[1:])
	case "write":
		return runLoadtestWrite(ctx, e, args[1:])
	}
	return usageError{fmt.Sprintf("unknown load test %q (read, write)", args[0])}
}

type targetFlags struct {
	url, token string
	conns      int
}

func (t *targetFlags) check() error {
	if t.url == "" || t.token == "" {
		return usageError{"--url and --token are required"}
	}
	u, err := url.Parse(t.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError{fmt.Sprintf("--url %q: want http://host:port", t.url)}
	}
	if t.conns <= 0 {
		return usageError{"--conns must be positive"}
	}
	return nil
}

func runLoadtestRead(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "loadtest read", "loadtest read --url URL --token TOKEN [--rate R] [--ramp D] [--hold D] [--conns N] [--json]")
	var t targetFlags
	fs.StringVar(&t.url, "url", "", "server, e.g. http://127.0.0.1:8080")
	fs.StringVar(&t.token, "token", "", "bearer token (a viewer's is enough)")
	fs.IntVar(&t.conns, "conns", 256, "connections kept open")
	var cfg loadtest.ReadConfig
	fs.Float64Var(&cfg.Rate, "rate", 1000, "target requests per second")
	fs.DurationVar(&cfg.Ramp, "ramp", 10*time.Second, "ramp from 1 request/s to the rate")
	fs.DurationVar(&cfg.Hold, "hold", 20*time.Second, "hold the rate; only this phase is measured")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := t.check(); err != nil {
		return err
	}
	if cfg.Rate < 1 || cfg.Hold <= 0 || cfg.Ramp < 0 {
		return usageError{"--rate must be at least 1, --hold positive, --ramp not negative"}
	}
	c := loadtest.NewClient(t.url, t.token, t.conns)
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
	fs.StringVar(&t.url, "url", "", "server, e.g. http://127.0.0.1:8080")
	fs.StringVar(&t.token, "token", "", "bearer token of a planner")
	fs.IntVar(&t.conns, "conns", 512, "connections kept open")
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
	c := loadtest.NewClient(t.url, t.token, t.conns)
	defer c.Close()
	res, err := loadtest.RunWrite(ctx, c, cfg)
	if err != nil {
		return err
	}
	return report(e.stdout, *asJSON, res, res.Rows())
}
