package main

import (
	"github.com/spf13/cobra"

	"github.com/logbook/logbook/services/notify/sink"
)

func newNotifyCmd(e *env) *cobra.Command {
	return group("notify", "the mass-notification service: its loopback delivery endpoint",
		newNotifySinkCmd(e),
	)
}

func newNotifySinkCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sink",
		Short: "serve a loopback delivery endpoint (POST /deliver, GET /stats) that counts what it receives per idempotency key",
		Args:  noArgs,
	}
	fs := cmd.Flags()
	addr := fs.String("addr", "127.0.0.1:8090", "address to listen on")
	latency := fs.Duration("latency", 0, "added before each call is answered")
	errorRate := fs.Float64("error-rate", 0, "share of calls (0…1) answered 503 without taking the batch")
	seed := fs.Uint64("seed", 1, "seed of the failure draws")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		s, err := sink.New(sink.Options{Latency: *latency, ErrorRate: *errorRate, Seed: *seed})
		if err != nil {
			return usageError{err.Error()}
		}
		return serveUntil(cmd.Context(), e.log, *addr, defaultMaxConns, s, "logbook notify sink serving",
			[]any{"latency", *latency, "error_rate", *errorRate})
	}
	return cmd
}
