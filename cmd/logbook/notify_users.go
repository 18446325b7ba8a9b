package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/services/notify/userscdc"
)

func newNotifyUsersCmd(e *env) *cobra.Command {
	return group("users", "Fill the users' database the notify service follows",
		newNotifyUsersGenerateCmd(e),
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
