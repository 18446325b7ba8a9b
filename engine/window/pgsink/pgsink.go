// Package pgsink writes the closed windows of a tumbling aggregation to a
// PostgreSQL table, one row per window and key with its final values, the
// window's start and end as real key columns next to the dimensions.
//
// Exactly once across restarts: windows are written in order of their
// end, and every transaction that upserts rows also moves the sink's
// progress (the end up to which every closed window is written) in a
// table of its own, so a crash either keeps both or neither. The upsert
// makes the rows of a transaction whose outcome a crash left unknown safe
// to write again.
package pgsink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/logbook/logbook/engine/window"
)

// Config configures a Sink.
type Config struct {
	// Table names the table (created if missing), in the connection's
	// search path.
	Table string
	// Unit is the size of the windows written: the aggregation's window
	// size or one of its roll-ups (default the window size).
	Unit time.Duration
	// Interval is how often Run looks for newly closed windows (default
	// 1 s).
	Interval time.Duration
	// MaxRows is the rows after which a transaction commits (default
	// 10,000); a transaction holds whole windows. The aggregation's own
	// Options.MaxRows must cover the keys of one window.
	MaxRows int
}

// Sink writes an aggregation's closed windows to PostgreSQL.
type Sink struct {
	pool  *pgxpool.Pool
	agg   *window.Aggregation
	cfg   Config
	name  string // the progress row's key
	def   window.Definition
	upsrt string
	// queries counts the aggregation's queries (for tests).
	queries int
}

// ProgressTable holds every sink's progress: the end (Unix ns) up to
// which all closed windows are in its table.
const ProgressTable = "logbook_window_sinks"

// New prepares a sink of agg into cfg.Table, creating the tables.
func New(ctx context.Context, pool *pgxpool.Pool, agg *window.Aggregation, cfg Config) (*Sink, error) {
	def := agg.Definition()
	if def.Window.Kind != window.KindTumbling {
		return nil, fmt.Errorf("pgsink: %s windows are %s; the sink writes tumbling windows", def.Name, def.Window.Kind)
	}
	if cfg.Unit == 0 {
		cfg.Unit = def.Window.Size
	}
	ok := cfg.Unit == def.Window.Size
	for _, r := range def.RollUps {
		ok = ok || cfg.Unit == r
	}
	if !ok {
		return nil, fmt.Errorf("pgsink: unit %s is neither the window size nor a roll-up of %s", cfg.Unit, def.Name)
	}
	if cfg.Table == "" {
		return nil, errors.New("pgsink: no table")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.MaxRows <= 0 {
		cfg.MaxRows = 10_000
	}
	s := &Sink{pool: pool, agg: agg, cfg: cfg, def: def, name: cfg.Table}
	cols := []string{"window_start timestamptz NOT NULL", "window_end timestamptz NOT NULL"}
	names := []string{"window_start", "window_end"}
	key := []string{}
	for _, d := range def.Dims {
		cols = append(cols, ident(d)+" text NOT NULL")
		names = append(names, ident(d))
		key = append(key, ident(d))
	}
	key = append(key, "window_start", "window_end")
	cols = append(cols, "count bigint NOT NULL", "late bigint NOT NULL")
	names = append(names, "count", "late")
	for _, v := range def.Values {
		for _, agg := range []string{"sum", "min", "max", "avg"} {
			cols = append(cols, ident(v+"_"+agg)+" double precision")
			names = append(names, ident(v+"_"+agg))
		}
	}
	for _, d := range def.Distinct {
		cols = append(cols, ident(d+"_distinct")+" bigint NOT NULL", ident(d+"_distinct_exact")+" boolean NOT NULL")
		names = append(names, ident(d+"_distinct"), ident(d+"_distinct_exact"))
	}
	table := ident(cfg.Table)
	ddl := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (%s, PRIMARY KEY (%s));
CREATE TABLE IF NOT EXISTS %s (sink text PRIMARY KEY, written_until bigint NOT NULL)`,
		table, strings.Join(cols, ", "), strings.Join(key, ", "), ProgressTable)
	if _, err := pool.Exec(ctx, ddl); err != nil {
		return nil, fmt.Errorf("pgsink: create tables: %w", err)
	}
	ph := make([]string, len(names))
	set := []string{}
	for i, n := range names {
		ph[i] = fmt.Sprintf("$%d", i+1)
		if i >= 2+len(def.Dims) {
			set = append(set, n+" = EXCLUDED."+n)
		}
	}
	s.upsrt = fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) ON CONFLICT (%s) DO UPDATE SET %s",
		table, strings.Join(names, ", "), strings.Join(ph, ", "), strings.Join(key, ", "), strings.Join(set, ", "))
	return s, nil
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

// Progress returns the end up to which every closed window is written
// (ok false: none yet).
func (s *Sink) Progress(ctx context.Context) (time.Time, bool, error) {
	var ns int64
	err := s.pool.QueryRow(ctx, "SELECT written_until FROM "+ProgressTable+" WHERE sink = $1", s.name).Scan(&ns)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("pgsink: read progress: %w", err)
	}
	return time.Unix(0, ns).UTC(), true, nil
}

// Run syncs every Interval until ctx ends (then it returns nil) or a
// sync fails.
func (s *Sink) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := s.Sync(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sync writes every window closed since the last sync and returns how
// many rows it wrote.
func (s *Sink) Sync(ctx context.Context) (int, error) {
	first, now, ok, err := s.agg.Span(ctx)
	if err != nil || !ok {
		return 0, err
	}
	u := int64(s.cfg.Unit)
	floor := func(t int64) int64 {
		q := t / u
		if t%u != 0 && t < 0 {
			q--
		}
		return q * u
	}
	// Every window ending at or before upTo is closed, and nothing after.
	upTo := floor(now.UnixNano() - int64(s.def.Grace))
	from := floor(first.UnixNano())
	if p, ok, err := s.Progress(ctx); err != nil {
		return 0, err
	} else if ok {
		from = p.UnixNano() // the windows ending there are written
	}
	written := 0
	var pending []window.Row
	flush := func(until int64) error {
		if err := s.write(ctx, pending, until); err != nil {
			return err
		}
		written += len(pending)
		pending = pending[:0]
		return nil
	}
	// Each step seeks to the next window that holds anything: an empty
	// stretch, however long (a quiet year, or the time between an old
	// event and the present), costs one seek, not a query per unit.
	for start := from; start+u <= upTo; start += u {
		next, ok, err := s.agg.NextStart(ctx, s.cfg.Unit, time.Unix(0, start))
		if err != nil {
			return written, fmt.Errorf("pgsink: seek from %s: %w", time.Unix(0, start).UTC(), err)
		}
		if !ok || next.UnixNano()+u > upTo {
			break // nothing more is closed
		}
		start = next.UnixNano()
		res, err := s.agg.Query(ctx, window.Query{
			From: time.Unix(0, start), To: time.Unix(0, start+u), Unit: s.cfg.Unit,
			GroupBy: s.def.Dims, Final: true, Limit: 0,
		})
		s.queries++
		if err != nil {
			return written, fmt.Errorf("pgsink: query %s: %w", time.Unix(0, start).UTC(), err)
		}
		pending = append(pending, res.Rows...)
		if len(pending) >= s.cfg.MaxRows {
			if err := flush(start + u); err != nil {
				return written, err
			}
		}
	}
	// Everything closed is written: the progress moves to upTo, across
	// the empty windows at the end too, so the next sync starts there.
	if upTo > from {
		if err := flush(upTo); err != nil {
			return written, err
		}
	}
	return written, nil
}

// write upserts rows and moves the progress to until, in one transaction.
func (s *Sink) write(ctx context.Context, rows []window.Row, until int64) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgsink: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // after Commit, a no-op
	b := &pgx.Batch{}
	for _, r := range rows {
		args := []any{r.Start, r.End}
		for _, d := range s.def.Dims {
			args = append(args, r.Dims[d])
		}
		args = append(args, int64(r.Count), int64(r.Late))
		for _, v := range s.def.Values {
			st := r.Values[v]
			args = append(args, st.Sum, st.Min, st.Max, st.Avg)
		}
		for _, d := range s.def.Distinct {
			dc := r.Distinct[d]
			args = append(args, int64(dc.Count), dc.Exact)
		}
		b.Queue(s.upsrt, args...)
	}
	b.Queue("INSERT INTO "+ProgressTable+" (sink, written_until) VALUES ($1, $2) ON CONFLICT (sink) DO UPDATE SET written_until = EXCLUDED.written_until",
		s.name, until)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("pgsink: write: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgsink: commit: %w", err)
	}
	return nil
}
