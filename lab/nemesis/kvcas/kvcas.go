// Package kvcas is the compare-and-set register workload of the cluster's
// fault tests: clients add, read, update and delete a few keys through the
// kv HTTP API of one or several nodes (`logbook kv serve`), every operation
// recorded with its invocation time, its return time and its answer — or as
// of unknown outcome when it timed out or its connection broke — and the
// history checked for linearizability with porcupine, against the model in
// services/kv/kvtest.
//
// Updates and deletes compare and set: they carry the version the client
// last saw (If-Match), so a write that a partition, a restart or a stale
// cache lets through twice, or a read that misses a write acknowledged
// before it began, shows as a history no sequential order explains.
package kvcas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/logbook/logbook/services/kv/kvtest"
)

// Workload configures the clients. URLs and Token are required; the rest
// have defaults.
type Workload struct {
	// URLs are the nodes' base URLs (http://host:port, or nginx's); each
	// operation goes to one of them at random.
	URLs []string
	// Token is a token with the kv API's writer role.
	Token string
	// Keys is how many keys are in play at once (default 4).
	Keys int
	// Clients is the number of concurrent clients (default 8).
	Clients int
	// Timeout bounds each operation; one that takes longer is of unknown
	// outcome (default 2 s).
	Timeout time.Duration
	// HTTP is the client to use (default: one with a pool per client).
	HTTP *http.Client
	// Prefix is put before every key (default "kvcas/" and the start time,
	// so that runs on one store do not meet).
	Prefix string
	// OpsPerKey is how many operations a key takes before the workload moves
	// to a fresh one, which bounds the checker's work: a key's history is
	// checked on its own, and its cost grows with the operations of unknown
	// outcome in it (default 200).
	OpsPerKey int
	// OpsPerClient stops each client after this many operations (0: until
	// the context of Run ends).
	OpsPerClient int
	// Pause is each client's wait between two operations (default none).
	Pause time.Duration
	// Backoff is a client's wait after an operation of unknown outcome
	// (default none), as a real client backs off from a failing server.
	// Without it, a store that is down for a few seconds fails every
	// operation at once, and the history fills with writes of unknown
	// outcome, each of which multiplies the checker's search.
	Backoff time.Duration
	// Seed seeds the clients' choices (0: a random seed).
	Seed uint64
}

// Op is one recorded operation.
type Op struct {
	Client int           // the process that made it: a client gets a new one after an operation of unknown outcome
	Node   int           // index into Workload.URLs
	Input  kvtest.Input  // what was asked
	Output kvtest.Output // the answer; Kind kvtest.Unknown when it timed out or failed
	Call   time.Duration // invocation, since History.Start
	Return time.Duration // return, since History.Start (for an unknown outcome: when the client gave up)
	Err    string        // for an unknown outcome, why
}

// Indeterminate reports whether the operation's outcome is unknown.
func (o Op) Indeterminate() bool { return o.Output.Kind == kvtest.Unknown }

// History is what Run recorded.
type History struct {
	Start time.Time
	Ops   []Op
	// Refused counts answers that show the workload itself was wrong (400,
	// 401, 403, 428 …) by status; such operations took no effect and are
	// left out of Ops.
	Refused map[int]int
}

// Counts returns the number of operations by "op/outcome" (as
// "update/stale").
func (h *History) Counts() map[string]int {
	m := map[string]int{}
	for _, o := range h.Ops {
		m[o.Input.Op+"/"+o.Output.Kind]++
	}
	return m
}

// Acknowledged returns the writes (add, update, delete) that succeeded.
func (h *History) Acknowledged() int {
	n := 0
	for _, o := range h.Ops {
		if o.Input.Op != "get" && o.Output.Kind == kvtest.OK {
			n++
		}
	}
	return n
}

// Operations returns the history as porcupine operations. A read of unknown
// outcome is left out (it changed nothing); a write of unknown outcome
// returns after every other operation, since it may take effect at any time
// after its call.
func (h *History) Operations() []porcupine.Operation {
	var end int64
	for _, o := range h.Ops {
		end = max(end, int64(o.Return))
	}
	ops := make([]porcupine.Operation, 0, len(h.Ops))
	for _, o := range h.Ops {
		ret := int64(o.Return)
		if o.Indeterminate() {
			if o.Input.Op == "get" {
				continue
			}
			ret = end + 1
		}
		ops = append(ops, porcupine.Operation{ClientId: o.Client, Input: o.Input, Output: o.Output, Call: int64(o.Call), Return: ret})
	}
	return ops
}

// Result is a check's verdict.
type Result struct {
	Operations    int    `json:"operations"`              // operations recorded
	Indeterminate int    `json:"indeterminate"`           // of them, of unknown outcome
	Linearizable  bool   `json:"linearizable"`            // porcupine found an order that explains every answer
	TimedOut      bool   `json:"timed_out"`               // the check ran out of time before deciding (Linearizable is then false)
	Visualization string `json:"visualization,omitempty"` // the HTML file written when not linearizable
}

// CheckTimeout bounds Check's search.
var CheckTimeout = 2 * time.Minute

// Check checks h for linearizability. When it is not, and vizPath is not
// empty, porcupine's visualization of the failing keys is written there as
// HTML.
func Check(h *History, vizPath string) (Result, error) {
	r := Result{Operations: len(h.Ops)}
	for _, o := range h.Ops {
		if o.Indeterminate() {
			r.Indeterminate++
		}
	}
	res, info := porcupine.CheckOperationsVerbose(kvtest.Model, h.Operations(), CheckTimeout)
	switch res {
	case porcupine.Ok:
		r.Linearizable = true
		return r, nil
	case porcupine.Unknown:
		r.TimedOut = true
		return r, nil
	}
	if vizPath != "" {
		if err := porcupine.VisualizePath(kvtest.Model, info, vizPath); err != nil {
			return r, fmt.Errorf("kvcas: writing the visualization: %w", err)
		}
		r.Visualization = vizPath
	}
	return r, nil
}

func (w *Workload) defaults() (Workload, error) {
	c := *w
	c.URLs = append([]string(nil), w.URLs...)
	if c.Token == "" {
		return c, errors.New("kvcas: no token (the kv API's writer role)")
	}
	if len(c.URLs) == 0 {
		return c, errors.New("kvcas: no node URLs")
	}
	for i, u := range c.URLs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return c, fmt.Errorf("kvcas: node URL %q: want http://host:port", u)
		}
		c.URLs[i] = strings.TrimRight(u, "/")
	}
	if c.Keys <= 0 {
		c.Keys = 4
	}
	if c.Clients <= 0 {
		c.Clients = 8
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Second
	}
	if c.OpsPerKey <= 0 {
		c.OpsPerKey = 200
	}
	if c.Prefix == "" {
		c.Prefix = "kvcas/" + strconv.FormatInt(time.Now().UnixNano(), 36) + "/"
	}
	if c.HTTP == nil {
		c.HTTP = &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: c.Clients,
			IdleConnTimeout:     30 * time.Second,
		}}
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	return c, nil
}

// Run runs the clients until ctx ends (or each has made OpsPerClient
// operations) and returns the history. Operations in flight when ctx ends
// finish within Timeout. The error is a configuration error, before any
// operation.
func (w *Workload) Run(ctx context.Context) (*History, error) {
	c, err := w.defaults()
	if err != nil {
		return nil, err
	}
	h := &History{Start: time.Now(), Refused: map[int]int{}}
	r := &run{w: c, h: h, uses: make([]atomic.Int64, c.Keys)}
	r.procs.Store(int64(c.Clients))
	var wg sync.WaitGroup
	for id := range c.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.client(ctx, id)
		}()
	}
	wg.Wait()
	if w.HTTP == nil {
		c.HTTP.CloseIdleConnections() // the client is this run's own
	}
	return h, nil
}

type run struct {
	w     Workload
	h     *History
	mu    sync.Mutex
	uses  []atomic.Int64 // operations started per key slot
	procs atomic.Int64   // the next process id
}

func (r *run) record(o Op, status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if status != 0 {
		r.h.Refused[status]++
		return
	}
	r.h.Ops = append(r.h.Ops, o)
}

func (r *run) client(ctx context.Context, id int) {
	rng := rand.New(rand.NewPCG(r.w.Seed, uint64(id)))
	proc := id
	seen := map[string]uint64{}
	for n := 0; r.w.OpsPerClient == 0 || n < r.w.OpsPerClient; n++ {
		if ctx.Err() != nil {
			return
		}
		slot := rng.IntN(r.w.Keys)
		gen := r.uses[slot].Add(1) / int64(r.w.OpsPerKey)
		key := fmt.Sprintf("%sk%d-%d", r.w.Prefix, slot, gen)
		in := kvtest.Input{Key: key, Value: fmt.Sprintf("c%d-%d", id, n)}
		switch x := rng.IntN(10); {
		case x < 3:
			in.Op = "get"
		case x < 7:
			in.Op = "update"
		case x < 8:
			in.Op = "delete"
		default:
			in.Op = "add"
		}
		if in.Op == "update" || in.Op == "delete" {
			in.Version = max(seen[key], 1)
		}
		node := rng.IntN(len(r.w.URLs))
		o := Op{Client: proc, Node: node, Input: in, Call: time.Since(r.h.Start)}
		out, status, err := r.do(ctx, node, in)
		o.Return = time.Since(r.h.Start)
		o.Output = out
		if err != nil {
			o.Output = kvtest.Output{Kind: kvtest.Unknown}
			o.Err = err.Error()
		}
		switch {
		case out.Kind == kvtest.OK && in.Op != "delete" && in.Op != "add", out.Kind == kvtest.Stale:
			seen[key] = out.Version
		case out.Kind == kvtest.OK && in.Op == "add":
			seen[key] = 1
		}
		r.record(o, status)
		if o.Indeterminate() {
			// The old process may still act: the next operations are
			// another's.
			proc = int(r.procs.Add(1)) - 1
			if r.w.Backoff > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(r.w.Backoff):
				}
			}
		}
		if r.w.Pause > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(r.w.Pause):
			}
		}
	}
}

// maxAnswer bounds the body of an answer the workload reads.
const maxAnswer = 1 << 20

// do makes one operation. A non-nil error means its outcome is unknown; a
// non-zero status an answer that shows the request was wrong.
func (r *run) do(ctx context.Context, node int, in kvtest.Input) (kvtest.Output, int, error) {
	// An operation in flight when the run ends gets its full Timeout: cut
	// short, it would add an unknown outcome for nothing.
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.w.Timeout)
	defer cancel()
	u := r.w.URLs[node] + "/api/kv/" + escapeKey(in.Key)
	var req *http.Request
	var err error
	switch in.Op {
	case "get":
		req, err = http.NewRequestWithContext(octx, http.MethodGet, u, nil)
	case "add", "update":
		req, err = http.NewRequestWithContext(octx, http.MethodPut, u, strings.NewReader(in.Value))
	case "delete":
		req, err = http.NewRequestWithContext(octx, http.MethodDelete, u, nil)
	}
	if err != nil {
		return kvtest.Output{}, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+r.w.Token)
	switch in.Op {
	case "add":
		req.Header.Set("If-None-Match", "*")
	case "update", "delete":
		req.Header.Set("If-Match", `"`+strconv.FormatUint(in.Version, 10)+`"`)
	}
	resp, err := r.w.HTTP.Do(req)
	if err != nil {
		return kvtest.Output{}, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return kvtest.Output{}, 0, fmt.Errorf("reading the answer: %w", err)
	}
	return interpret(in, resp, body)
}

// interpret maps an HTTP answer to the model's output.
func interpret(in kvtest.Input, resp *http.Response, body []byte) (kvtest.Output, int, error) {
	st := resp.StatusCode
	switch {
	case st >= 500:
		return kvtest.Output{}, 0, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	case in.Op == "get" && st == http.StatusOK:
		v, err := version(resp)
		if err != nil {
			return kvtest.Output{}, 0, err
		}
		return kvtest.Output{Kind: kvtest.OK, Version: v, Value: string(body)}, 0, nil
	case in.Op == "get" && st == http.StatusNotFound:
		return kvtest.Output{Kind: kvtest.Absent}, 0, nil
	case in.Op == "add" && st == http.StatusCreated:
		return kvtest.Output{Kind: kvtest.OK}, 0, nil
	case in.Op == "add" && st == http.StatusPreconditionFailed:
		return kvtest.Output{Kind: kvtest.Exists}, 0, nil
	case in.Op == "update" && st == http.StatusNoContent:
		v, err := version(resp)
		if err != nil {
			return kvtest.Output{}, 0, err
		}
		return kvtest.Output{Kind: kvtest.OK, Version: v}, 0, nil
	case in.Op == "delete" && st == http.StatusNoContent:
		return kvtest.Output{Kind: kvtest.OK}, 0, nil
	case (in.Op == "update" || in.Op == "delete") && st == http.StatusNotFound:
		return kvtest.Output{Kind: kvtest.NotFound}, 0, nil
	case (in.Op == "update" || in.Op == "delete") && st == http.StatusPreconditionFailed:
		var p struct {
			Current *uint64 `json:"current_version"`
		}
		if err := json.Unmarshal(body, &p); err != nil || p.Current == nil {
			return kvtest.Output{}, 0, fmt.Errorf("412 without current_version: %s", strings.TrimSpace(string(body)))
		}
		return kvtest.Output{Kind: kvtest.Stale, Version: *p.Current}, 0, nil
	}
	return kvtest.Output{}, st, nil
}

func version(resp *http.Response) (uint64, error) {
	e := resp.Header.Get("ETag")
	v, err := strconv.ParseUint(strings.Trim(e, `"`), 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("answer without a version (ETag %q)", e)
	}
	return v, nil
}

// escapeKey escapes each segment of a key for the URL path.
func escapeKey(k string) string {
	parts := strings.Split(k, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}
