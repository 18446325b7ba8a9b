package main

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/eventstore/pgstore"
)

// storeFlags are the flags of every command that opens a store.
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
}

func (f *storeFlags) register(fs *pflag.FlagSet, defaultDir string) {
	fs.StringVar(&f.data, "data", defaultDir, "directory of the embedded store")
	fs.StringVar(&f.store, "store", "", "postgres://user@host:port/db URL of a PostgreSQL store shared by several processes (default: the embedded store in --data)")
	fromEnv(fs, "store")
}

// describe names the store for logs.
func (f *storeFlags) describe() string {
	if f.store != "" {
		return redactURL(f.store)
	}
	return f.data
}

func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// redactURL hides the passwords of a connection string: the user info's
// (postgres://user:pw@host), and password or sslpassword parameters, as a
// URL's query or as libpq's key=value words.
func redactURL(u string) string {
	if at, scheme := strings.LastIndex(u, "@"), strings.Index(u, "://"); at >= 0 && scheme >= 0 && scheme < at {
		userinfo := u[scheme+3 : at]
		if i := strings.Index(userinfo, ":"); i >= 0 {
			u = u[:scheme+3] + userinfo[:i] + ":***" + u[at:]
		}
	}
	return passwordParam.ReplaceAllString(u, "${1}${2}=***")
}

var passwordParam = regexp.MustCompile(`(^|[?&\s])((?:ssl)?password)=[^&\s]*`)

// openedStore is a store plus what only some backends can tell.
type openedStore struct {
	eventstore.Store
	fsyncs func() uint64  // nil when the backend cannot count
	pg     *pgstore.Store // the PostgreSQL store, if that is the backend
}

func (f *storeFlags) open(log *slog.Logger) (*openedStore, error) {
	if f.store != "" {
		if !isPostgresURL(f.store) {
			return nil, usageError{fmt.Sprintf("--store %q: want a postgres:// URL (the embedded store is chosen with --data)", f.store)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := pgstore.Open(ctx, f.store, pgstore.Options{MaxConns: max(f.pgConns, 64)})
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", redactURL(f.store), err)
		}
		return &openedStore{Store: s, pg: s}, nil
	}
	if f.data == "" {
		return nil, usageError{"--data must name a directory"}
	}
	s, err := pebblestore.Open(f.data, pebblestore.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return &openedStore{Store: s, fsyncs: s.Fsyncs}, nil
}
