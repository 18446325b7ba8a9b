package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/engine/shred"
	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/services/notify/userscdc"
)

func newNotifyUsersCmd(e *env) *cobra.Command {
	return group("users", "Fill the users' database the notify service follows; forget a user",
		newNotifyUsersGenerateCmd(e),
		newNotifyUsersForgetCmd(e),
	)
}

// `logbook notify users generate`: the monolith's side of a try-out —
// creates the users' tables (users, user_settings, user_devices) if they
// are missing and fills them with generated users spread over clubs, as
// the CDC benchmark does. The tables must be empty.
func newNotifyUsersGenerateCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "generate --users-db postgres://… --users N --clubs K",
		Short: "Create the users' tables and fill them with generated users",
		Long: `Creates the users' tables (users, user_settings, user_devices) if they are
missing and fills them with generated users: ids 1 … N, user i in club
1 + i mod K, some with a notification type turned off, opted out, or
without an e-mail address or a device. The tables must be empty.`,
		Example: `  logbook notify users generate --users-db postgres://localhost/users --users 10000 --clubs 100`,
		Args:    noArgs,
	}
	fs := cmd.Flags()
	var (
		url, schema     string
		p               userscdc.Population
		refuseType      string
		refuse, optOut  float64
		noEmail, noPush float64
	)
	fs.StringVar(&url, "users-db", "", "postgres://… URL of the users' database (required)")
	secretFlag(fs, "users-db")
	_ = cmd.MarkFlagRequired("users-db")
	fs.StringVar(&schema, "users-schema", "public", "schema of the users' tables")
	fs.IntVar(&p.Users, "users", 1000, "users to generate")
	fs.IntVar(&p.Clubs, "clubs", 10, "clubs to spread them over")
	fs.StringVar(&refuseType, "refuse-type", "like_update", "the notification type some users turned off")
	fs.Float64Var(&refuse, "refuse", 0.1, "share of users (0…1) who turned --refuse-type off on every channel")
	fs.Float64Var(&optOut, "opt-out", 0.02, "share of users who opted out of everything")
	fs.Float64Var(&noEmail, "no-email", 0.1, "share of users without an e-mail address")
	fs.Float64Var(&noPush, "no-push", 0.2, "share of users without a device")
	fs.Uint64Var(&p.Seed, "seed", 1, "seed of the draws")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		switch {
		case url == "" || !isPostgresURL(url):
			return usageError{Msg: "--users-db postgres://… is required"}
		case p.Users < 1 || p.Clubs < 1:
			return usageError{Msg: "--users and --clubs must be positive"}
		}
		for name, v := range map[string]float64{"--refuse": refuse, "--opt-out": optOut, "--no-email": noEmail, "--no-push": noPush} {
			if v < 0 || v > 1 {
				return usagef("%s %v: want a share from 0 to 1", name, v)
			}
		}
		p.Type, p.Refuse, p.OptOut, p.NoEmail, p.NoPush = refuseType, refuse, optOut, noEmail, noPush
		return generateUsers(cmd.Context(), e, url, schema, p)
	}
	return cmd
}

func generateUsers(ctx context.Context, e *env, url, schema string, p userscdc.Population) error {
	src, err := userscdc.OpenSource(ctx, url, schema)
	if err != nil {
		return err
	}
	defer src.Close()
	var n int64
	if err := src.Pool.QueryRow(ctx, "SELECT count(*) FROM "+src.Table("users")).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%s already holds %d users: generate into empty tables", src.Table("users"), n)
	}
	if err := src.Generate(ctx, p); err != nil {
		return err
	}
	e.log.Info("users generated", "users_db", redactURL(url), "schema", schema, "users", p.Users, "clubs", p.Clubs)
	return nil
}

// `logbook notify users forget ID`: asks a running notify server to
// erase a user's personal data (POST /api/users/{id}/forget, an admin
// token).
func newNotifyUsersForgetCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "forget ID --server URL",
		Short: "Erase a user's personal data in a notify server (the right to be forgotten)",
		Long: `Asks a running notify server to forget the user: their key is destroyed,
so the name, e-mail address and device tokens the server keeps of them
can no longer be read, anywhere it keeps them, and they are sent nothing
more; an audit event records that a user was forgotten, when and by
whom, naming the user only by a keyed hash. The server must run with a
master key (--master-key-file or LOGBOOK_MASTER_KEY). The users'
database the server follows is not logbook's: erase the user there too.

The admin token is read from --token-file, or LOGBOOK_TOKEN.`,
		Example: `  LOGBOOK_TOKEN=admin-tok logbook notify users forget 42 --server http://127.0.0.1:8082`,
		Args:    cobra.ExactArgs(1),
	}
	fs := cmd.Flags()
	var serverURL, tokenFile string
	fs.StringVar(&serverURL, "server", "http://127.0.0.1:8082", "the notify server's URL")
	fs.StringVar(&tokenFile, "token-file", "", "file holding an admin token (default: LOGBOOK_TOKEN)")
	out := cliutil.OutputFlag(cmd, cliutil.Table, cliutil.JSON)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil {
			return usagef("user id %q: want an integer", args[0])
		}
		u, err := url.Parse(serverURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("--server %q: want http://host:port", serverURL)
		}
		token := e.getenv("LOGBOOK_TOKEN")
		if tokenFile != "" {
			b, err := os.ReadFile(tokenFile)
			if err != nil {
				return err
			}
			token = strings.TrimSpace(string(b))
		}
		if token == "" {
			return usageError{Msg: "an admin token is needed: --token-file FILE or LOGBOOK_TOKEN"}
		}
		f, err := forgetUser(cmd.Context(), strings.TrimRight(serverURL, "/"), token, id)
		if err != nil {
			return err
		}
		return out.Print(e.stdout, f, cliutil.Pairs([][2]string{
			{"user", strconv.FormatInt(id, 10)},
			{"subject_hash", f.SubjectHash},
			{"key_version", strconv.FormatUint(uint64(f.KeyVersion), 10)},
			{"at", f.At.Format(time.RFC3339)},
			{"by", f.By},
			{"audit_position", strconv.FormatUint(f.Position, 10)},
		}))
	}
	return cmd
}

func forgetUser(ctx context.Context, server, token string, id int64) (shred.Forgotten, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, server+"/api/users/"+strconv.FormatInt(id, 10)+"/forget", nil)
	if err != nil {
		return shred.Forgotten{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return shred.Forgotten{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return shred.Forgotten{}, err
	}
	if resp.StatusCode != http.StatusOK {
		var p struct{ Title, Detail string }
		if json.Unmarshal(body, &p) == nil && (p.Detail != "" || p.Title != "") {
			return shred.Forgotten{}, fmt.Errorf("forget user %d: %s: %s %s", id, resp.Status, p.Title, p.Detail)
		}
		return shred.Forgotten{}, fmt.Errorf("forget user %d: %s", id, resp.Status)
	}
	var f shred.Forgotten
	if err := json.Unmarshal(body, &f); err != nil {
		return f, errors.New("forget: the server's answer is not JSON of a forgotten subject")
	}
	return f, nil
}
