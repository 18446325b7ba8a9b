package nemesis

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/logbook/logbook/lab/nemesis/kvcas"
	"github.com/logbook/logbook/services/kv/kvtest"
)

// kvToken is the kv nodes' token, of role writer.
const kvToken = "nemesis-kv-writer"

// KVNode is a `logbook kv serve` process on the nemesis's PostgreSQL.
type KVNode struct {
	Name, Addr, URL string
	args, env       []string
	logPath         string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// startKV starts a kv node named name on store.
func startKV(ctx context.Context, binary, dir, name, store string) (*KVNode, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	tokens := filepath.Join(dir, "kv-tokens")
	if err := os.WriteFile(tokens, []byte(kvToken+" writer\n"), 0o600); err != nil {
		return nil, err
	}
	n := &KVNode{Name: name, Addr: "127.0.0.1:" + strconv.Itoa(port), logPath: filepath.Join(dir, name+".log")}
	n.URL = "http://" + n.Addr
	n.args = []string{"kv", "serve", "--addr", n.Addr, "--tokens", tokens}
	// The store's URL in the environment, as the cluster's nodes have it.
	n.env = []string{"LOGBOOK_STORE=" + store}
	if err := n.Restart(binary); err != nil {
		return nil, err
	}
	if err := n.WaitReady(ctx, time.Minute); err != nil {
		n.Kill()
		return nil, err
	}
	return n, nil
}

// Restart starts the node (again).
func (n *KVNode) Restart(binary string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(binary, n.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), n.env...)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("nemesis: start %s: %w", n.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	n.cmd, n.done = cmd, done
	return nil
}

// Kill ends the node with SIGKILL.
func (n *KVNode) Kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// WaitReady waits until the node answers /healthz with 200.
func (n *KVNode) WaitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		n.mu.Lock()
		done := n.done
		n.mu.Unlock()
		select {
		case <-done:
			b, _ := os.ReadFile(n.logPath)
			return fmt.Errorf("nemesis: %s exited; its log:\n%s", n.Name, tail(string(b), 2000))
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", n.URL+"/healthz", nil)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nemesis: %s not ready after %v", n.Name, limit)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// KV is the compare-and-set register workload (lab/nemesis/kvcas) on the
// kv nodes, whose history is checked for linearizability with porcupine.
type KV struct {
	Clients int
	Seed    uint64
	hist    *kvcas.History
}

func (w *KV) Name() string { return "kv" }

func (w *KV) Run(ctx context.Context, env *Env, rec *Recorder) error {
	var urls []string
	for _, n := range env.KV {
		urls = append(urls, n.URL)
	}
	// A key takes 40 operations, then the clients move to a fresh one:
	// porcupine checks each key on its own, and its search grows
	// exponentially with the operations of unknown outcome in one key —
	// which a store down for a few seconds makes by the hundred when
	// every client tries again at once: a client backs off for a second
	// after one. (Without the back-off, 9,000 operations with 777 of
	// unknown outcome took porcupine past two minutes undecided.)
	kw := &kvcas.Workload{URLs: urls, Token: kvToken, Clients: w.Clients, Keys: 4, Timeout: 2 * time.Second,
		Prefix: "nemesis/", OpsPerKey: 40, Pause: 50 * time.Millisecond, Backoff: time.Second, Seed: w.Seed}
	h, err := kw.Run(ctx)
	if err != nil {
		return err
	}
	w.hist = h
	// Into the run's history, for the operation count and the plot. kv
	// writes do not count as the recovery's first write: that is the
	// flights service's.
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, o := range h.Ops {
		out := OK
		switch o.Output.Kind {
		case kvtest.Unknown:
			out = Unknown
		case kvtest.OK:
		default:
			out = Fail
		}
		rec.ops = append(rec.ops, &Op{Workload: "kv", Client: o.Client, Kind: "kv-" + o.Input.Op, Write: o.Input.Op != "get",
			Key: o.Input.Key, Invoke: h.Start.Add(o.Call), Complete: h.Start.Add(o.Return), Outcome: out, Result: o.Output.Kind})
	}
	return nil
}

func (w *KV) Check(ctx context.Context, env *Env, rec *Recorder, sum *Summary) []Violation {
	if w.hist == nil {
		return []Violation{{"linearizable", "the kv workload recorded no history"}}
	}
	viz := filepath.Join(env.Dir, "kv-linearizability.html")
	res, err := kvcas.Check(w.hist, viz)
	ok := res.Linearizable
	sum.Linearizable = &ok
	switch {
	case err != nil:
		return []Violation{{"linearizable", err.Error()}}
	case res.TimedOut:
		return []Violation{{"linearizable", fmt.Sprintf("porcupine gave up after %v on %d operations (%d of unknown outcome)", kvcas.CheckTimeout, res.Operations, res.Indeterminate)}}
	case !ok:
		return []Violation{{"linearizable", fmt.Sprintf("the kv history of %d operations (%d of unknown outcome) is not linearizable; see %s", res.Operations, res.Indeterminate, res.Visualization)}}
	}
	return nil
}
