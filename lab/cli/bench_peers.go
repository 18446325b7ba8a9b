package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/internal/progress"
	"github.com/logbook/logbook/lab/bench"
)

func newBenchPeersCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "peers",
		Short: "The same appends on logbook's PostgreSQL store and on peer event stores",
		Long: `Runs the same append workloads — batches of 100 from one writer, single
events from 256 writers — on logbook's PostgreSQL store and, in the same
database and the same run, on Message DB (the Eventide project's
PostgreSQL message store, installed for the run into the message_store
schema from its npm package's SQL) and on the Python eventsourcing
library's PostgreSQL recorder. Prints each store's events/s and p99 and
logbook's figure over the peer's. Peers' tables are dropped afterwards.
A last row per workload, postgresql-copy, writes the same events by
PostgreSQL's binary COPY into a table with only a primary key, a
transaction per append: no peer, but for batched appends the most a store
on this database could reach (logbook's figure over it is below 1; with
single-event appends logbook's appenders share transactions, and it is
above).
Before each timed run the database is asked for a CHECKPOINT, so that no
store's run pays for the dirty pages of the one before it.

scripts/peers.sh installs both peers into .cache/peers and prints the
LOGBOOK_MESSAGE_DB and LOGBOOK_PEERS_PYTHON settings this command reads.`,
		Example: `  eval "$(scripts/peers.sh)"
  export LOGBOOK_MESSAGE_DB LOGBOOK_PEERS_PYTHON
  logbook bench peers --store postgres://logbook@127.0.0.1:54329/logbook -o json`,
		Args: cliutil.NoArgs,
	}
	fs := cmd.Flags()
	var bf benchFlags
	bf.register(cmd)
	var cfg bench.PeersConfig
	fs.StringVar(&cfg.MessageDB, "message-db", "", "directory of Message DB's SQL (the database/ directory of @eventide/message-db); \"none\" leaves it out")
	cliutil.FromEnv(fs, "message-db")
	fs.StringVar(&cfg.Python, "peers-python", "", "a python with the eventsourcing library installed; \"none\" leaves it out")
	cliutil.FromEnv(fs, "peers-python")
	batchEvents := fs.Int("batch-events", 100_000, "events of the one-writer run in batches of 100")
	singleEvents := fs.Int("single-events", 20_000, "events of the 256-writer run, one event per append")
	fs.IntVar(&cfg.Payload, "payload", 100, "bytes of data per event")
	fs.IntVar(&cfg.Streams, "streams", 1000, "streams to spread the events over")
	fs.BoolVar(&cfg.NoCeiling, "no-ceiling", false, "leave out the row that writes the same events by PostgreSQL's binary COPY, for batched appends the most a store on this database could reach")
	fs.BoolVar(&cfg.NoCheckpoint, "no-checkpoint", false, "do not ask the database for a CHECKPOINT before each timed run (it needs a superuser or the pg_checkpoint role)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if bf.store.URL == "" {
			return cliutil.Usage("--store postgres://… is required: the peers run on PostgreSQL")
		}
		if *batchEvents <= 0 || *singleEvents <= 0 || cfg.Streams <= 0 || cfg.Payload < 0 {
			return cliutil.Usage("--batch-events, --single-events and --streams must be positive, --payload not negative")
		}
		for _, p := range []*string{&cfg.MessageDB, &cfg.Python} {
			switch strings.TrimSpace(*p) {
			case "":
				return cliutil.Usage("say where the peers are: --message-db and --peers-python (or LOGBOOK_MESSAGE_DB and LOGBOOK_PEERS_PYTHON, which scripts/peers.sh prints), or \"none\"")
			case "none":
				*p = ""
			}
		}
		cfg.Workloads = []bench.PeerWorkload{{Batch: 100, Writers: 1, Events: *batchEvents}, {Batch: 1, Writers: 256, Events: *singleEvents}}
		return benchOn(cmd, e, &bf, func(s *cliutil.OpenedStore, _ *progress.Counter) (table, error) {
			return bench.RunPeers(cmd.Context(), s, bf.store.URL, cfg)
		})
	}
	return cmd
}
