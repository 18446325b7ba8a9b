package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/internal/cliutil"
)

// `logbook streams …`: deleting and expiring the streams of a store
// (eventstore.Deleter). The embedded store (--data) must not be open in
// another process; a PostgreSQL store (--store) may be in use.
func newStreamsCmd(e *env) *cobra.Command {
	return group("streams", "Delete, truncate and expire the streams of a store",
		newStreamsDeleteCmd(e),
		newStreamsTruncateCmd(e),
		newStreamsRetentionCmd(e),
		newStreamsSweepCmd(e),
	)
}

// withDeleter opens the store the flags name and runs fn with it.
func withDeleter(e *env, f *storeFlags, fn func(eventstore.Store, eventstore.Deleter) error) error {
	s, err := f.open(e.log)
	if err != nil {
		return err
	}
	defer s.Close()
	d, ok := s.Store.(eventstore.Deleter)
	if !ok {
		return fmt.Errorf("the store %s cannot delete events", f.describe())
	}
	return fn(s.Store, d)
}

func newStreamsDeleteCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete --stream ID [--hard] (--data DIR | --store URL)",
		Short: "Delete a stream: softly (a later append recreates it) or for good",
		Long: `Deletes a stream. A soft delete hides its events (reading it fails with
"stream deleted") and keeps its version: a later append expecting that
version recreates the stream, numbering on. A hard delete (--hard) hides
them for good and refuses every later append. The events' space is
reclaimed by the store's next sweep (logbook streams sweep, or the
background pass of the process serving the store).`,
		Example: `  logbook streams delete --stream order-42 --data ./data
  logbook streams delete --stream user-7 --hard --store postgres://localhost/logbook`,
		Args: noArgs,
	}
	var f storeFlags
	var stream string
	var hard bool
	f.register(cmd.Flags(), "")
	cmd.Flags().StringVar(&stream, "stream", "", "id of the stream to delete (required)")
	cmd.Flags().BoolVar(&hard, "hard", false, "delete for good: refuse every later append")
	out := cliutil.OutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if stream == "" {
			return usagef("--stream is required")
		}
		mode := eventstore.DeleteSoft
		if hard {
			mode = eventstore.DeleteHard
		}
		return withDeleter(e, &f, func(s eventstore.Store, d eventstore.Deleter) error {
			if err := d.DeleteStream(cmd.Context(), stream, mode); err != nil {
				return err
			}
			v, err := s.StreamVersion(cmd.Context(), stream)
			if err != nil {
				return err
			}
			res := struct {
				Stream  string `json:"stream"`
				Mode    string `json:"mode"`
				Version uint64 `json:"version"`
			}{stream, mode.String(), v}
			return out.Print(e.stdout, res, cliutil.Pairs([][2]string{{"stream", stream}, {"deleted", mode.String()}, {"version", strconv.FormatUint(v, 10)}}))
		})
	}
	return cmd
}

func newStreamsTruncateCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "truncate --stream ID --before N (--data DIR | --store URL)",
		Short: "Remove the events of a stream before a sequence number",
		Long: `Removes the events of a stream whose sequence number is below --before:
reads of the stream start at --before from now on. A --before past the
end of the stream empties it without hiding the events appended later.`,
		Example: `  logbook streams truncate --stream order-42 --before 100 --data ./data`,
		Args:    noArgs,
	}
	var f storeFlags
	var stream string
	var before uint64
	f.register(cmd.Flags(), "")
	cmd.Flags().StringVar(&stream, "stream", "", "id of the stream to truncate (required)")
	cmd.Flags().Uint64Var(&before, "before", 0, "first sequence number kept (required, at least 2)")
	out := cliutil.OutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if stream == "" {
			return usagef("--stream is required")
		}
		if before < 2 {
			return usagef("--before %d: want the first sequence number to keep, at least 2", before)
		}
		return withDeleter(e, &f, func(s eventstore.Store, d eventstore.Deleter) error {
			if err := d.TruncateStream(cmd.Context(), stream, before); err != nil {
				return err
			}
			res := struct {
				Stream string `json:"stream"`
				Before uint64 `json:"before"`
			}{stream, before}
			return out.Print(e.stdout, res, cliutil.Pairs([][2]string{{"stream", stream}, {"truncated before", strconv.FormatUint(before, 10)}}))
		})
	}
	return cmd
}

func newStreamsRetentionCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "retention (--prefix P | --stream ID) [--max-age D] [--max-count N] (--data DIR | --store URL)",
		Short: "Set, clear or list retention rules: expire events by age or count",
		Long: `Sets the retention rule of one stream (--stream) or of every stream whose
id starts with --prefix: events older than --max-age, or beyond the newest
--max-count, are removed by the store's sweep. Both zero clears the rule.
Without --stream or --prefix, lists the rules in force.`,
		Example: `  logbook streams retention --prefix session- --max-age 720h --data ./data
  logbook streams retention --stream audit --max-count 100000 --data ./data
  logbook streams retention --prefix session- --data ./data   # clears it
  logbook streams retention --data ./data -o json             # lists the rules`,
		Args: noArgs,
	}
	var f storeFlags
	var r eventstore.Retention
	f.register(cmd.Flags(), "")
	cmd.Flags().StringVar(&r.Stream, "stream", "", "the stream the rule applies to")
	cmd.Flags().StringVar(&r.Prefix, "prefix", "", "the stream-id prefix the rule applies to")
	cmd.Flags().DurationVar(&r.MaxAge, "max-age", 0, "expire events older than this (e.g. 720h); 0: no limit")
	cmd.Flags().Uint64Var(&r.MaxCount, "max-count", 0, "keep only the newest N events of each stream; 0: no limit")
	cmd.MarkFlagsMutuallyExclusive("stream", "prefix")
	out := cliutil.OutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if r.MaxAge < 0 {
			return usagef("--max-age %v: want a positive duration, or 0 for none", r.MaxAge)
		}
		list := r.Stream == "" && r.Prefix == ""
		if list && (r.MaxAge != 0 || r.MaxCount != 0) {
			return usagef("--max-age and --max-count need --stream or --prefix")
		}
		return withDeleter(e, &f, func(_ eventstore.Store, d eventstore.Deleter) error {
			if !list {
				if err := d.SetRetention(cmd.Context(), r); err != nil {
					return err
				}
			}
			rules, err := d.Retentions(cmd.Context())
			if err != nil {
				return err
			}
			type rule struct {
				Stream   string `json:"stream,omitempty"`
				Prefix   string `json:"prefix,omitempty"`
				MaxAge   string `json:"max_age,omitempty"`
				MaxCount uint64 `json:"max_count,omitempty"`
			}
			res := struct {
				Rules []rule `json:"rules"`
			}{Rules: []rule{}}
			rows := cliutil.Rows{Header: []string{"stream", "prefix", "max-age", "max-count"}}
			for _, r := range rules {
				age := ""
				if r.MaxAge > 0 {
					age = r.MaxAge.String()
				}
				res.Rules = append(res.Rules, rule{r.Stream, r.Prefix, age, r.MaxCount})
				rows.Rows = append(rows.Rows, []string{r.Stream, r.Prefix, age, strconv.FormatUint(r.MaxCount, 10)})
			}
			return out.Print(e.stdout, res, rows)
		})
	}
	return cmd
}

func newStreamsSweepCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sweep (--data DIR | --store URL)",
		Short: "Apply the retention rules and reclaim the space of removed events now",
		Long: `Runs one pass of the store's background sweep now: applies the retention
rules, then deletes the removed events for good, at the store's sweep rate,
and (embedded store) compacts the range they took so that the disk space
comes back. On PostgreSQL the space is left for autovacuum to reuse.`,
		Example: `  logbook streams sweep --data ./data -o json`,
		Args:    noArgs,
	}
	var f storeFlags
	f.register(cmd.Flags(), "")
	out := cliutil.OutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return withDeleter(e, &f, func(_ eventstore.Store, d eventstore.Deleter) error {
			start := time.Now()
			st, err := d.Sweep(cmd.Context())
			if err != nil {
				return err
			}
			res := struct {
				Truncated int     `json:"truncated"`
				Removed   int     `json:"removed"`
				Pending   int     `json:"pending"`
				Seconds   float64 `json:"seconds"`
			}{st.Truncated, st.Removed, st.Pending, time.Since(start).Seconds()}
			return out.Print(e.stdout, res, cliutil.Pairs([][2]string{
				{"streams truncated by retention", strconv.Itoa(st.Truncated)},
				{"events removed", strconv.Itoa(st.Removed)},
				{"streams still pending", strconv.Itoa(st.Pending)},
			}))
		})
	}
	return cmd
}
