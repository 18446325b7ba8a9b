package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/logbook/logbook/internal/cluster"
)

// runCluster starts write nodes, read replicas and nginx on this machine,
// on one shared PostgreSQL store, and keeps them until interrupted: the
// layout of docs/deployment.md on one machine, for trying it out and for
// the scaling benchmark.
func runCluster(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "cluster", "cluster --store postgres://… [--bus kafka://host:port/topic] [--writers N] [--replicas M] [--addr HOST:PORT] [--tokens FILE] [--dir DIR]")
	store := fs.String("store", "", "postgres:// URL of the shared store (required)")
	bus := fs.String("bus", "", "kafka://host:port/topic: publish the log to Kafka, and feed the replicas from it")
	writers := fs.Int("writers", 3, "write nodes")
	replicas := fs.Int("replicas", 2, "read replicas")
	addr := fs.String("addr", "127.0.0.1:8090", "where nginx listens")
	tokensFile := fs.String("tokens", "./dev-tokens", "bearer tokens, one \"token role\" per line, for every node")
	dir := fs.String("dir", "./data-cluster", "directory for the nodes' logs and nginx's files")
	if err := parse(fs, args); err != nil {
		return err
	}
	if !isPostgresURL(*store) {
		return usageError{"--store must be a postgres:// URL: the nodes share it"}
	}
	if *writers < 1 || *replicas < 0 {
		return usageError{"--writers must be at least 1 and --replicas not negative"}
	}
	tokens, err := os.ReadFile(*tokensFile)
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	absDir, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	c, err := cluster.Start(ctx, cluster.Config{Binary: self, Store: *store, Bus: *bus, Writers: *writers, Replicas: *replicas,
		Dir: absDir, Addr: *addr, Tokens: string(tokens)})
	if err != nil {
		return err
	}
	defer c.Stop()
	fmt.Fprintf(e.stdout, "nginx at %s\n", c.URL)
	for _, n := range c.Nodes() {
		fmt.Fprintf(e.stdout, "%-10s http://%s  log %s\n", n.Name, n.Addr, filepath.Join(absDir, n.Name+".log"))
	}
	<-ctx.Done()
	return nil
}
