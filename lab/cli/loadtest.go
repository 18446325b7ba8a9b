package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/lab/loadtest"
	"github.com/logbook/logbook/lab/plot"
)

func newLoadtestCmd(e *env) *cobra.Command {
	g := cliutil.Group("loadtest", "Load a running server's HTTP API",
		newLoadtestReadCmd(e),
		newLoadtestWriteCmd(e),
		newLoadtestTicketsCmd(e),
	)
	g.Long = `Load tests of a running server: read (the flights service's schedule
checks at a fixed request rate), write (simulated planners) and tickets (one
sport in hot demand on the tickets service).`
	cliutil.ProfileFlags(g)
	return g
}

// targetFlags are the flags of every load test: the server, the output.
type targetFlags struct {
	url, token string
	conns      int
	batchDelay time.Duration
	tls        cliutil.ClientTLSFlags
	plotFile   string
	out        *cliutil.Output
}

func (t *targetFlags) register(cmd *cobra.Command, conns int, role string) {
	fs := cmd.Flags()
	fs.StringVar(&t.url, "url", "", "server, e.g. http://127.0.0.1:8080 (required)")
	cliutil.FromEnv(fs, "url")
	fs.StringVar(&t.token, "token", "", "bearer token ("+role+") (required)")
	cliutil.SecretFlag(fs, "token")
	fs.IntVar(&t.conns, "conns", conns, "HTTP/1.1 connections to pipeline requests over")
	fs.DurationVar(&t.batchDelay, "batch-delay", 200*time.Microsecond, "how long a request may wait to share a write with others (counted in its latency)")
	t.tls.Register(fs, "", "an https --url")
	fs.StringVar(&t.plotFile, "plot", "", "also draw the run second by second (throughput, latency percentiles) into this .svg or .png file")
	t.out = cliutil.OutputFlag(cmd)
	_ = cmd.MarkFlagRequired("url")
	_ = cmd.MarkFlagRequired("token")
}

// client checks the flags and returns a client for the server.
func (t *targetFlags) client() (*loadtest.Client, error) {
	u, err := url.Parse(t.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, cliutil.Usagef("--url %q: want http://host:port", t.url)
	}
	if t.conns <= 0 || t.batchDelay < 0 {
		return nil, cliutil.Usage("--conns must be positive and --batch-delay not negative")
	}
	if t.plotFile != "" {
		if err := plot.CheckFile(t.plotFile); err != nil {
			return nil, cliutil.Usagef("--plot %v", err)
		}
	}
	if os.Getenv("GOGC") == "" {
		// The generator's own garbage collection should not be what
		// the measured latency shows.
		debug.SetGCPercent(800)
	}
	tc, err := t.tls.Config()
	if err != nil {
		return nil, err
	}
	if tc != nil && u.Scheme != "https" {
		return nil, cliutil.Usage("--ca, --cert and --key are for an https:// --url")
	}
	c := loadtest.NewClient(t.url, t.token, t.conns, t.batchDelay).WithTLS(tc)
	if err := c.Reachable(context.Background()); err != nil {
		return nil, err
	}
	return c, nil
}

// finish draws the figure if asked, then reports the result.
func (t *targetFlags) finish(e *env, res interface {
	table
	Figure() plot.Figure
}) error {
	if t.plotFile != "" {
		if err := plot.Save(t.plotFile, res.Figure()); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	return t.out.Print(e.Stdout, res, cliutil.Pairs(res.Rows()))
}

func newLoadtestReadCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "read --url URL --token TOKEN",
		Short: "Ramp to a request rate on the schedule checks and hold it",
		Long: `Sends the flights service's three schedule checks at a rate that ramps
from 1 request/s to --rate and holds it for --hold (an open model: requests
arrive on time whether or not earlier ones were answered), and prints the
throughput and latency percentiles of the hold.`,
		Example: `  logbook loadtest read --url http://127.0.0.1:8080 --token VIEWER --rate 2000 --hold 30s`,
		Args:    cliutil.NoArgs,
	}
	fs := cmd.Flags()
	var t targetFlags
	t.register(cmd, 4, "a viewer's is enough")
	var cfg loadtest.ReadConfig
	fs.Float64Var(&cfg.Rate, "rate", 1000, "target requests per second")
	fs.DurationVar(&cfg.Ramp, "ramp", 10*time.Second, "ramp from 1 request/s to the rate")
	fs.DurationVar(&cfg.Hold, "hold", 20*time.Second, "hold the rate; only this phase is measured")
	query := fs.String("query", "", "query string added to each check, e.g. limit=5 or airline=LH")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *query != "" {
			if _, err := url.ParseQuery(*query); err != nil {
				return cliutil.Usagef("--query %q: %v", *query, err)
			}
			cfg.Paths = nil
			for _, p := range loadtest.CheckPaths {
				cfg.Paths = append(cfg.Paths, p+"?"+*query)
			}
		}
		if cfg.Rate < 1 || cfg.Hold <= 0 || cfg.Ramp < 0 {
			return cliutil.Usage("--rate must be at least 1, --hold positive, --ramp not negative")
		}
		c, err := t.client()
		if err != nil {
			return err
		}
		defer c.Close()
		ctx := cmd.Context()
		if _, _, err := c.Do(ctx, "GET", "/api/validity", ""); err != nil {
			return fmt.Errorf("server not ready: %w", err)
		}
		var stop func()
		cfg.Progress, stop = e.ShowProgress(cmd, t.out.Quiet())
		res, err := loadtest.RunRead(ctx, c, cfg)
		stop()
		if err != nil {
			return err
		}
		return t.finish(e, res)
	}
	return cmd
}

func newLoadtestWriteCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "write --url URL --token TOKEN",
		Short: "Simulate planners building rotations one command at a time",
		Long: `Simulated planners build rotations on the flights service, each sending
its next command once the last is answered (a closed model), in --waves
waves; prints commands per second and latency percentiles.

With --ceiling the same workload first runs against a server in this
process that does no work — the HTTP server of every logbook server
answering each command with the flights API's status, header names and
body fields, nothing decoded, nothing stored — and the result adds its
commands per second and the ratio of the measured run's to it: how close
the service comes to what net/http, this generator and loopback TCP reach
on this machine in the same minute.`,
		Example: `  logbook loadtest write --url http://127.0.0.1:8080 --token PLANNER --users 100 --legs 750
  logbook loadtest write --url http://127.0.0.1:8080 --token PLANNER --users 100 --legs 750 --ceiling`,
		Args: cliutil.NoArgs,
	}
	fs := cmd.Flags()
	var t targetFlags
	t.register(cmd, 0, "a planner's")
	fs.Lookup("conns").Usage = "HTTP/1.1 connections to pipeline requests over (default: one per planner, at most 512)"
	var cfg loadtest.WriteConfig
	fs.IntVar(&cfg.Users, "users", 1000, "simulated planners")
	fs.IntVar(&cfg.Legs, "legs", 10, "legs each planner adds")
	fs.IntVar(&cfg.Waves, "waves", 10, "planners start in this many waves")
	fs.DurationVar(&cfg.WaveInterval, "wave-interval", 100*time.Millisecond, "time between waves")
	ceiling := fs.Bool("ceiling", false, "first run the same workload against a bare net/http server in this process, and print its figures and the ratio")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if cfg.Users <= 0 || cfg.Legs < 0 || cfg.Waves <= 0 {
			return cliutil.Usage("--users and --waves must be positive, --legs not negative")
		}
		if u, err := url.Parse(t.url); *ceiling && err == nil && u.Scheme == "https" {
			return cliutil.Usage("--ceiling is plain HTTP: compare it with an http:// --url")
		}
		if t.conns == 0 {
			// A planner waits for each answer before its next command,
			// and the server answers a connection's requests one after
			// the other: planners sharing a connection wait for each
			// other, not for the server (100 planners: 6,800
			// commands/s over 8 connections, 11,000–13,000 over 100).
			t.conns = min(cfg.Users, 512)
			// One connection per planner, used by the planner's own
			// goroutine: no hand-off to a writer and a reader per
			// request (plain http only).
			cfg.Direct = cfg.Users <= 512 && strings.HasPrefix(t.url, "http://")
		}
		c, err := t.client()
		if err != nil {
			return err
		}
		defer c.Close()
		if err := loadtest.WaitCaughtUp(cmd.Context(), c, 5*time.Minute); err != nil {
			return fmt.Errorf("waiting for the server's view to catch up with its log: %w", err)
		}
		var ceil *loadtest.CeilingResult
		if *ceiling {
			// Before the measured run, on an idle server: after it the
			// server may still be flushing and compacting on the same
			// cores.
			bare, err := loadtest.RunCeiling(cmd.Context(), cfg, t.conns, t.batchDelay)
			if err != nil {
				return fmt.Errorf("--ceiling: %w", err)
			}
			ceil = &bare
		}
		var stop func()
		cfg.Progress, stop = e.ShowProgress(cmd, t.out.Quiet())
		res, err := loadtest.RunWrite(cmd.Context(), c, cfg)
		stop()
		if err != nil {
			return err
		}
		if ceil != nil {
			res = res.WithCeiling(*ceil)
		}
		return t.finish(e, res)
	}
	return cmd
}
