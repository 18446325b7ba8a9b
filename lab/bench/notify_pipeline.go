package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// pipelineTarget is `logbook notify serve` run as a child process with a
// fresh data directory, so that its first request is a true cold start.
type pipelineTarget struct {
	cmd    *exec.Cmd
	tmp    string // removed at close
	url    string
	token  string
	client *http.Client
	exited chan error
	stderr *bytes.Buffer
	log    *slog.Logger
	exe    string
	args   []string
	env    []string  // added to the bench's environment
	ready  time.Time // when /healthz first answered after the last start
}

func (t *pipelineTarget) readyAt() time.Time { return t.ready }

// pipelineArgs are the service's command line and the environment
// variables added to the bench's: its store (and state) in fresh
// directories, the users' tables in the benchmark's schema followed
// through a slot and publication named after it, both channels
// delivered to the sink. The URLs, which may carry passwords, go in the
// environment, out of ps.
func pipelineArgs(cfg NotifyConfig, data, state, addr, tokens, sinkURL string) (args, env []string) {
	args = []string{"notify", "serve", "--addr", addr, "--tokens", tokens,
		"--users-schema", cfg.Schema, "--slot", pipelineSlot(cfg),
		"--state", state, "--push-url", sinkURL, "--email-url", sinkURL, "--log-level", "warn"}
	env = []string{"LOGBOOK_USERS_DB=" + cfg.UsersDB, "LOGBOOK_STORE=" + cfg.Store, "LOGBOOK_BUS=" + cfg.Bus}
	if cfg.Store == "" {
		args = append(args, "--data", data)
	}
	if cfg.DebugAddr != "" {
		args = append(args, "--debug-addr", cfg.DebugAddr)
	}
	return args, env
}

// pipelineSlot names the service's replication slot and publication.
func pipelineSlot(cfg NotifyConfig) string { return cfg.Schema + "_slot" }

func startPipeline(ctx context.Context, cfg NotifyConfig, sinkURL string) (target, error) {
	if cfg.Exe == "" {
		return nil, errors.New("bench notify: pipeline mode needs the logbook executable")
	}
	tmp, err := os.MkdirTemp("", "logbook-bench-notify-")
	if err != nil {
		return nil, err
	}
	data := cfg.Data
	if data == "" {
		data = filepath.Join(tmp, "data")
	} else if entries, err := os.ReadDir(data); err == nil && len(entries) > 0 {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("bench notify: --data %s is not empty: the cold start needs a fresh directory", data)
	}
	const token = "bench-sender-token"
	tokens := filepath.Join(tmp, "tokens")
	if err := os.WriteFile(tokens, []byte(token+" sender\n"+token+"-viewer viewer\n"), 0o600); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	// A free port: taken and let go, the child listens on it at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()

	t := &pipelineTarget{tmp: tmp, url: "http://" + addr, token: token, client: &http.Client{}, log: cfg.Log, exe: cfg.Exe}
	t.args, t.env = pipelineArgs(cfg, data, filepath.Join(tmp, "state"), addr, tokens, sinkURL)
	if err := t.start(ctx); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	return t, nil
}

// start runs the service and returns once its /healthz answers.
func (t *pipelineTarget) start(ctx context.Context) error {
	t.exited, t.stderr = make(chan error, 1), &bytes.Buffer{}
	t.cmd = exec.Command(t.exe, t.args...)
	t.cmd.Env = append(os.Environ(), t.env...)
	t.cmd.Stdout = io.Discard
	t.cmd.Stderr = &limitedBuffer{b: t.stderr, max: 64 << 10}
	if err := t.cmd.Start(); err != nil {
		return fmt.Errorf("bench notify: start the service: %w", err)
	}
	go func() { t.exited <- t.cmd.Wait() }()
	for {
		select {
		case err := <-t.exited:
			t.exited <- err
			return fmt.Errorf("bench notify: the service exited (%v): %s", err, strings.TrimSpace(t.stderr.String()))
		case <-ctx.Done():
			t.stop()
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
		resp, err := t.client.Get(t.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.ready = time.Now()
				return nil
			}
		}
	}
}

// copied waits until the service's /healthz says its users view answers
// from its own rows (`"users": "view"`), not from the users' database's
// snapshot while the first copy runs, and returns when it first did. A
// service that does not say (an older --exe) is taken as copied.
func (t *pipelineTarget) copied(ctx context.Context) (time.Time, error) {
	for {
		resp, err := t.client.Get(t.url + "/healthz")
		if err == nil {
			var h struct {
				Users *string `json:"users"`
			}
			derr := json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && derr == nil && (h.Users == nil || *h.Users == "view") {
				return time.Now(), nil
			}
		}
		select {
		case err := <-t.exited:
			t.exited <- err
			return time.Time{}, fmt.Errorf("bench notify: the service exited (%v): %s", err, strings.TrimSpace(t.stderr.String()))
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// restart stops the service and starts it again on the same store and
// state: a cold process with its data in place.
func (t *pipelineTarget) restart(ctx context.Context) error {
	if err := t.stop(); err != nil {
		return err
	}
	return t.start(ctx)
}

func (t *pipelineTarget) do(ctx context.Context, method, path string, body []byte, hdr map[string]string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, t.url+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+t.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s", method, path, problemDetail(resp.Status, data))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (t *pipelineTarget) send(ctx context.Context, id string, ids []int64, at time.Time) (sendAnswer, error) {
	body, err := json.Marshal(map[string]any{"type": NotifyType, "club_id": 1, "sender": notifySender, "timestamp": at, "to_users": ids})
	if err != nil {
		return sendAnswer{}, err
	}
	var a struct {
		ID       string `json:"id"`
		Position uint64 `json:"position"`
	}
	if err := t.do(ctx, http.MethodPost, "/api/notifications", body, map[string]string{"Idempotency-Key": id}, &a); err != nil {
		return sendAnswer{}, err
	}
	return sendAnswer{id: a.ID, position: a.Position}, nil
}

// finish waits until the service says the request is done and reads its
// counts.
func (t *pipelineTarget) finish(ctx context.Context, a *sendAnswer) error {
	for {
		var st struct {
			State  string `json:"state"`
			Counts struct {
				Delivered    int64 `json:"delivered"`
				DeadLettered int64 `json:"dead_lettered"`
				Retries      int64 `json:"retries"`
			} `json:"counts"`
		}
		path := fmt.Sprintf("/api/notifications/%s?min_position=%d", url.PathEscape(a.id), a.position)
		if err := t.do(ctx, http.MethodGet, path, nil, nil, &st); err != nil {
			return err
		}
		if st.State == "done" {
			a.retries, a.failed, a.delivered, a.counted = st.Counts.Retries, st.Counts.DeadLettered, st.Counts.Delivered, true
			return nil
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("request %s not done: %w", a.id, ctx.Err())
		}
	}
}

// notifySender is the sender of the benchmark's requests.
const notifySender = "bench"

// metricValues are the metric windows' values the check compares.
var metricValues = []string{"requested", "delivered", "retries", "dead_lettered"}

// metricsMismatches compares the service's metric windows — per minute,
// hour and day, the benchmark's sender — with what the requests sent
// should have added to each: requested, delivered (the recount),
// retries (the service's own count per request) and dead-lettered (0).
// A window that differs, one missing or one not expected, counts once
// per value. The windows follow the log, so it waits up to 30 s for them
// to agree before it counts.
func (t *pipelineTarget) metricsMismatches(ctx context.Context, sent []sentRequest) (*int64, error) {
	if len(sent) == 0 {
		var zero int64
		return &zero, nil
	}
	from, to := sent[0].at.Add(-48*time.Hour), time.Now().Add(48*time.Hour)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int64
		for _, u := range []struct {
			name string
			d    time.Duration
		}{{"minute", time.Minute}, {"hour", time.Hour}, {"day", 24 * time.Hour}} {
			// Windows by their start in Unix nanoseconds: a time.Time key
			// would tell UTC from local time.
			want := map[int64][]float64{}
			for _, r := range sent {
				start := r.at.Truncate(u.d).UnixNano()
				w := want[start]
				if w == nil {
					w = make([]float64, len(metricValues))
					want[start] = w
				}
				w[0] += float64(r.requested)
				w[1] += float64(r.delivered)
				w[2] += float64(r.retries)
			}
			var res struct {
				Rows []struct {
					Start  time.Time `json:"start"`
					Values map[string]struct {
						Sum float64 `json:"sum"`
					} `json:"values"`
				} `json:"rows"`
			}
			q := url.Values{"unit": {u.name}, "sender": {notifySender}, "from": {from.UTC().Format(time.RFC3339)}, "to": {to.UTC().Format(time.RFC3339)}}
			if err := t.do(ctx, http.MethodGet, "/api/windows/notifications?"+q.Encode(), nil, nil, &res); err != nil {
				return nil, fmt.Errorf("bench notify: metric windows: %w", err)
			}
			seen := map[int64]bool{}
			for _, row := range res.Rows {
				w, ok := want[row.Start.UnixNano()]
				seen[row.Start.UnixNano()] = true
				for i, v := range metricValues {
					if !ok || row.Values[v].Sum != w[i] {
						n++
						t.log.Debug("bench notify: a metric window differs", "unit", u.name, "start", row.Start, "value", v, "window", row.Values[v].Sum, "want", w)
					}
				}
			}
			for start := range want {
				if !seen[start] {
					n += int64(len(metricValues))
				}
			}
		}
		if n == 0 || time.Now().After(deadline) {
			return &n, nil
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// stop ends the service with SIGTERM (SIGKILL after 30 s) and returns
// how it ended; a service that had exited already is not an error here.
func (t *pipelineTarget) stop() error {
	select {
	case <-t.exited:
		return nil
	default:
	}
	_ = t.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-t.exited:
		if err != nil {
			return fmt.Errorf("bench notify: the service stopped with %v: %s", err, strings.TrimSpace(t.stderr.String()))
		}
		return nil
	case <-time.After(30 * time.Second):
		_ = t.cmd.Process.Kill()
		<-t.exited
		return errors.New("bench notify: the service did not stop within 30 s of SIGTERM")
	}
}

func (t *pipelineTarget) close() {
	if err := t.stop(); err != nil {
		t.log.Warn(err.Error())
	}
	os.RemoveAll(t.tmp)
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
