package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/logbook/logbook/engine/server"
)

// Baseline is an HTTP server that does none of a service's work: it
// answers every command of the write workload as the flights API does —
// the same status, the same four headers, a JSON body of the same shape —
// without decoding the request or running the command. The write workload
// against it shows what Go's net/http server, this load generator and the
// kernel's loopback TCP reach on this machine by themselves, the ceiling
// any HTTP service built on net/http can approach here. It listens on
// 127.0.0.1 only.
type Baseline struct {
	URL      string // http://127.0.0.1:port
	srv      *http.Server
	ln       net.Listener
	done     chan struct{}
	Requests atomic.Int64 // commands answered
}

// maxBaselineBody bounds a request body the baseline reads.
const maxBaselineBody = 1 << 20

// StartBaseline starts a baseline server on a free loopback port.
func StartBaseline() (*Baseline, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("loadtest: baseline server: %w", err)
	}
	b := &Baseline{URL: "http://" + ln.Addr().String(), ln: ln, done: make(chan struct{})}
	// The timeouts of every logbook server: each sets a deadline per
	// request, which is part of net/http's cost.
	t := server.DefaultTimeouts
	b.srv = &http.Server{
		Handler:           b,
		ReadHeaderTimeout: t.Header,
		ReadTimeout:       t.Body,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    64 << 10,
	}
	go func() {
		defer close(b.done)
		_ = b.srv.Serve(ln)
	}()
	return b, nil
}

// ServeHTTP answers a command as the flights API answers it (the write
// workload's four commands: create a rotation, add a leg, create an
// airplane, assign the rotation).
func (b *Baseline) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, maxBaselineBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	v := b.Requests.Add(1)
	ver := strconv.FormatInt(n%1000+1, 10)
	pos := strconv.FormatInt(v, 10)
	body := `{"id":"baseline","version":` + ver + `,"position":` + pos
	h := w.Header()
	status := http.StatusOK
	if r.Method == http.MethodPost {
		// A creation: where the new thing is, and an added leg's id.
		status = http.StatusCreated
		h.Set("Location", r.URL.Path+"/"+pos)
		if strings.HasSuffix(r.URL.Path, "/legs") {
			body += `,"leg":"` + pos + `"`
		}
	}
	h.Set("ETag", strconv.Quote(ver))
	h.Set("X-Logbook-Position", pos)
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body+"}\n")
}

// Close stops the server.
func (b *Baseline) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := b.srv.Shutdown(ctx)
	<-b.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// BaselineResult is the write workload against the baseline server, run
// right after the measured one.
type BaselineResult struct {
	CommandsPerSec float64 `json:"commands_per_sec"`
	P99            float64 `json:"p99_ms"`
	Requests       int     `json:"requests"`
	Failures       int     `json:"failures"`
	// Ratio is the measured run's commands per second over the
	// baseline's.
	Ratio float64 `json:"ratio"`
}

// RunBaseline runs cfg's workload against a Baseline server of its own,
// over conns connections as NewClient makes them, and returns its figures
// with ratio the measured run's commands per second over the baseline's.
// Each planner gets a connection of its own when cfg.Direct.
func RunBaseline(ctx context.Context, cfg WriteConfig, conns int, batchDelay time.Duration, measured float64) (BaselineResult, error) {
	b, err := StartBaseline()
	if err != nil {
		return BaselineResult{}, err
	}
	defer b.Close()
	c := NewClient(b.URL, "baseline", conns, batchDelay)
	defer c.Close()
	cfg.RunID = ""
	res, err := RunWrite(ctx, c, cfg)
	if err != nil {
		return BaselineResult{}, err
	}
	out := BaselineResult{CommandsPerSec: res.CommandsPerSec, P99: res.P99, Requests: res.Requests, Failures: res.Failures}
	if res.CommandsPerSec > 0 {
		out.Ratio = math.Round(measured/res.CommandsPerSec*1000) / 1000
	}
	return out, nil
}
