package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/engine/shred"
	"github.com/logbook/logbook/internal/cliutil"
)

func newNotifyKeysCmd(e *env) *cobra.Command {
	return group("keys", "Keep forgotten users forgotten: export the audit, forget again after a restore",
		newNotifyKeysExportAuditCmd(e),
		newNotifyKeysReforgetCmd(e),
	)
}

// auditLine is a line of an audit export: an audit event of the store,
// its data (a shred.Forgotten: a keyed hash, a key version, when, by
// whom) as it is.
type auditLine struct {
	Position uint64          `json:"position"`
	Stream   string          `json:"stream"`
	Seq      uint64          `json:"seq"`
	Type     string          `json:"type"`
	Version  int             `json:"version"`
	Time     time.Time       `json:"time"`
	Data     json.RawMessage `json:"data"`
}

// `logbook notify keys export-audit --data DIR --out FILE`: the store's
// audit stream as NDJSON, to keep with the keyring's backups.
func newNotifyKeysExportAuditCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export-audit --data DIR | --store postgres://… --out FILE",
		Short: "Write the store's audit stream of forgettings to a file (NDJSON)",
		Long: `Writes every event of the store's audit stream (` + shred.AuditStream + `) to FILE,
one JSON object a line: each says that a subject was forgotten, naming it
only by a keyed hash, with the key version destroyed, when and by whom —
nothing of what was forgotten. Keep the file with the keyring's backups:
'logbook notify keys reforget --from FILE' destroys again, in a keyring
restored from a backup older than a forgetting, the keys the file names,
even when the store was restored from an older backup too. The file is
written 0600 and replaced whole; --out - writes to standard output.

The embedded store is opened, so a server must not hold it: export from
a stopped server's --data, or from a backup of it (logbook backup).`,
		Example: `  logbook notify keys export-audit --data ./data-notify --out keys-backup/audit.ndjson`,
		Args:    noArgs,
	}
	fs := cmd.Flags()
	var sf storeFlags
	sf.register(fs, "./data-notify")
	var out string
	fs.StringVar(&out, "out", "", "file to write (required; - for standard output)")
	o := cliutil.OutputFlag(cmd, cliutil.Table, cliutil.JSON)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if out == "" {
			return usageError{Msg: "--out FILE is required (- for standard output)"}
		}
		if sf.store == "" {
			if _, err := os.Stat(sf.data); err != nil {
				return usagef("--data %s: %v", sf.data, err)
			}
		}
		s, err := sf.open(e.log)
		if err != nil {
			return err
		}
		defer s.Close()
		var res struct {
			Events int    `json:"events"`
			Last   uint64 `json:"last_position"`
			Out    string `json:"out"`
		}
		res.Out = out
		write := func(w io.Writer) error {
			n, last, err := exportAudit(cmd.Context(), s, w)
			res.Events, res.Last = n, last
			return err
		}
		if out == "-" {
			// The events are the output: the summary goes to the log.
			if err := write(e.stdout); err != nil {
				return err
			}
			e.log.Info("audit stream exported", "events", res.Events, "last_position", res.Last)
			return nil
		}
		if err := writeFileAtomic(out, write); err != nil {
			return err
		}
		return o.Print(e.stdout, res, cliutil.Pairs([][2]string{
			{"events", strconv.Itoa(res.Events)},
			{"last_position", strconv.FormatUint(res.Last, 10)},
			{"out", out},
		}))
	}
	return cmd
}

// exportAudit writes r's audit stream to w as NDJSON; it returns how
// many events it wrote and the last one's position.
func exportAudit(ctx context.Context, r shred.AuditReader, w io.Writer) (int, uint64, error) {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	n, last := 0, uint64(0)
	for from := uint64(1); ; {
		evs, err := r.ReadStream(ctx, shred.AuditStream, from, 500)
		if err != nil {
			return n, last, fmt.Errorf("read %s: %w", shred.AuditStream, err)
		}
		if len(evs) == 0 {
			return n, last, bw.Flush()
		}
		for _, ev := range evs {
			if !json.Valid(ev.Data) {
				return n, last, fmt.Errorf("audit event %d: its data is not JSON", ev.Position)
			}
			if err := enc.Encode(auditLine{Position: ev.Position, Stream: ev.Stream, Seq: ev.Seq, Type: ev.Type, Version: ev.Version, Time: ev.Time, Data: ev.Data}); err != nil {
				return n, last, err
			}
			n, last = n+1, ev.Position
		}
		from = evs[len(evs)-1].Seq + 1
	}
}

// writeFileAtomic writes path 0600 through a temporary file beside it,
// renamed over it once complete and synced.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = write(f)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// `logbook notify keys reforget`: after a keyring's restore, destroy
// again the keys the audit events say were destroyed.
func newNotifyKeysReforgetCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reforget --keys DIR (--from FILE | --bus kafka://… | --data DIR | --store postgres://…)",
		Short: "Destroy again, in a restored keyring, the keys of users forgotten since",
		Long: `A keyring restored from a backup taken before a user was forgotten holds the
user's key again, and their sealed fields — in the log, in snapshots, on
the Kafka topic — would open again. reforget reads the audit events of
forgetting and destroys again every key they name that the keyring holds
(by the keyed hash the event records; it appends no audit event), and
prints how many it found alive. Running it again finds 0.

The audit events come from, in this order of choice:
  --from FILE    an export of the audit stream (logbook notify keys export-audit)
  --bus URL      the Kafka topic the log was published to (kafka://host:port/topic),
                 which outlives a restore of the store from an older backup
  the store      its own audit stream (--data DIR, or --store postgres://…):
                 enough when only the keyring was restored
                 (logbook notify serve does this each time it starts)

The keyring is the directory --keys (notify serve's default: STATE/keys),
or, with --store postgres://… and no --keys, the table
logbook_subject_keys in that database. The master key is read from
--master-key-file or LOGBOOK_MASTER_KEY. Run it before the server starts:
the embedded store and the keyring's directory are opened.`,
		Example: `  logbook notify keys reforget --keys ./data-notify-state/keys --master-key-file master.key --from keys-backup/audit.ndjson
  logbook notify keys reforget --keys ./data-notify-state/keys --master-key-file master.key --bus kafka://127.0.0.1:9092/notify -o json`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	var (
		sf                       storeFlags
		keys, from, busURL, mkey string
	)
	sf.register(fs, "./data-notify")
	fs.StringVar(&keys, "keys", "", "directory of the users' keys (required unless --store postgres://…, whose table logbook_subject_keys is then used)")
	fs.StringVar(&from, "from", "", "NDJSON file of audit events (export-audit's); - for standard input")
	fs.StringVar(&busURL, "bus", "", "kafka://host:port/topic[?tls_ca=…&sasl=…]: read the audit events from the topic the log was published to")
	secretFlag(fs, "bus")
	fs.StringVar(&mkey, "master-key-file", "", "file (mode 600) of the master key (default: LOGBOOK_MASTER_KEY)")
	o := cliutil.OutputFlag(cmd, cliutil.Table, cliutil.JSON)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		pgKeys := keys == "" && sf.store != ""
		switch {
		case from != "" && busURL != "":
			return usageError{Msg: "--from and --bus are two sources of the audit events: give one"}
		case keys == "" && sf.store == "":
			return usageError{Msg: "--keys DIR is required: the keyring's directory (notify serve's default: STATE/keys)"}
		case sf.store != "" && !isPostgresURL(sf.store):
			return usagef("--store %q: want a postgres:// URL", redactURL(sf.store))
		}
		if keys != "" {
			if st, err := os.Stat(keys); err != nil || !st.IsDir() {
				return usagef("--keys %s: not a keyring's directory (%v)", keys, err)
			}
		}
		var master shred.MasterKey
		var err error
		switch v := e.getenv(shred.MasterKeyEnv); {
		case mkey != "":
			master, err = shred.LoadMasterKey(mkey)
		case v != "":
			master, err = shred.ParseMasterKey(v)
		default:
			err = shred.ErrNoMasterKey
		}
		if err != nil {
			return usageError{Msg: err.Error() + " (--master-key-file FILE or " + shred.MasterKeyEnv + ")"}
		}

		// The audit events, read in full before the keyring is touched:
		// a bad file changes nothing.
		var evs []eventstore.Event
		var source string
		var bus *server.Bus
		switch {
		case from != "":
			source = "file " + from
			if evs, err = readAuditFile(from, cmd.InOrStdin()); err != nil {
				return err
			}
		case busURL != "":
			if bus, err = server.ParseBus(busURL); err != nil {
				return usageError{Msg: "--bus " + err.Error()}
			}
			source = "topic " + bus.Topic
		}
		var s *openedStore
		if (from == "" && busURL == "") || pgKeys {
			if sf.store == "" {
				if _, err := os.Stat(sf.data); err != nil {
					return usagef("--data %s: %v", sf.data, err)
				}
			}
			if s, err = sf.open(e.log); err != nil {
				return err
			}
			defer s.Close()
		}
		if bus != nil {
			// Bounded in time: a broker that answers slowly or not at
			// all ends the command with an error, not a hang.
			rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			recs, err := kafkabus.ReadTopic(rctx, bus.Config, bus.Topic)
			cancel()
			if err != nil {
				return fmt.Errorf("read the audit events from %s: %w", bus.Topic, err)
			}
			for _, r := range recs {
				if r.Event.Stream == shred.AuditStream {
					evs = append(evs, r.Event)
				}
			}
		}

		var k *shred.Keyring
		if pgKeys {
			k, err = shred.OpenPostgres(ctx, s.pg.Pool(), master, shred.PostgresOptions{Options: shred.Options{Existing: true}})
		} else {
			k, err = shred.OpenDir(ctx, keys, master, shred.DirOptions{Options: shred.Options{Existing: true}, Logger: e.log})
		}
		if errors.Is(err, shred.ErrNoKeyring) {
			// A path or database with no keyring is the operator's
			// mistake, not a keyring with nothing to re-forget.
			return usageError{Msg: err.Error()}
		}
		if err != nil {
			return err
		}
		var res struct {
			Reforgotten int    `json:"reforgotten"`
			AuditEvents int    `json:"audit_events"`
			Source      string `json:"source"`
		}
		if from == "" && busURL == "" {
			source = "store " + sf.describe()
			counted := &countingReader{r: s}
			res.Reforgotten, err = k.Reforget(ctx, counted)
			res.AuditEvents = counted.n
		} else {
			res.Reforgotten, err = k.ReforgetEvents(ctx, evs)
			res.AuditEvents = len(evs)
		}
		res.Source = source
		if cerr := k.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if res.Reforgotten > 0 {
			e.log.Warn("destroyed again keys the audit events say were forgotten", "keys", res.Reforgotten, "source", source)
		}
		return o.Print(e.stdout, res, cliutil.Pairs([][2]string{
			{"reforgotten", strconv.Itoa(res.Reforgotten)},
			{"audit_events", strconv.Itoa(res.AuditEvents)},
			{"source", source},
		}))
	}
	return cmd
}

// countingReader counts the audit events Reforget reads.
type countingReader struct {
	r shred.AuditReader
	n int
}

func (c *countingReader) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]eventstore.Event, error) {
	evs, err := c.r.ReadStream(ctx, stream, from, max)
	c.n += len(evs)
	return evs, err
}

// readAuditFile reads an audit export: every line a JSON audit event
// whose data is a forgetting with a well-formed subject hash. Any other
// line is a usage error naming it. Events of other streams are skipped.
func readAuditFile(path string, stdin io.Reader) ([]eventstore.Event, error) {
	var r io.Reader
	if path == "-" {
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, usagef("--from: %v", err)
		}
		defer f.Close()
		r = f
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var evs []eventstore.Event
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var l auditLine
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, usagef("--from %s line %d: not an audit event: %v", path, line, err)
		}
		if l.Stream != shred.AuditStream {
			continue
		}
		if l.Type != shred.TypeSubjectForgotten {
			return nil, usagef("--from %s line %d: type %q, want %s", path, line, l.Type, shred.TypeSubjectForgotten)
		}
		var f shred.Forgotten
		if err := json.Unmarshal(l.Data, &f); err != nil {
			return nil, usagef("--from %s line %d: data: %v", path, line, err)
		}
		if raw, err := hex.DecodeString(f.SubjectHash); err != nil || len(raw) != 32 {
			return nil, usagef("--from %s line %d: subject_hash %q: want 64 hex digits", path, line, f.SubjectHash)
		}
		evs = append(evs, eventstore.Event{Stream: l.Stream, Seq: l.Seq, Position: l.Position, Type: l.Type, Version: l.Version, Time: l.Time, Data: l.Data})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, usagef("--from %s: a line longer than 1 MiB: not an audit export", path)
		}
		return nil, err
	}
	return evs, nil
}
