package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/lab/stats"
)

// BareServer is an HTTP server that does none of a service's work: it
// answers every command of the write workload as the flights API does —
// the same status, the same header names, a JSON body with the same
// top-level fields — without decoding the request or running the
// command. It is the HTTP server every logbook server runs
// (server.NewHTTPServer), in the generator's process. The write workload
// against it shows what Go's net/http server, this load generator and
// the kernel's loopback TCP reach on this machine by themselves: the
// ceiling of any service built on net/http here. It listens on 127.0.0.1
// only.
type BareServer struct {
	URL      string // http://127.0.0.1:port
	srv      *http.Server
	done     chan struct{}
	Requests atomic.Int64 // commands answered
}

// maxBareBody bounds a request body the bare server reads.
const maxBareBody = 1 << 20

// StartBareServer starts a bare server on a free loopback port.
func StartBareServer() (*BareServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("loadtest: bare server: %w", err)
	}
	b := &BareServer{URL: "http://" + ln.Addr().String(), done: make(chan struct{})}
	b.srv = server.NewHTTPServer(b, slog.New(slog.DiscardHandler), server.DefaultTimeouts)
	go func() {
		defer close(b.done)
		_ = b.srv.Serve(ln)
	}()
	return b, nil
}

// ServeHTTP answers a command as the flights API answers it (the write
// workload's four commands: create a rotation, add a leg, create an
// airplane, assign the rotation).
func (b *BareServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, maxBareBody)); err != nil {
		status := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			status = http.StatusRequestEntityTooLarge
		}
		http.Error(w, err.Error(), status)
		return
	}
	// The command's number stands in for the aggregate's version and
	// the log position the API would give.
	n := strconv.FormatInt(b.Requests.Add(1), 10)
	body := `{"id":"bare","version":` + n + `,"position":` + n
	h := w.Header()
	status := http.StatusOK
	if r.Method == http.MethodPost {
		// A creation: where the new thing is, and an added leg's id.
		status = http.StatusCreated
		h.Set("Location", r.URL.Path+"/"+n)
		if strings.HasSuffix(r.URL.Path, "/legs") {
			body += `,"leg":"` + n + `"`
		}
	}
	h.Set("ETag", strconv.Quote(n))
	h.Set("X-Logbook-Position", n)
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body+"}\n")
}

// Close stops the server.
func (b *BareServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := b.srv.Shutdown(ctx)
	<-b.done
	return err
}

// CeilingResult is the write workload against a BareServer.
type CeilingResult struct {
	CommandsPerSec float64 `json:"commands_per_sec"`
	P99            float64 `json:"p99_ms"`
	Requests       int     `json:"requests"`
	Failures       int     `json:"failures"`
	// Ratio is the measured run's commands per second over the bare
	// server's.
	Ratio float64 `json:"ratio"`
}

// RunCeiling runs cfg's workload against a BareServer of its own, over
// conns connections as NewClient makes them (each planner with a
// connection of its own when cfg.Direct).
func RunCeiling(ctx context.Context, cfg WriteConfig, conns int, batchDelay time.Duration) (CeilingResult, error) {
	b, err := StartBareServer()
	if err != nil {
		return CeilingResult{}, err
	}
	defer b.Close()
	c := NewClient(b.URL, "bare", conns, batchDelay)
	defer c.Close()
	cfg.RunID = ""
	res, err := RunWrite(ctx, c, cfg)
	if err != nil {
		return CeilingResult{}, err
	}
	return CeilingResult{CommandsPerSec: res.CommandsPerSec, P99: res.P99, Requests: res.Requests, Failures: res.Failures}, nil
}

// WithCeiling adds the bare server's figures to r and the ratio of r's
// commands per second to its.
func (r WriteResult) WithCeiling(c CeilingResult) WriteResult {
	if c.CommandsPerSec > 0 {
		c.Ratio = stats.Round(r.CommandsPerSec/c.CommandsPerSec, 3)
	}
	r.Ceiling = &c
	return r
}
