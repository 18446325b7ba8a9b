// Package deliver sends the notify service's messages to a channel's
// endpoint over HTTP: one call per batch of at most notify.MaxBatch
// messages of one channel, at most a given number of calls per second per
// channel, retried with jittered exponential backoff while the failure
// may pass (transport errors, 429, 5xx). Redirects are not followed: a
// 3xx fails the batch for good, as any other 4xx. A batch that fails for good is
// returned as a *FailedError for the caller's dead-letter store. Every
// message carries its idempotency key, so the endpoint drops a retried
// batch it already took.
package deliver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	neturl "net/url"
	"sync"
	"time"

	"github.com/logbook/logbook/services/notify"
)

// Config configures a Deliverer; Endpoints are required.
type Config struct {
	Endpoints   map[notify.Channel]string  // the URL batches of each channel are posted to
	Rate        map[notify.Channel]float64 // most calls per second per channel; absent or 0: no limit
	Attempts    int                        // calls per batch before it fails for good (default 6)
	BaseBackoff time.Duration              // the first retry waits up to this (default 10ms), doubling each time
	MaxBackoff  time.Duration              // the longest wait between attempts (default 2s)
	Client      *http.Client               // default: a client with a 30s timeout
}

// Deliverer posts batches; it is safe for concurrent use.
type Deliverer struct {
	cfg      Config
	limiters map[notify.Channel]*limiter
}

// New makes a Deliverer.
func New(cfg Config) (*Deliverer, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("deliver: no endpoints")
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 6
	}
	if cfg.BaseBackoff <= 0 {
		cfg.BaseBackoff = 10 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 2 * time.Second
	}
	for c, u := range cfg.Endpoints {
		if err := CheckURL(u); err != nil {
			return nil, fmt.Errorf("deliver: the %s endpoint: %w", c, err)
		}
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 30 * time.Second}
	}
	// Redirects are not followed: Go would re-send a POST answered 301,
	// 302 or 303 as a GET without its body, and that GET's 2xx would
	// count the batch delivered. A 3xx fails the batch (post). The
	// caller's client is copied, not changed.
	client := *cfg.Client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cfg.Client = &client
	d := &Deliverer{cfg: cfg, limiters: map[notify.Channel]*limiter{}}
	for c, r := range cfg.Rate {
		if r < 0 {
			return nil, fmt.Errorf("deliver: rate %v for %s: want zero or more", r, c)
		}
		if r > 0 {
			d.limiters[c] = &limiter{interval: time.Duration(float64(time.Second) / r)}
		}
	}
	return d, nil
}

// FailedError is a batch that failed for good: the dead letter.
type FailedError struct {
	Channel  notify.Channel
	Attempts int
	Reason   string
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("deliver: %s batch failed after %d attempts: %s", e.Channel, e.Attempts, e.Reason)
}

// Deliver posts one batch, all of one channel, retrying as the options
// say. It returns how many retries it took; the error is a *FailedError
// when the batch failed for good, or the context's error.
func (d *Deliverer) Deliver(ctx context.Context, batch []notify.Message) (retries int, err error) {
	if len(batch) == 0 || len(batch) > notify.MaxBatch {
		return 0, fmt.Errorf("deliver: batch of %d messages: want 1 to %d", len(batch), notify.MaxBatch)
	}
	c := batch[0].Channel
	for _, m := range batch[1:] {
		if m.Channel != c {
			return 0, fmt.Errorf("deliver: batch mixes channels %s and %s", c, m.Channel)
		}
	}
	url, ok := d.cfg.Endpoints[c]
	if !ok {
		return 0, fmt.Errorf("deliver: no endpoint for channel %s", c)
	}
	body, err := json.Marshal(notify.Batch{Messages: batch})
	if err != nil {
		return 0, err
	}
	for attempt := 1; ; attempt++ {
		if l := d.limiters[c]; l != nil {
			if err := l.wait(ctx); err != nil {
				return attempt - 1, err
			}
		}
		reason, temporary := d.post(ctx, url, body)
		if reason == "" {
			return attempt - 1, nil
		}
		if err := ctx.Err(); err != nil {
			return attempt - 1, err
		}
		if !temporary || attempt == d.cfg.Attempts {
			return attempt - 1, &FailedError{Channel: c, Attempts: attempt, Reason: reason}
		}
		// Full jitter: a uniform wait up to the exponential bound, so
		// retries of many batches failing together spread out.
		bound := min(d.cfg.BaseBackoff<<(attempt-1), d.cfg.MaxBackoff)
		select {
		case <-time.After(rand.N(bound) + 1):
		case <-ctx.Done():
			return attempt - 1, ctx.Err()
		}
	}
}

// post makes one call; reason is empty on success, temporary says
// whether a retry may succeed.
func (d *Deliverer) post(ctx context.Context, url string, body []byte) (reason string, temporary bool) {
	// Reasons become dead letters, which any viewer reads: they name the
	// endpoint without its user info or query.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "POST " + RedactURL(url) + ": the request cannot be made", false
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*neturl.Error](err); ok {
			ue.URL = RedactURL(url)
			return ue.Error(), true
		}
		return err.Error(), true
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	switch {
	case resp.StatusCode/100 == 2:
		return "", false
	case resp.StatusCode/100 == 3:
		to := "no Location"
		if loc := resp.Header.Get("Location"); loc != "" {
			to = "to " + RedactURL(loc)
		}
		return fmt.Sprintf("%s: the endpoint %s redirects (%s); delivery does not follow redirects: configure the URL it redirects to",
			resp.Status, RedactURL(url), to), false
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Sprintf("%s: %s", resp.Status, msg), true
	default:
		return fmt.Sprintf("%s: %s", resp.Status, msg), false
	}
}

// limiter spaces calls at least interval apart.
type limiter struct {
	interval time.Duration
	mu       sync.Mutex
	next     time.Time
}

func (l *limiter) wait(ctx context.Context) error {
	l.mu.Lock()
	now := time.Now()
	at := now
	if l.next.After(now) {
		at = l.next
	}
	l.next = at.Add(l.interval)
	l.mu.Unlock()
	if d := at.Sub(now); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
