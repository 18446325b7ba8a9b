package loadtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/logbook/logbook/internal/progress"
	"github.com/logbook/logbook/lab/stats"
)

// ReadConfig is the read workload, the thesis's read-model test (see the
// package documentation): ramp up to a target rate, then hold it; only the
// hold is measured.
type ReadConfig struct {
	Rate        float64       // target requests per second
	Ramp        time.Duration // from 1 request/s to Rate
	Hold        time.Duration // at Rate; only this phase is measured
	MaxInFlight int           // requests outstanding at most (default 20,000)
	Paths       []string      // requested round-robin (default: the three checks)
	// Conns, if positive, sends each request on a connection of its
	// own, one request at a time, as separate users' clients would:
	// Conns connections are dialled before the run, and a request that
	// finds none idle opens another (kept for later requests), so a
	// slow answer holds up no other request. 0 pipelines requests over
	// the client's connections instead, which costs the generator less
	// CPU but queues each connection's requests behind one another at a
	// proxy such as nginx, which answers a connection's pipelined
	// requests in turn: one slow answer then holds up the requests
	// behind it, whatever server they were for.
	Conns    int
	Progress *progress.Counter // counts requests answered, if not nil
}

// ReadResult has the columns of the thesis's read-model results tables:
// request rate, latency percentiles, failures.
type ReadResult struct {
	TargetRate   float64 `json:"target_rate"`
	AchievedRate float64 `json:"achieved_rate"`
	stats.Summary
	Requests int `json:"requests"`
	Failures int `json:"failures"`
	Dropped  int `json:"dropped"` // not sent: MaxInFlight reached
	// Conns is how many connections a run with ReadConfig.Conns opened:
	// the ones dialled up front and those opened when none was idle.
	Conns        int     `json:"conns,omitempty"`
	HoldSeconds  float64 `json:"hold_seconds"`
	RampSeconds  float64 `json:"ramp_seconds"`
	FirstFailure string  `json:"first_failure,omitempty"`
	// Timeline is every second of the run, ramp included, for charts.
	Timeline []Second `json:"-"`
}

// Rows renders the result as a table.
func (r ReadResult) Rows() [][2]string {
	return [][2]string{
		{"target rate req/s", fmt.Sprintf("%.0f", r.TargetRate)},
		{"achieved rate req/s (hold)", fmt.Sprintf("%.0f", r.AchievedRate)},
		{"p75 / p95 / p99 / max ms", fmt.Sprintf("%.2f / %.2f / %.2f / %.2f", r.P75, r.P95, r.P99, r.Max)},
		{"requests (hold)", fmt.Sprint(r.Requests)},
		{"failures", fmt.Sprint(r.Failures)},
		{"dropped (in-flight limit)", fmt.Sprint(r.Dropped)},
	}
}

// CheckPaths are the three schedule validations, requested evenly.
var CheckPaths = []string{"/api/checks/continuity", "/api/checks/min_ground_time", "/api/checks/duplicate_designator"}

// RunRead ramps, holds and reports the hold phase.
func RunRead(ctx context.Context, c *Client, cfg ReadConfig) (ReadResult, error) {
	if cfg.Rate < 1 || cfg.Hold <= 0 || cfg.Ramp < 0 {
		return ReadResult{}, errors.New("loadtest read: rate ≥ 1, hold > 0 and ramp ≥ 0 required")
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 20_000
	}
	if len(cfg.Paths) == 0 {
		cfg.Paths = CheckPaths
	}
	// sent(t) is how many requests should have left by t: the integral
	// of a rate going linearly from 1 to Rate over the ramp, then flat.
	ramp, hold := cfg.Ramp.Seconds(), cfg.Hold.Seconds()
	sent := func(t float64) float64 {
		if t <= ramp && ramp > 0 {
			return t + (cfg.Rate-1)*t*t/(2*ramp)
		}
		return ramp + (cfg.Rate-1)*ramp/2 + cfg.Rate*(t-ramp)
	}
	total := int(sent(ramp + hold))
	cfg.Progress.Start("requests", total)
	holdStart := int(math.Ceil(sent(ramp)))
	// at(i) is when request i is due: sent's inverse.
	at := func(i int) time.Duration {
		n := float64(i)
		var t float64
		if n <= sent(ramp) {
			if cfg.Rate == 1 || ramp == 0 {
				t = n
			} else {
				a := (cfg.Rate - 1) / (2 * ramp)
				t = (-1 + math.Sqrt(1+4*a*n)) / (2 * a)
			}
		} else {
			t = ramp + (n-sent(ramp))/cfg.Rate
		}
		return time.Duration(t * float64(time.Second))
	}

	var pool *connPool
	if cfg.Conns > 0 {
		var err error
		if pool, err = dialPool(ctx, c, cfg.Conns); err != nil {
			return ReadResult{}, err
		}
		defer pool.close()
	}
	rec := &recorder{lat: make([]time.Duration, 0, total-holdStart+1), timeline: make([]stats.Timed, 0, total)}
	slots := make(chan struct{}, cfg.MaxInFlight)
	var wg sync.WaitGroup
	dropped := 0
	start := time.Now()
	rec.start = start
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := 0; i < total; i++ {
		due := start.Add(at(i))
		// Sleeping for less than about 50 µs costs more than it is
		// worth: such requests leave a few microseconds early instead.
		if d := time.Until(due); d > 50*time.Microsecond {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				wg.Wait()
				return ReadResult{}, ctx.Err()
			}
		}
		measured := i >= holdStart
		select {
		case slots <- struct{}{}:
		default:
			if measured {
				dropped++
			}
			rec.record(time.Since(due), errors.New("in-flight limit reached"), measured)
			cfg.Progress.Add(1)
			continue
		}
		path := cfg.Paths[i%len(cfg.Paths)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if pool != nil {
				k := pool.get()
				_, _, err = k.Do(ctx, "GET", path, "")
				pool.put(k)
			} else {
				_, _, err = c.Do(ctx, "GET", path, "")
			}
			<-slots
			// From the time it was due, not the time it left.
			rec.record(time.Since(due), err, measured)
			cfg.Progress.Add(1)
		}()
	}
	wg.Wait()
	end := time.Since(start).Seconds()
	r := ReadResult{
		TargetRate:   cfg.Rate,
		Summary:      stats.Summarize(rec.lat),
		Timeline:     rec.seconds(),
		Requests:     len(rec.lat),
		Failures:     rec.failures,
		Dropped:      dropped,
		HoldSeconds:  stats.Round(hold, 3),
		RampSeconds:  stats.Round(ramp, 3),
		AchievedRate: stats.Round(float64(len(rec.lat)-rec.failures)/max(hold, end-ramp), 1),
	}
	if rec.firstErr != nil {
		r.FirstFailure = rec.firstErr.Error()
	}
	if pool != nil {
		r.Conns = pool.opened()
	}
	return r, nil
}

// connPool holds the idle connections of a run that sends each request
// on a connection of its own; it opens another when none is idle, and
// remembers every connection it opened to close them at the end.
type connPool struct {
	c    *Client
	mu   sync.Mutex
	idle []*Conn
	all  []*Conn
}

// dialPool dials n connections to c's server up front, so that the
// first requests do not pay for the dial.
func dialPool(ctx context.Context, c *Client, n int) (*connPool, error) {
	p := &connPool{c: c}
	for range n {
		k, err := c.NewConn()
		if err == nil {
			err = k.dial(ctx)
		}
		if err != nil {
			p.close()
			return nil, err
		}
		p.idle = append(p.idle, k)
		p.all = append(p.all, k)
	}
	return p, nil
}

// get returns an idle connection, or a new one (dialled on its first
// request) when none is idle.
func (p *connPool) get() *Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.idle); n > 0 {
		k := p.idle[n-1]
		p.idle = p.idle[:n-1]
		return k
	}
	k, _ := p.c.NewConn() // fails only on a bad address, which dialPool has already tried
	p.all = append(p.all, k)
	return k
}

func (p *connPool) put(k *Conn) {
	p.mu.Lock()
	p.idle = append(p.idle, k)
	p.mu.Unlock()
}

// opened is how many connections the pool has opened.
func (p *connPool) opened() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.all)
}

func (p *connPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range p.all {
		k.Close()
	}
}
