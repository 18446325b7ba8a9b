package nemesis

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/logbook/logbook/lab/cluster"
	"github.com/logbook/logbook/lab/faultnet"
	"github.com/logbook/logbook/lab/nemesis/kvcas"
	"github.com/logbook/logbook/services/kv/kvtest"
)

// kvToken is the kv nodes' token, of role writer.
const kvToken = "nemesis-kv-writer"

// startKV starts a `logbook kv serve` node named name on store.
func startKV(ctx context.Context, binary, dir, name, store string) (*cluster.Node, error) {
	port, err := faultnet.FreePort(nil)
	if err != nil {
		return nil, err
	}
	tokens := filepath.Join(dir, "kv-tokens")
	if err := os.WriteFile(tokens, []byte(kvToken+" writer\n"), 0o600); err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	// The store's URL in the environment, as the cluster's nodes have it.
	n := cluster.NewProcess(name, addr, []string{"kv", "serve", "--addr", addr, "--tokens", tokens},
		[]string{"LOGBOOK_STORE=" + store}, filepath.Join(dir, name+".log"))
	if err := n.Restart(binary); err != nil {
		return nil, err
	}
	if err := n.WaitReady(ctx, time.Minute); err != nil {
		n.Kill()
		return nil, err
	}
	return n, nil
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
