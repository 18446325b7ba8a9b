// Package loadtest drives a running logbook server over HTTP the way seed
// 000 §6 did with Gatling: a read workload that ramps from 1 request/s to a
// target rate and holds it, spread evenly over the three schedule checks,
// and a write workload of simulated planners. The read workload is an open
// model: requests leave on schedule whether or not earlier ones have been
// answered, and latency is measured from the scheduled time, so a slow
// server cannot hide its slowness by slowing the generator down
// (coordinated omission).
package loadtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Client sends authenticated requests to one server.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// NewClient returns a client for base (http://host:port) with a bearer
// token, keeping up to conns connections open.
func NewClient(base, token string, conns int) *Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// Do sends one request and reads the whole answer. It returns the status
// and, for statuses of 400 and up, an error naming it.
func (c *Client) Do(ctx context.Context, method, path, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	data, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return res.StatusCode, nil, err
	}
	if res.StatusCode >= 400 {
		return res.StatusCode, data, fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, strings.TrimSpace(string(data)))
	}
	return res.StatusCode, data, nil
}

// Close drops idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// recorder collects latencies and failures from many goroutines.
type recorder struct {
	mu       sync.Mutex
	lat      []time.Duration
	failures int
	firstErr error
}

func (r *recorder) record(d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lat = append(r.lat, d)
	if err != nil {
		r.failures++
		if r.firstErr == nil {
			r.firstErr = err
		}
	}
}

// Percentiles are latency percentiles in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50_ms"`
	P75 float64 `json:"p75_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

func percentiles(lat []time.Duration) Percentiles {
	if len(lat) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	at := func(p float64) float64 {
		i := int(float64(len(s))*p/100+0.5) - 1
		return ms(s[max(0, min(i, len(s)-1))])
	}
	return Percentiles{P50: at(50), P75: at(75), P95: at(95), P99: at(99), Max: ms(s[len(s)-1])}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func round(v float64, digits int) float64 {
	p := 1.0
	for range digits {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}
