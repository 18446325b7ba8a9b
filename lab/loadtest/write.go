package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/logbook/logbook/internal/progress"
	"github.com/logbook/logbook/lab/stats"
)

// WriteConfig is the write workload, the thesis's write-model test (see
// the package documentation): each simulated planner creates a rotation,
// adds legs to it one by one, creates an airplane and assigns the rotation
// to it. Planners start in waves.
type WriteConfig struct {
	Users        int
	Legs         int           // legs per user
	Waves        int           // users start in this many waves (default 10)
	WaveInterval time.Duration // between waves (default 100 ms)
	RunID        string        // makes ids unique across runs
	// Direct gives each planner a connection of its own (Conn) instead
	// of the shared pipelining Client.
	Direct   bool
	Progress *progress.Counter // counts commands answered, if not nil
}

// WriteResult has the columns of the thesis's write-model results table:
// users, commands per second, latency percentiles, failures.
type WriteResult struct {
	Users          int     `json:"users"`
	LegsPerUser    int     `json:"legs_per_user"`
	Seconds        float64 `json:"seconds"`
	CommandsPerSec float64 `json:"commands_per_sec"`
	stats.Summary
	Requests     int    `json:"requests"`
	Failures     int    `json:"failures"`
	FirstFailure string `json:"first_failure,omitempty"`
	// Ceiling is the same workload against a server that does no work
	// (RunCeiling), if asked for.
	Ceiling *CeilingResult `json:"ceiling,omitempty"`
	// Timeline is every second of the run, for charts.
	Timeline []Second `json:"-"`
}

// Rows renders the result as a table.
func (r WriteResult) Rows() [][2]string {
	rows := [][2]string{
		{"users / legs each", fmt.Sprintf("%d / %d", r.Users, r.LegsPerUser)},
		{"seconds", fmt.Sprintf("%.3f", r.Seconds)},
		{"commands/s", fmt.Sprintf("%.0f", r.CommandsPerSec)},
		{"p75 / p95 / p99 / max ms", fmt.Sprintf("%.2f / %.2f / %.2f / %.2f", r.P75, r.P95, r.P99, r.Max)},
		{"requests", fmt.Sprint(r.Requests)},
		{"failures", fmt.Sprint(r.Failures)},
	}
	if b := r.Ceiling; b != nil {
		rows = append(rows,
			[2]string{"bare net/http commands/s", fmt.Sprintf("%.0f", b.CommandsPerSec)},
			[2]string{"bare net/http p99 ms / failures", fmt.Sprintf("%.2f / %d", b.P99, b.Failures)},
			[2]string{"commands/s / bare net/http", fmt.Sprintf("%.3f", b.Ratio)})
	}
	return rows
}

var airports = []string{"FRA", "MUC", "VIE", "ZRH", "BRU", "HAM", "DUS", "BER"}

// RunWrite runs the planners and reports every command's latency.
func RunWrite(ctx context.Context, c *Client, cfg WriteConfig) (WriteResult, error) {
	if cfg.Users <= 0 || cfg.Legs < 0 {
		return WriteResult{}, errors.New("loadtest write: users > 0 and legs ≥ 0 required")
	}
	if cfg.Waves <= 0 {
		cfg.Waves = 10
	}
	if cfg.WaveInterval <= 0 {
		cfg.WaveInterval = 100 * time.Millisecond
	}
	if cfg.RunID == "" {
		cfg.RunID = time.Now().UTC().Format("150405.000")
	}
	commands := cfg.Users * (cfg.Legs + 3)
	rec := &recorder{lat: make([]time.Duration, 0, commands), timeline: make([]stats.Timed, 0, commands)}
	cfg.Progress.Start("commands", commands)
	var wg sync.WaitGroup
	start := time.Now()
	rec.start = start
	perWave := (cfg.Users + cfg.Waves - 1) / cfg.Waves
	for u := 0; u < cfg.Users; u++ {
		if u > 0 && u%perWave == 0 {
			select {
			case <-time.After(cfg.WaveInterval):
			case <-ctx.Done():
				wg.Wait()
				return WriteResult{}, ctx.Err()
			}
		}
		var do doer = c
		if cfg.Direct {
			k, err := c.NewConn()
			if err != nil {
				wg.Wait()
				return WriteResult{}, err
			}
			defer k.Close()
			do = k
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			planner(ctx, do, cfg, u, rec)
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	r := WriteResult{
		Users: cfg.Users, LegsPerUser: cfg.Legs,
		Seconds:        stats.Round(el, 3),
		CommandsPerSec: stats.Round(float64(len(rec.lat)-rec.failures)/el, 1),
		Summary:        stats.Summarize(rec.lat),
		Timeline:       rec.seconds(),
		Requests:       len(rec.lat),
		Failures:       rec.failures,
	}
	if rec.firstErr != nil {
		r.FirstFailure = rec.firstErr.Error()
	}
	return r, nil
}

// planner is one simulated user. A failed step ends the user's session,
// as it would a person's; the failure is counted.
// doer sends one request and reads its answer: a Client or a Conn.
type doer interface {
	Do(ctx context.Context, method, path, body string) (int, []byte, error)
}

func planner(ctx context.Context, c doer, cfg WriteConfig, u int, rec *recorder) {
	step := func(method, path, body string) ([]byte, bool) {
		t0 := time.Now()
		_, data, err := c.Do(ctx, method, path, body)
		rec.record(time.Since(t0), err, true)
		cfg.Progress.Add(1)
		return data, err == nil
	}
	rot := fmt.Sprintf("lt-%s-%d", cfg.RunID, u)
	if _, ok := step("POST", "/api/rotations", fmt.Sprintf(`{"id":%q}`, rot)); !ok {
		return
	}
	base := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(u%500) * time.Minute)
	// Each planner flies for an airline of its own, named from the run
	// and the user, so that runs and users do not share flight
	// designators: the workload is the thesis's valid schedule, not one
	// that piles up duplicate-designator violations run after run.
	airline := letters(runTag(fmt.Sprintf("%s/%d", cfg.RunID, u))[:3])
	for i := 0; i < cfg.Legs; i++ {
		dep := base.Add(time.Duration(i) * 3 * time.Hour)
		if _, ok := step("POST", "/api/rotations/"+rot+"/legs", legBody(airline, 1+i%9999,
			airports[i%len(airports)], airports[(i+1)%len(airports)], dep, dep.Add(100*time.Minute))); !ok {
			return
		}
	}
	reg := fmt.Sprintf("%s-%d", runTag(cfg.RunID), u)
	if _, ok := step("POST", "/api/airplanes", fmt.Sprintf(`{"registration":%q,"type":"A320","min_ground_time":40}`, reg)); !ok {
		return
	}
	step("PUT", "/api/airplanes/"+reg+"/rotation", fmt.Sprintf(`{"rotation":%q}`, rot))
}

// WaitCaughtUp waits, up to timeout, until the server's validation view
// has applied the whole log, as /healthz gives its head. A server just
// started on a freshly imported schedule rebuilds the view from the log
// first; a run started before that would time the rebuild along with the
// commands.
func WaitCaughtUp(ctx context.Context, c *Client, timeout time.Duration) error {
	_, data, err := c.Do(ctx, "GET", "/healthz", "")
	if err != nil {
		return err
	}
	var h struct {
		Head uint64 `json:"head"`
	}
	if err := json.Unmarshal(data, &h); err != nil {
		return fmt.Errorf("GET /healthz: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		status, data, err := c.Do(ctx, "GET", "/api/validity", "")
		if status == http.StatusNotFound {
			return nil // a commands-only node has no view to wait for
		}
		if err != nil {
			return err
		}
		var v struct {
			Position *uint64 `json:"position"`
		}
		if err := json.Unmarshal(data, &v); err != nil || v.Position == nil {
			return fmt.Errorf("GET /api/validity: no position in %.100q", data)
		}
		if *v.Position >= h.Head {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server's view is at position %d of %d after %s", *v.Position, h.Head, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// legBody is the JSON of an added leg. Built by hand: encoding a map per
// command was a tenth of the load generator's CPU, which the server's
// two cores share.
func legBody(airline string, number int, origin, destination string, dep, arr time.Time) string {
	b := make([]byte, 0, 160)
	b = append(b, `{"airline":`...)
	b = strconv.AppendQuote(b, airline)
	b = append(b, `,"number":`...)
	b = strconv.AppendInt(b, int64(number), 10)
	b = append(b, `,"origin":`...)
	b = strconv.AppendQuote(b, origin)
	b = append(b, `,"destination":`...)
	b = strconv.AppendQuote(b, destination)
	b = append(b, `,"departure":"`...)
	b = dep.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","arrival":"`...)
	b = arr.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `"}`...)
	return string(b)
}

// letters maps a tag's digits to letters: airline codes end in a letter.
func letters(tag string) string {
	b := []byte(tag)
	for i, c := range b {
		if c >= '0' && c <= '9' {
			b[i] = 'A' + (c-'0')*2
		}
	}
	return string(b)
}

// runTag condenses a run id into four letters and digits, so that a
// registration (at most 10 characters) can carry it and a user number.
func runTag(id string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	v := h.Sum32()
	var b [4]byte
	for i := range b {
		b[i] = alphabet[v%36]
		v /= 36
	}
	return string(b[:])
}
