package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/lab/bench"
	"github.com/logbook/logbook/lab/plot"
)

func newBenchKVCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kv",
		Short: "Measure puts/s of the kv repository on each backend, and Kafka",
		Long: `Measures puts per second (fresh keys, atomic batches) into each backend of
the kv repository (embedded, PostgreSQL, Redis, etcd, Cassandra) and into Kafka, by
batch size, payload, connections, partitions and persistence. The last
column is the reference figure for the same setting: Redis LPUSH and Kafka
producers measured on a 32-core server (no existence check, no version).
The backend cassandra-blobs is not the repository: it is the published
Cassandra workload (driver batches into the table PRIMARY KEY ((PARTKEY,
VS_ID), ID)), whose tables batch, connections, partitions, consistency,
replicas, payload and space (bytes on disk) are split by blob size as
published; replicas 2 and consistency TWO need two nodes
(scripts/cassandra.sh start --nodes 2), Kafka's replicas table two brokers
(scripts/kafka.sh start --brokers 2).
Backends whose address is not given are started with the repository's
scripts (scripts/redis.sh, scripts/etcd.sh, scripts/postgres.sh,
scripts/cassandra.sh, scripts/kafka.sh: run from the repository's root).`,
		Example: `  logbook bench kv --backends embedded --table batch
  logbook bench kv --backends redis,etcd --redis 127.0.0.1:6379 --etcd 127.0.0.1:2379
  logbook bench kv --backends embedded,cassandra --cassandra 127.0.0.1:19042 --table batch
  logbook bench kv --backends embedded,postgres --table long --size 20GB --plot long.svg
  logbook bench kv --backends cassandra-blobs --cassandra 127.0.0.1:19042,127.0.0.2:19042 --table consistency,replicas`,
		Args: cliutil.NoArgs,
	}
	fs := cmd.Flags()
	backends := fs.String("backends", "embedded,postgres,redis,etcd,kafka", "backends to measure")
	tables := fs.String("table", "batch,payload,persistence", "tables: batch, payload, connections, partitions, persistence, replicas (kafka, cassandra-blobs), consistency and space (cassandra-blobs), batch-20kB and connections-20kB (20 kB values), or all; or long (alone): fill each backend with --size bytes, puts/s per --interval")
	out := cliutil.OutputFlag(cmd, cliutil.Table, cliutil.JSON, cliutil.CSV)
	plotFile := fs.String("plot", "", "also draw each table, puts/s against its setting per backend, into this .svg or .png file (with several tables, one file each: NAME-TABLE.svg)")
	var cfg bench.KVConfig
	fs.DurationVar(&cfg.Duration, "duration", 2*time.Second, "length of each measurement")
	fs.IntVar(&cfg.Clients, "clients", 8, "concurrent clients (except in the connections table)")
	fs.IntVar(&cfg.UpdateClients, "cas-clients", 64, "clients of the embedded backend's compare-and-set row (0: none)")
	fs.StringVar(&cfg.DataDir, "data", benchDataDir, "parent directory of the embedded backend's databases")
	pg := fs.String("postgres", "", "PostgreSQL URL (default: scripts/postgres.sh start)")
	cliutil.SecretFlag(fs, "postgres")
	redis := fs.String("redis", "", "Redis host:port (default: scripts/redis.sh start)")
	etcd := fs.String("etcd", "", "etcd endpoints, comma-separated (default: scripts/etcd.sh start)")
	kafka := fs.String("kafka", "", "Kafka brokers, comma-separated (default: scripts/kafka.sh start)")
	cassandra := fs.String("cassandra", "", "Cassandra contact points host:port, comma-separated (default: scripts/cassandra.sh start)")
	long := registerKVLong(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg.Backends = strings.Split(*backends, ",")
		cfg.Tables = strings.Split(*tables, ",")
		if *tables == "long" {
			if err := long.check(*plotFile); err != nil {
				return err
			}
		}
		known := []string{"batch", "batch-20kB", "payload", "connections", "connections-20kB", "partitions", "persistence", "replicas", "consistency", "space"}
		if *tables == "all" {
			cfg.Tables = known
		}
		for _, t := range cfg.Tables {
			if !slices.Contains(known, t) && *tables != "long" {
				return cliutil.Usagef("--table %q: %s or all (or long, alone)", t, strings.Join(known, ", "))
			}
		}
		for _, b := range cfg.Backends {
			if !slices.Contains([]string{"embedded", "postgres", "redis", "etcd", "cassandra", "cassandra-blobs", "kafka"}, b) {
				return cliutil.Usagef("--backends %q: embedded, postgres, redis, etcd, cassandra, cassandra-blobs or kafka", b)
			}
		}
		if cfg.Duration <= 0 || cfg.Clients <= 0 || cfg.UpdateClients < 0 {
			return cliutil.Usage("--duration and --clients must be positive, --cas-clients not negative")
		}
		if *plotFile != "" {
			if err := plot.CheckFile(*plotFile); err != nil {
				return cliutil.Usagef("--plot %v", err)
			}
		}
		addr := func(flag *string, backend, script string) (string, error) {
			if *flag != "" || !slices.Contains(cfg.Backends, backend) {
				return *flag, nil
			}
			return startEngine(script)
		}
		var err error
		if cfg.PG, err = addr(pg, "postgres", "postgres"); err != nil {
			return err
		}
		if cfg.Redis, err = addr(redis, "redis", "redis"); err != nil {
			return err
		}
		var list string
		if list, err = addr(etcd, "etcd", "etcd"); err != nil {
			return err
		}
		if list != "" {
			cfg.Etcd = strings.Split(list, ",")
		}
		if list, err = addr(cassandra, "cassandra", "cassandra"); err != nil {
			return err
		}
		if list == "" {
			if list, err = addr(cassandra, "cassandra-blobs", "cassandra"); err != nil {
				return err
			}
		}
		if list != "" {
			cfg.Cassandra = strings.Split(list, ",")
		}
		if list, err = addr(kafka, "kafka", "kafka"); err != nil {
			return err
		}
		if list != "" {
			cfg.Kafka = strings.Split(list, ",")
		}
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return err
		}
		p, stop := e.ShowProgress(cmd, out.Quiet())
		cfg.Progress = p
		if *tables == "long" {
			return long.run(cmd, e, cfg, out, *plotFile, stop)
		}
		res, err := bench.RunKV(cmd.Context(), cfg)
		stop()
		if err != nil {
			return err
		}
		if *plotFile != "" {
			if err := saveKVFigures(*plotFile, res.Figures()); err != nil {
				return fmt.Errorf("--plot: %w", err)
			}
		}
		rows := res.Table()
		if out.Format() != cliutil.Table {
			return out.Print(e.Stdout, res, cliutil.Rows{Header: rows[0], Rows: rows[1:]})
		}
		tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
		}
		return tw.Flush()
	}
	return cmd
}

// startEngine runs scripts/NAME.sh start, which installs and starts a
// private server (or finds it running), and returns the address it prints.
func startEngine(name string) (string, error) {
	script := "scripts/" + name + ".sh"
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("no address given for %s and no %s here (run from the repository, or pass the address)", name, script)
	}
	var out, errb bytes.Buffer
	c := exec.Command(script, "start")
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return "", fmt.Errorf("%s start: %v: %s", script, err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// saveKVFigures writes one figure to file, or several to file's name
// with each table's name before the extension.
func saveKVFigures(file string, figs map[string]plot.Figure) error {
	if len(figs) == 1 {
		for _, f := range figs {
			return plot.Save(file, f)
		}
	}
	ext := filepath.Ext(file)
	for table, f := range figs {
		if err := plot.Save(strings.TrimSuffix(file, ext)+"-"+table+ext, f); err != nil {
			return err
		}
	}
	return nil
}
