package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/engine/auth"
	"github.com/logbook/logbook/engine/backup"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/eventstore/pgstore"
	"github.com/logbook/logbook/engine/eventstore/verify"
	"github.com/logbook/logbook/engine/problem"
	"github.com/logbook/logbook/internal/cliutil"
)

func newBackupCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup --data DIR --out DIR | --server URL",
		Short: "Back up the embedded store, stopped or while it serves",
		Long: `Takes a consistent backup of the embedded store (a Pebble checkpoint) and
prints the log position it holds.

--data names the store, --out a new or empty directory. A stopped store is
backed up directly. A store a server holds open is backed up by that
server, while it serves and appends: flights serve, tickets serve and
notify serve on the embedded store listen on a unix socket in its
directory (backup.sock, mode 0600; whoever can reach it can already read
the store's files; kv serve does not, and a server on PostgreSQL has no
such directory), and backup --data asks it
through the socket to write the backup into --out (made absolute here; it
is written by the server's user, on its machine). The views the server
keeps durable are copied with the store.

--server URL asks a server over HTTP instead (POST /admin/backup, a token
of role admin), and it writes the backup into a new directory under its
own --backup-dir, named after the time; the directory is printed.

One backup runs at a time per server. A PostgreSQL store is backed up
with PostgreSQL's tools (pg_dump, pg_basebackup): see docs/operations.md.`,
		Example: `  logbook backup --data ./data --out /backups/2026-11-27
  logbook backup --server http://127.0.0.1:8080 --token "$ADMIN_TOKEN" --json`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	data := fs.String("data", "./data", "directory of the embedded store (stopped, or held by a running server)")
	out := fs.String("out", "", "new or empty directory to write the backup into")
	srv := fs.String("server", "", "URL of the running server to ask for a backup (it writes under its --backup-dir)")
	fromEnv(fs, "server")
	token := fs.String("token", "", "bearer token of role admin for --server")
	secretFlag(fs, "token")
	o := cliutil.OutputFlag(cmd, cliutil.Table, cliutil.JSON)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		var res *backup.Result
		var err error
		switch {
		case *srv != "":
			if cmd.Flags().Changed("out") || cmd.Flags().Changed("data") {
				return usagef("--server backs up the server's own store into its --backup-dir: give neither --data nor --out")
			}
			if *token == "" {
				return usagef("--server needs --token (or LOGBOOK_TOKEN): a token of role admin")
			}
			res, err = remoteBackup(cmd.Context(), *srv, *token)
		case *out == "":
			return usagef("give --out DIR (with --data DIR) or --server URL")
		default:
			res, err = backup.AskSocket(cmd.Context(), *data, *out)
			if errors.Is(err, backup.ErrNoServer) {
				res, err = localBackup(*data, *out)
			}
		}
		if err != nil {
			return err
		}
		views := make([]string, len(res.Views))
		for i, v := range res.Views {
			views[i] = fmt.Sprintf("%s@%d", v.Name, v.Checkpoint)
		}
		return o.Print(e.stdout, res, cliutil.Pairs([][2]string{
			{"backup", res.Dir},
			{"position", fmt.Sprint(res.Position)},
			{"taken", res.Taken.Format(time.RFC3339)},
			{"views", strings.Join(views, " ")},
		}))
	}
	return cmd
}

// checkStoreDir refuses a directory that holds no store, before Open
// would make one there.
func checkStoreDir(dir string) error {
	if dir == "" {
		return usagef("--data must name a directory")
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: no such directory", dir)
	}
	if _, err := pebblestore.Head(dir); err != nil {
		if errors.Is(err, pebblestore.ErrNotStore) {
			return err
		}
		return fmt.Errorf("cannot open the store in %s: %w; if a server has it open and its socket is not in the directory, back it up through the server (--server URL --token T)", dir, err)
	}
	return nil
}

func localBackup(data, out string) (*backup.Result, error) {
	if err := checkStoreDir(data); err != nil {
		return nil, err
	}
	s, err := pebblestore.Open(data, pebblestore.Options{})
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		s.Close()
		return nil, err
	}
	// As the socket's: not into the store's directory, and a directory
	// made for a failed backup is removed.
	res, err := (&backup.Service{Store: s, Dir: data}).BackupInto(abs)
	if cerr := s.Close(); err == nil && cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	res.Dir = out
	return res, nil
}

func remoteBackup(ctx context.Context, url, token string) (*backup.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(url, "/")+backup.Path, nil)
	if err != nil {
		return nil, usagef("--server %q: %v", url, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusCreated {
		var p struct {
			Detail string `json:"detail"`
		}
		if json.Unmarshal(body, &p) == nil && p.Detail != "" {
			return nil, fmt.Errorf("server answered %s: %s", resp.Status, p.Detail)
		}
		return nil, fmt.Errorf("server answered %s", resp.Status)
	}
	var res backup.Result
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, fmt.Errorf("server's answer: %w", err)
	}
	return &res, nil
}

func newRestoreCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore --from DIR --data DIR",
		Short: "Restore a backup of the embedded store into an empty directory",
		Long: `Copies a backup made by logbook backup into --data, which must not exist
or be empty, and checks the restored store (as logbook verify does) before
it says it succeeded; on failure it removes what it copied. --views DIR
also restores the durable views copied with the store, one directory each
under DIR. Start the server on the restored directory: its views catch up
from their checkpoints.`,
		Example: `  logbook restore --from /backups/2026-11-27 --data ./data`,
		Args:    noArgs,
	}
	fs := cmd.Flags()
	from := fs.String("from", "", "the backup's directory (required)")
	data := fs.String("data", "", "new or empty directory to restore the store into (required)")
	views := fs.String("views", "", "new or empty directory to restore the backup's views into")
	_ = cmd.MarkFlagRequired("from")
	_ = cmd.MarkFlagRequired("data")
	o := cliutil.OutputFlag(cmd, cliutil.Table, cliutil.JSON)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		res, err := backup.Restore(*from, *data, *views)
		if err != nil {
			return err
		}
		out := struct {
			Data     string `json:"data"`
			Position uint64 `json:"position"`
			Events   uint64 `json:"events"`
			Streams  uint64 `json:"streams"`
		}{*data, res.Manifest.Position, res.Report.Events, res.Report.Streams}
		return o.Print(e.stdout, out, cliutil.Pairs([][2]string{
			{"restored", out.Data},
			{"position", fmt.Sprint(out.Position)},
			{"events", fmt.Sprint(out.Events)},
			{"streams", fmt.Sprint(out.Streams)},
			{"verify", "ok"},
		}))
	}
	return cmd
}

func newVerifyCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "verify --data DIR | --store postgres://…",
		Short: "Check a store's invariants and print what is wrong",
		Long: `Checks a store offline and prints what is wrong: positions without a gap,
each stream's version equal to its event count, the stream and tag indexes
matching the events, snapshots within their streams, and checksums
(Pebble's per block; PostgreSQL's per page when the cluster has them on).
The embedded store must be stopped (or check a backup's store/); a
PostgreSQL store is checked in one read-only snapshot while it serves.
Exits 1 when there is a problem.`,
		Example: `  logbook verify --data ./data
  logbook verify --store postgres://localhost/logbook --json`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	data := fs.String("data", "", "directory of the embedded store (stopped)")
	url := fs.String("store", "", "postgres://… URL of a PostgreSQL store (its schema: the URL's search_path, else logbook)")
	secretFlag(fs, "store")
	cmd.MarkFlagsMutuallyExclusive("data", "store")
	o := cliutil.OutputFlag(cmd, cliutil.Table, cliutil.JSON)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		var r *verify.Report
		var err error
		switch {
		case *url != "":
			if !isPostgresURL(*url) {
				return usagef("--store %q: want a postgres:// URL (the embedded store is named with --data)", redactURL(*url))
			}
			r, err = pgstore.Verify(cmd.Context(), *url, "")
		case *data != "":
			r, err = pebblestore.Verify(*data, pebblestore.VerifyOptions{Logger: e.log})
		default:
			return usagef("give --data DIR or --store postgres://…")
		}
		if err != nil {
			return err
		}
		rows := [][2]string{
			{"head", fmt.Sprint(r.Head)},
			{"events", fmt.Sprint(r.Events)},
			{"streams", fmt.Sprint(r.Streams)},
			{"problems", fmt.Sprint(uint64(len(r.Problems)) + r.MoreProblems)},
		}
		for _, p := range r.Problems {
			rows = append(rows, [2]string{"problem", p.String()})
		}
		if err := o.Print(e.stdout, r, cliutil.Pairs(rows)); err != nil {
			return err
		}
		return r.Err()
	}
	return cmd
}

// serveBackup mounts POST /admin/backup on a flights node (serveBackupOn).
func (n *node) serveBackup(s *openedStore) {
	serveBackupOn(n.mux, n.cfg.tokens, s, n.cfg.backupDir, nil)
}

// serveBackupOn mounts POST /admin/backup (role admin) on a server of the
// embedded store: a backup of the store and views into a new directory
// under root, or, without a root, a 404 that says how to turn backups on.
// It also serves backups into a directory the caller names on the store
// directory's socket (backup.SocketFile), for logbook backup --data DIR
// --out OUT, until the store closes. A server of the PostgreSQL store gets
// nothing: PostgreSQL's tools back it up.
func serveBackupOn(mux *http.ServeMux, tokens *auth.Tokens, s *openedStore, root string, views map[string]backup.View) {
	ps, ok := s.Store.(*pebblestore.Store)
	if !ok {
		return
	}
	svc := &backup.Service{Store: ps, Views: views, Root: root}
	if s.dir != "" {
		log := s.log
		if log == nil {
			log = slog.Default()
		}
		if stop, err := svc.ListenSocket(s.dir, log); err != nil {
			log.Warn("logbook backup --data cannot reach this server; back it up with --server", "err", err)
		} else {
			s.onClose = append(s.onClose, stop)
		}
	}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		problem.Error(w, http.StatusNotFound, "this server takes no backups: start it with --backup-dir DIR")
	})
	if root != "" {
		h = svc
	}
	mux.Handle(backup.Path, tokens.RequireRole(auth.Admin, h))
}
