package cliutil

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

// StoreFlags are the flags of every command that opens an event store:
// --data, the directory of the embedded store, or --store, the URL of a
// PostgreSQL store.
type StoreFlags struct {
	Data string
	URL  string
	// PGConns sizes the PostgreSQL pool (0: 64); commands that bound
	// their concurrent queries set it above their bound.
	PGConns int32
}

// Register registers --data (defaultDir unless given) and --store on fs.
func (f *StoreFlags) Register(fs *pflag.FlagSet, defaultDir string) {
	RegisterStoreFlags(fs, &f.Data, &f.URL, defaultDir)
}

// RegisterStoreFlags registers --data into data and --store into url.
func RegisterStoreFlags(fs *pflag.FlagSet, data, url *string, defaultDir string) {
	fs.StringVar(data, "data", defaultDir, "directory of the embedded store")
	fs.StringVar(url, "store", "", "postgres://user@host:port/db URL of a PostgreSQL store shared by several processes (default: the embedded store in --data)")
	SecretFlag(fs, "store")
}

// Describe names the store for logs, its password hidden.
func (f *StoreFlags) Describe() string {
	if f.URL != "" {
		return RedactURL(f.URL)
	}
	return f.Data
}

// IsPostgresURL says whether s is a postgres:// or postgresql:// URL.
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// RedactURL hides the secrets of a connection string or URL: the user
// info's password (postgres://user:pw@host), and the parameters that
// carry secrets — password, sslpassword, sasl_password, token,
// access_token, secret, client_secret, api_key, sig, signature — as a
// URL's query or as libpq's key=value words.
func RedactURL(u string) string {
	if at, scheme := strings.LastIndex(u, "@"), strings.Index(u, "://"); at >= 0 && scheme >= 0 && scheme < at {
		userinfo := u[scheme+3 : at]
		if i := strings.Index(userinfo, ":"); i >= 0 {
			u = u[:scheme+3] + userinfo[:i] + ":***" + u[at:]
		}
	}
	return passwordParam.ReplaceAllString(u, "${1}${2}=***")
}

var passwordParam = regexp.MustCompile(`(?i)(^|[?&\s])((?:[a-z]+_)?(?:password|passwd|secret|token)|sslpassword|api_?key|sig|signature)=[^&\s]*`)

// OpenedStore is a store plus what only some backends can tell.
type OpenedStore struct {
	eventstore.Store
	Fsyncs func() uint64  // nil when the backend cannot count
	PG     *pgstore.Store // the PostgreSQL store, if that is the backend
}

// AppendAsync passes eventstore.AsyncAppender through to the backend.
func (s *OpenedStore) AppendAsync(stream string, expect eventstore.ExpectedVersion, events []eventstore.NewEvent, done func(eventstore.AppendResult, error)) {
	eventstore.AppendAsync(s.Store, stream, expect, events, done)
}

// Open opens the store the flags name.
func (f *StoreFlags) Open(log *slog.Logger) (*OpenedStore, error) {
	if f.URL != "" {
		if !IsPostgresURL(f.URL) {
			return nil, Usagef("--store %q: want a postgres:// URL (the embedded store is chosen with --data)", RedactURL(f.URL))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conns := f.PGConns
		if conns <= 0 {
			conns = 64
		}
		s, err := pgstore.Open(ctx, f.URL, pgstore.Options{MaxConns: conns})
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", RedactURL(f.URL), err)
		}
		return &OpenedStore{Store: s, PG: s}, nil
	}
	if f.Data == "" {
		return nil, Usage("--data must name a directory")
	}
	s, err := pebblestore.Open(f.Data, pebblestore.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return &OpenedStore{Store: s, Fsyncs: s.Fsyncs}, nil
}
