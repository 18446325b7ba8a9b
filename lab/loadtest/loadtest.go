// Package loadtest drives a running logbook server over HTTP the way the
// load tests of Dębski and Szczepanik's master's thesis "Scalable
// Architecture of Cloud Application Based on CQRS and Event Sourcing" (AGH
// Kraków, 2015) did with Gatling: a read workload that ramps from 1
// request/s to a target rate and holds it, spread evenly over the three
// schedule checks, and a write workload of simulated planners. The read
// workload is an open model: requests leave on schedule whether or not
// earlier ones have been answered, and latency is measured from the
// scheduled time, so a slow server cannot hide its slowness by slowing the
// generator down (coordinated omission).
package loadtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/logbook/logbook/lab/stats"
)

// Client sends authenticated requests to one server. It is built on
// fasthttp's pipelining client, not net/http's: on this two-core machine
// the generator shares the CPU with the server it measures, and per
// request net/http's client spent about as much CPU as the server did,
// most of it in system calls. Pipelining over a few connections, with
// writes batched for up to BatchDelay (time that counts in the measured
// latency), lets one write carry many requests. The server still answers
// each request on its own.
type Client struct {
	pc   *fasthttp.PipelineClient
	auth string
	tls  *tls.Config // of an https server; nil for http
}

// NewClient returns a client for base (http://host:port) with a bearer
// token, pipelining over conns connections and batching writes for up to
// batchDelay.
func NewClient(base, token string, conns int, batchDelay time.Duration) *Client {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	addr, https := "", false
	if err == nil {
		addr, https = u.Host, u.Scheme == "https"
		if u.Port() == "" {
			addr += map[bool]string{true: ":443", false: ":80"}[https]
		}
	}
	return &Client{
		pc: &fasthttp.PipelineClient{
			Addr:               addr,
			IsTLS:              https,
			MaxConns:           max(1, conns),
			MaxPendingRequests: 1 << 16,
			MaxBatchDelay:      batchDelay,
			// fasthttp's PipelineClient (v1.62) stops a connection's
			// worker once it has been idle this long and leaves its queue
			// unread: a request queued there later is never sent, and Do
			// waits forever. With more planners than connections, a
			// connection the busier ones spared sat idle past 90 s in a
			// two-minute run and hung it; no run lasts a day.
			MaxIdleConnDuration: 24 * time.Hour,
			ReadTimeout:         requestTimeout,
			WriteTimeout:        requestTimeout,
		},
		auth: "Bearer " + token,
		tls:  map[bool]*tls.Config{true: {}}[https],
	}
}

// WithTLS makes c verify an https server with cfg (its RootCAs the CA
// that signs the server's certificate; Certificates a client certificate
// for mutual TLS) and returns c. Without it an https server is verified
// against the system's CAs.
func (c *Client) WithTLS(cfg *tls.Config) *Client {
	c.pc.TLSConfig = cfg
	if c.pc.IsTLS {
		c.tls = cfg
		if c.tls == nil {
			c.tls = &tls.Config{}
		}
	}
	return c
}

// Reachable fails, within a few seconds, if nothing listens at base
// (http://host:port). The pipelining client waits for a connection
// without a deadline (requests are bounded by their connection's read and
// write timeouts), so a run against a server that is not there would
// otherwise never end.
func Reachable(ctx context.Context, base string) error {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || u.Host == "" {
		return fmt.Errorf("cannot reach %s: not a URL", base)
	}
	addr := u.Host
	if u.Port() == "" {
		addr += map[bool]string{true: ":443", false: ":80"}[u.Scheme == "https"]
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot reach %s: %w", base, err)
	}
	return conn.Close()
}

// Reachable fails, within a few seconds, if nothing listens at c's
// server or, over https, if the TLS handshake fails (the server's
// certificate is not one c trusts; it asks for a client certificate c
// does not have): the pipelining client would retry such a connection
// without end.
func (c *Client) Reachable(ctx context.Context) error {
	if c.tls == nil {
		return Reachable(ctx, "http://"+c.pc.Addr)
	}
	k, err := c.NewConn()
	if err != nil {
		return err
	}
	defer k.Close()
	if err := k.dial(ctx); err != nil {
		return fmt.Errorf("cannot reach https://%s: %w", c.pc.Addr, err)
	}
	return nil
}

// requestTimeout bounds one request.
const requestTimeout = 30 * time.Second

// Do sends one request and reads the whole answer. It returns the status
// and, for statuses of 400 and up, an error naming it.
func (c *Client) Do(ctx context.Context, method, path, body string) (int, []byte, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	req := fasthttp.AcquireRequest()
	res := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	req.Header.SetHost(c.pc.Addr)
	req.Header.SetRequestURI(path)
	req.Header.SetMethod(method)
	req.Header.Set("Authorization", c.auth)
	if body != "" {
		req.Header.SetContentType("application/json")
		req.SetBodyString(body)
	}
	// Do, not DoTimeout: the connection's read and write timeouts bound
	// the request, and DoTimeout's extra timer costs CPU per request.
	if err := c.pc.Do(req, res); err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	status := res.StatusCode()
	data := append([]byte(nil), res.Body()...)
	if status >= 400 {
		return status, data, fmt.Errorf("%s %s: %d %s", method, path, status, strings.TrimSpace(string(data)))
	}
	return status, data, nil
}

// Close is a no-op kept for symmetry: idle pipelined connections close
// themselves after MaxIdleConnDuration.
func (c *Client) Close() {}

// recorder collects latencies and failures from many goroutines: the
// measured ones for the summary, and every request with its time for the
// timeline.
type recorder struct {
	mu       sync.Mutex
	start    time.Time
	lat      []time.Duration
	failures int
	firstErr error
	timeline []stats.Timed
}

// record notes a request that took d, ending now; measured ones count in
// the summary.
func (r *recorder) record(d time.Duration, err error, measured bool) {
	now := time.Since(r.start)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timeline = append(r.timeline, stats.Timed{At: now, Latency: d, Failed: err != nil})
	if !measured {
		return
	}
	r.lat = append(r.lat, d)
	if err != nil {
		r.failures++
		if r.firstErr == nil {
			r.firstErr = err
		}
	}
}

// Second is one second of a run: requests answered without failure, and
// the latency percentiles of the requests that ended in it.
type Second = stats.Bucket

// seconds summarises every request by the second it ended in.
func (r *recorder) seconds() []Second { return stats.Buckets(r.timeline, time.Second) }
