package cli

import (
	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/lab/bench"
)

func newBenchCDCCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cdc",
		Short: "Time how soon a users' database change reaches notify (CDC)",
		Long: `Measures change data capture: how soon a settings change in the users'
PostgreSQL database reaches the notify service's preference check, while
other changes are written at --load per second.`,
		Example: `  logbook bench cdc --users-db postgres://localhost/users --changes 1000`,
		Args:    cliutil.NoArgs,
	}
	fs := cmd.Flags()
	var cfg bench.CDCConfig
	fs.StringVar(&cfg.UsersDB, "users-db", "", "the users' database, postgres://… with wal_level=logical (scripts/postgres.sh start prints one)")
	cliutil.SecretFlag(fs, "users-db")
	fs.StringVar(&cfg.Schema, "schema", "logbook_cdc_bench", "schema made for the run's tables and dropped after it (with its publication and slot)")
	fs.IntVar(&cfg.Users, "users", 100_000, "users generated before the snapshot")
	fs.IntVar(&cfg.Changes, "changes", 1000, "settings changes timed, one transaction each")
	fs.IntVar(&cfg.Load, "load", 200, "other changes per second written meanwhile")
	fs.StringVar(&cfg.Dir, "data", "", "the view's directory (default: a temporary one)")
	out := cliutil.OutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if cfg.UsersDB == "" {
			return cliutil.Usage("--users-db is needed (or LOGBOOK_USERS_DB)")
		}
		if cfg.Users <= 0 || cfg.Changes <= 0 || cfg.Load < 0 {
			return cliutil.Usage("--users and --changes must be positive, --load not negative")
		}
		res, err := bench.RunCDC(cmd.Context(), cfg)
		if err != nil {
			return err
		}
		return out.Print(e.Stdout, res, cliutil.Pairs(res.Rows()))
	}
	return cmd
}
