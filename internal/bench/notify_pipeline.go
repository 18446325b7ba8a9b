package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
}

// pipelineArgs are the service's command line: its store (and state)
// in fresh directories, the users' tables in the benchmark's schema
// followed through a slot and publication named after it, both
// channels delivered to the sink.
func pipelineArgs(cfg NotifyConfig, data, state, addr, tokens, sinkURL string) []string {
	args := []string{"notify", "serve", "--addr", addr, "--tokens", tokens,
		"--users-db", cfg.UsersDB, "--users-schema", cfg.Schema, "--slot", pipelineSlot(cfg),
		"--state", state, "--push-url", sinkURL, "--email-url", sinkURL, "--log-level", "warn"}
	if cfg.Store != "" {
		args = append(args, "--store", cfg.Store)
	} else {
		args = append(args, "--data", data)
	}
	if cfg.Bus != "" {
		args = append(args, "--bus", cfg.Bus)
	}
	if cfg.DebugAddr != "" {
		args = append(args, "--debug-addr", cfg.DebugAddr)
	}
	return args
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

	t := &pipelineTarget{tmp: tmp, url: "http://" + addr, token: token, client: &http.Client{}, exited: make(chan error, 1), stderr: &bytes.Buffer{}}
	t.cmd = exec.Command(cfg.Exe, pipelineArgs(cfg, data, filepath.Join(tmp, "state"), addr, tokens, sinkURL)...)
	t.cmd.Stdout = io.Discard
	t.cmd.Stderr = &limitedBuffer{b: t.stderr, max: 64 << 10}
	if err := t.cmd.Start(); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("bench notify: start the service: %w", err)
	}
	go func() { t.exited <- t.cmd.Wait() }()
	// Ready when /healthz answers.
	for {
		select {
		case err := <-t.exited:
			t.exited <- err
			t.close()
			return nil, fmt.Errorf("bench notify: the service exited (%v): %s", err, strings.TrimSpace(t.stderr.String()))
		case <-ctx.Done():
			t.close()
			return nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
		resp, err := t.client.Get(t.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return t, nil
			}
		}
	}
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

func (t *pipelineTarget) send(ctx context.Context, id string, ids []int64) (sendAnswer, error) {
	body, err := json.Marshal(map[string]any{"type": NotifyType, "club_id": 1, "sender": "bench", "timestamp": time.Now(), "to_users": ids})
	if err != nil {
		return sendAnswer{}, err
	}
	var a struct {
		ID string `json:"id"`
	}
	if err := t.do(ctx, http.MethodPost, "/api/notifications", body, map[string]string{"Idempotency-Key": id}, &a); err != nil {
		return sendAnswer{}, err
	}
	return sendAnswer{}, nil
}

// finish reads the request's counts from the service.
func (t *pipelineTarget) finish(ctx context.Context, id string, a *sendAnswer) error {
	var st struct {
		Retries      int64 `json:"retries"`
		Failed       int64 `json:"failed"`
		DeadLettered int64 `json:"dead_lettered"`
	}
	if err := t.do(ctx, http.MethodGet, "/api/notifications/"+id, nil, nil, &st); err != nil {
		return err
	}
	a.retries += st.Retries
	a.failed += st.DeadLettered
	return nil
}

func (t *pipelineTarget) metricsMismatches(context.Context, notifyTotals) (*int64, error) {
	return nil, nil
}

func (t *pipelineTarget) close() {
	select {
	case <-t.exited:
	default:
		_ = t.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-t.exited:
		case <-time.After(10 * time.Second):
			_ = t.cmd.Process.Kill()
			<-t.exited
		}
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
