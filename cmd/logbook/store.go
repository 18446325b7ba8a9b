package main

import (
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pgstore"
	"github.com/logbook/logbook/internal/cliutil"
)

// storeFlags are the flags of every command that opens a store: the
// serving commands' view of cliutil.StoreFlags, which opens it.
type storeFlags struct {
	data  string
	store string
	// pgConns sizes the PostgreSQL pool; commands that bound their
	// concurrent queries set it above their bound.
	pgConns int32
	// readOnly keeps a process that never appends (a read replica) from
	// becoming the PostgreSQL store's sequencer, which every append of
	// the cluster would then wait on.
	readOnly bool
	// backupDir, for a serving command that takes --backup-dir, is the
	// root of the backups POST /admin/backup takes.
	backupDir string
}

func (f *storeFlags) register(fs *pflag.FlagSet, defaultDir string) {
	cliutil.RegisterStoreFlags(fs, &f.data, &f.store, defaultDir)
}

func (f *storeFlags) flags() *cliutil.StoreFlags {
	return &cliutil.StoreFlags{Data: f.data, URL: f.store, PGConns: f.pgConns}
}

// describe names the store for logs.
func (f *storeFlags) describe() string { return f.flags().Describe() }

func isPostgresURL(s string) bool { return cliutil.IsPostgresURL(s) }

// redactURL hides the passwords of a connection string (cliutil.RedactURL).
func redactURL(u string) string { return cliutil.RedactURL(u) }

// openedStore is a store plus what only some backends can tell.
type openedStore struct {
	eventstore.Store
	fsyncs func() uint64  // nil when the backend cannot count
	pg     *pgstore.Store // the PostgreSQL store, if that is the backend
	// dir is the embedded store's directory ("" for PostgreSQL).
	dir string
	log *slog.Logger
	// onClose run before the store closes, last added first (the backup
	// socket, which lives as long as the store's lock).
	onClose []func()
}

// Close runs onClose, then closes the store.
func (s *openedStore) Close() error {
	s.runOnClose()
	return s.Store.Close()
}

// AppendAsync passes eventstore.AsyncAppender through to the backend.
func (s *openedStore) AppendAsync(stream string, expect eventstore.ExpectedVersion, events []eventstore.NewEvent, done func(eventstore.AppendResult, error)) {
	eventstore.AppendAsync(s.Store, stream, expect, events, done)
}

// Unwrap returns the backend's store, for what only a backend offers
// (the admin API's deletion and truncation look for it through here).
func (s *openedStore) Unwrap() eventstore.Store { return s.Store }

// runOnClose runs onClose now, once: a command whose backup copies a
// view stops the backup socket before it closes that view.
func (s *openedStore) runOnClose() {
	for i := len(s.onClose) - 1; i >= 0; i-- {
		s.onClose[i]()
	}
	s.onClose = nil
}

func (f *storeFlags) open(log *slog.Logger) (*openedStore, error) {
	s, err := f.flags().Open(log)
	if err != nil {
		return nil, err
	}
	o := &openedStore{Store: s.Store, fsyncs: s.Fsyncs, pg: s.PG, log: log}
	if s.PG == nil {
		o.dir = f.data
	}
	return o, nil
}
