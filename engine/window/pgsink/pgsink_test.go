//go:build unix

package pgsink

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/eventstore/pebblestore"
	"github.com/logbook/logbook/engine/projection"
	"github.com/logbook/logbook/engine/window"
	"github.com/logbook/logbook/internal/crashtest"
	"github.com/logbook/logbook/internal/testenv"
)

// Events carry time (8 bytes), sender, kind and value (one byte each).
func def() window.Definition {
	return window.Definition{
		Name: "sink", Window: window.Tumbling(time.Minute), RollUps: []time.Duration{time.Hour},
		Grace: time.Minute, Dims: []string{"sender", "kind"}, Values: []string{"v"}, Distinct: []string{"v-set"},
		Extract: func(ev *eventstore.Event, r *window.Record) bool {
			d := ev.Data
			r.Time = time.Unix(0, int64(binary.BigEndian.Uint64(d)))
			r.Dims[0], r.Dims[1] = fmt.Sprintf("s%d", d[8]), fmt.Sprintf("k%d", d[9])
			r.Values[0] = float64(d[10])
			r.Distinct[0] = strconv.Itoa(int(d[10]) % 7)
			return true
		},
	}
}

// build appends n events spread over a few hours and aggregates them.
func build(t *testing.T, rng *rand.Rand, n int) string {
	t.Helper()
	dir := t.TempDir()
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clock := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var evs []eventstore.NewEvent
	for range n {
		clock += int64(rng.IntN(int(2 * time.Second)))
		ts := clock
		if rng.IntN(50) == 0 {
			ts -= int64(rng.IntN(int(4 * time.Minute))) // some late
		}
		d := binary.BigEndian.AppendUint64(nil, uint64(ts))
		evs = append(evs, eventstore.NewEvent{Type: "e", Data: append(d, byte(rng.IntN(4)), byte(rng.IntN(3)), byte(rng.IntN(100)))})
	}
	ctx := context.Background()
	for i := 0; i < len(evs); i += 500 {
		if _, err := st.Append(ctx, "s", eventstore.Any, evs[i:min(i+500, len(evs))]); err != nil {
			t.Fatal(err)
		}
	}
	a, err := window.Open(dir, def(), window.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(ctx)
	r := projection.NewRunner(st, a, projection.Options{})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	if err := r.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return dir
}

// expected renders the final windows ending at or before until, as the
// table should hold them.
func expected(t *testing.T, a *window.Aggregation, unit time.Duration, until time.Time) []string {
	t.Helper()
	res, err := a.Query(context.Background(), window.Query{Unit: unit, GroupBy: []string{"sender", "kind"}, Final: true, To: until})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range res.Rows {
		v := r.Values["v"]
		line := fmt.Sprintf("%s %s %s %s n=%d late=%d sum=%g", r.Start.Format(time.RFC3339), r.End.Format(time.RFC3339), r.Dims["sender"], r.Dims["kind"], r.Count, r.Late, v.Sum)
		if v.Min != nil {
			line += fmt.Sprintf(" min=%g max=%g avg=%.4f", *v.Min, *v.Max, *v.Avg)
		}
		d := r.Distinct["v-set"]
		out = append(out, line+fmt.Sprintf(" d=%d/%v", d.Count, d.Exact))
	}
	sort.Strings(out)
	return out
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func table(t *testing.T, pool querier, name string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT window_start, window_end, sender, kind, count, late, v_sum, v_min, v_max, v_avg, "v-set_distinct", "v-set_distinct_exact" FROM `+name)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var start, end time.Time
		var s, k string
		var n, late, dn int64
		var sum float64
		var mn, mx, avg *float64
		var exact bool
		if err := rows.Scan(&start, &end, &s, &k, &n, &late, &sum, &mn, &mx, &avg, &dn, &exact); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%s %s %s %s n=%d late=%d sum=%g", start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), s, k, n, late, sum)
		if mn != nil {
			line += fmt.Sprintf(" min=%g max=%g avg=%.4f", *mn, *mx, *avg)
		}
		out = append(out, line+fmt.Sprintf(" d=%d/%v", dn, exact))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// pool connects to a fresh schema of the test database.
func pool(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	url, schema := testenv.SchemaURL(t)
	p, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if _, err := p.Exec(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	return p, url
}

func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") == strings.Join(want, "\n") {
		return
	}
	in := func(s []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range s {
			m[x] = true
		}
		return m
	}
	g, w := in(got), in(want)
	var extra, missing []string
	for _, x := range got {
		if !w[x] {
			extra = append(extra, x)
		}
	}
	for _, x := range want {
		if !g[x] {
			missing = append(missing, x)
		}
	}
	t.Errorf("%s: table has %d rows, want %d\nnot wanted:\n%s\nmissing:\n%s", what, len(got), len(want), strings.Join(extra, "\n"), strings.Join(missing, "\n"))
}

func TestSink(t *testing.T) {
	p, _ := pool(t)
	dir := build(t, rand.New(rand.NewPCG(1, 2)), 3000)
	a, err := window.Open(dir, def(), window.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	for _, unit := range []time.Duration{time.Minute, time.Hour} {
		s, err := New(ctx, p, a, Config{Table: "sink_" + unit.String(), Unit: unit, MaxRows: 37})
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		until, ok, err := s.Progress(ctx)
		if err != nil || !ok {
			t.Fatalf("progress %v %v", ok, err)
		}
		_, now, _, _ := a.Span(ctx)
		if want := now.Add(-def().Grace).Truncate(unit); !until.Equal(want) {
			t.Errorf("%s: progress %s, want %s", unit, until, want)
		}
		want := expected(t, a, unit, until)
		if n != len(want) || len(want) == 0 {
			t.Errorf("%s: wrote %d rows, want %d", unit, n, len(want))
		}
		same(t, unit.String(), table(t, p, "sink_"+unit.String()), want)
		if n, err := s.Sync(ctx); err != nil || n != 0 {
			t.Errorf("second sync wrote %d (%v)", n, err)
		}
	}
	if _, err := New(ctx, p, a, Config{Table: "x", Unit: 2 * time.Minute}); err == nil {
		t.Error("a unit that is no level accepted")
	}
}

// A gap of a million minutes between two events (an old event, then
// the present) is crossed with a seek, not a query per minute: the sync
// takes a handful of queries, writes both windows and moves the
// progress to the end of what is closed.
func TestSinkSeeksOverEmptyStretches(t *testing.T) {
	p, _ := pool(t)
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Date(2024, 1, 1, 0, 0, 30, 0, time.UTC)
	t1 := t0.Add(1_000_000 * time.Minute)
	var evs []eventstore.NewEvent
	for _, ts := range []time.Time{t0, t1, t1.Add(5 * time.Minute)} {
		evs = append(evs, eventstore.NewEvent{Type: "e", Data: append(binary.BigEndian.AppendUint64(nil, uint64(ts.UnixNano())), 1, 2, 3)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := st.Append(ctx, "s", eventstore.Any, evs); err != nil {
		t.Fatal(err)
	}
	a, err := window.Open(t.TempDir(), def(), window.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	rctx, stop := context.WithCancel(ctx)
	r := projection.NewRunner(st, a, projection.Options{})
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	if err := r.WaitCaughtUp(rctx); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, p, a, Config{Table: "gap", Unit: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || s.queries > 4 {
		t.Fatalf("wrote %d rows with %d queries; want 2 rows, at most 4 queries", n, s.queries)
	}
	until, ok, err := s.Progress(ctx)
	if want := t1.Add(5*time.Minute - def().Grace).Truncate(time.Minute); err != nil || !ok || !until.Equal(want) {
		t.Fatalf("progress %s %v %v, want %s", until, ok, err, want)
	}
	same(t, "gap", table(t, p, "gap"), expected(t, a, time.Minute, until))
}

const (
	envURL = "LOGBOOK_PGSINK_CHILD_URL"
	envDir = "LOGBOOK_PGSINK_CHILD_DIR"
)

// TestSinkCrash kills a sink with SIGKILL while it writes, again and
// again: after every kill the table must hold exactly the windows up to
// the sink's progress — none skipped, none beyond — and at the end all.
func TestSinkCrash(t *testing.T) {
	p, url := pool(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	dir := build(t, rng, 40000)
	midway := 0
	for round := range 4 {
		child := crashtest.Start(t, crashtest.Spec{Test: "TestSinkChild", Env: []string{envURL + "=" + url, envDir + "=" + dir}})
		if !child.WaitFor("READY", 30*time.Second) {
			t.Fatal("child not ready after 30 s")
		}
		// The child writes some 1,500 transactions of 5 rows: a kill within
		// 150 ms of its start lands part way on a fast machine too.
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		child.Kill()

		a, err := window.Open(dir, def(), window.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(context.Background(), p, a, Config{Table: "crash", MaxRows: 25})
		if err != nil {
			t.Fatal(err)
		}
		// The progress and the rows from one snapshot: a commit the child
		// sent just before the kill may still land while we look.
		tx, err := p.BeginTx(context.Background(), pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err != nil {
			t.Fatal(err)
		}
		var ns int64
		err = tx.QueryRow(context.Background(), "SELECT written_until FROM "+ProgressTable+" WHERE sink = 'crash'").Scan(&ns)
		ok := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		until := time.Unix(0, ns).UTC()
		got := table(t, tx, "crash")
		_ = tx.Rollback(context.Background())
		var want []string
		if ok {
			want = expected(t, a, time.Minute, until)
		}
		same(t, fmt.Sprintf("round %d, progress %s", round, until), got, want)
		_, now, _, _ := a.Span(context.Background())
		if ok && until.Before(now.Add(-def().Grace).Truncate(time.Minute)) {
			midway++
		}
		t.Logf("round %d: progress %s, %d rows", round, until, len(got))
		if round == 3 {
			if _, err := s.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			until, _, _ = s.Progress(context.Background())
			same(t, "after the last sync", table(t, p, "crash"), expected(t, a, time.Minute, until))
		}
		a.Close()
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
	if midway == 0 {
		t.Error("no kill left the sink part way")
	}
}

// TestSinkChild is the workload TestSinkCrash kills.
func TestSinkChild(t *testing.T) {
	out := crashtest.Child(t)
	a, err := window.Open(os.Getenv(envDir), def(), window.Options{})
	if err != nil {
		out.Fail("open: %v", err)
	}
	p, err := pgxpool.New(context.Background(), os.Getenv(envURL))
	if err != nil {
		out.Fail("connect: %v", err)
	}
	s, err := New(context.Background(), p, a, Config{Table: "crash", MaxRows: 5})
	if err != nil {
		out.Fail("sink: %v", err)
	}
	out.Printf("READY")
	// One sync of small transactions, so that kills land part way.
	if _, err := s.Sync(context.Background()); err != nil {
		out.Fail("sync: %v", err)
	}
	time.Sleep(time.Hour)
}
