// Package sink is a loopback delivery endpoint for the notify service:
// it accepts batches of messages over HTTP the way a push or e-mail
// provider would, after a configurable latency and failing a
// configurable share of calls, and counts what it received per
// idempotency key so a run can be checked for exactness (every key once,
// none twice). `logbook notify sink` serves it.
package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/logbook/logbook/engine/problem"
	"github.com/logbook/logbook/services/notify"
)

// Path is where batches are posted.
const Path = "/deliver"

// Options configure a Sink; the zero value answers at once and never
// fails.
type Options struct {
	Latency   time.Duration // added before each call is answered
	ErrorRate float64       // share of calls, 0…1, answered 503 without taking the batch
	Seed      uint64        // of the failure draws, for repeatable runs
	MaxKeys   int           // most distinct keys counted (default 10,000,000); beyond, 507
	MaxBody   int64         // largest request body in bytes (default 64 MiB)
}

// Stats is what a Sink has received.
type Stats struct {
	Calls       int64 `json:"calls"`        // every call answered, failed ones included
	FailedCalls int64 `json:"failed_calls"` // answered 503 by the injected error rate
	Messages    int64 `json:"messages"`     // messages taken, duplicates included
	UniqueKeys  int64 `json:"unique_keys"`  // distinct idempotency keys taken
	Duplicates  int64 `json:"duplicates"`   // messages whose key had been taken before
	// FirstTakenAt and LastNewKeyAt are when the sink acknowledged the
	// first batch it took, and the last batch that brought a key it had
	// not taken before: a benchmark's end of delivery (zero: none yet).
	FirstTakenAt time.Time `json:"first_taken_at"`
	LastNewKeyAt time.Time `json:"last_new_key_at"`
}

// Sink is the endpoint; it is an http.Handler serving Path and /stats.
type Sink struct {
	opt Options
	mux *http.ServeMux

	mu    sync.Mutex
	rng   *rand.Rand
	keys  map[string]int
	stats Stats
	grew  chan struct{} // closed, and replaced, when UniqueKeys grows
}

// New makes a Sink.
func New(opt Options) (*Sink, error) {
	if opt.ErrorRate < 0 || opt.ErrorRate > 1 {
		return nil, fmt.Errorf("sink: error rate %v: want a share between 0 and 1", opt.ErrorRate)
	}
	if opt.Latency < 0 {
		return nil, fmt.Errorf("sink: latency %v: want zero or more", opt.Latency)
	}
	if opt.MaxKeys <= 0 {
		opt.MaxKeys = 10_000_000
	}
	if opt.MaxBody <= 0 {
		opt.MaxBody = 64 << 20
	}
	s := &Sink{opt: opt, mux: http.NewServeMux(), rng: rand.New(rand.NewPCG(opt.Seed, opt.Seed^0x9e3779b97f4a7c15)), keys: map[string]int{}, grew: make(chan struct{})}
	s.mux.HandleFunc("POST "+Path, s.deliver)
	s.mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Stats())
	})
	return s, nil
}

func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Stats returns what the sink has received so far.
func (s *Sink) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// WaitUnique waits until the sink has taken at least n distinct keys, and
// returns its stats then; the error is the context's.
func (s *Sink) WaitUnique(ctx context.Context, n int64) (Stats, error) {
	for {
		s.mu.Lock()
		st, grew := s.stats, s.grew
		s.mu.Unlock()
		if st.UniqueKeys >= n {
			return st, nil
		}
		select {
		case <-grew:
		case <-ctx.Done():
			return st, ctx.Err()
		}
	}
}

// Count returns how many times the message with idempotency key k was
// taken.
func (s *Sink) Count(k string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[k]
}

func (s *Sink) deliver(w http.ResponseWriter, r *http.Request) {
	var b notify.Batch
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.opt.MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		status := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			status = http.StatusRequestEntityTooLarge
		}
		problem.Write(w, problem.New(status, fmt.Sprintf("batch body: %v", err)))
		return
	}
	if n := len(b.Messages); n == 0 || n > notify.MaxBatch {
		problem.Write(w, problem.New(http.StatusBadRequest, fmt.Sprintf("batch of %d messages: want 1 to %d", n, notify.MaxBatch)))
		return
	}
	for i, m := range b.Messages {
		if m.Key == "" {
			problem.Write(w, problem.New(http.StatusBadRequest, fmt.Sprintf("message %d has no idempotency key", i)))
			return
		}
	}
	if s.opt.Latency > 0 {
		select {
		case <-time.After(s.opt.Latency):
		case <-r.Context().Done():
			return
		}
	}
	s.mu.Lock()
	s.stats.Calls++
	if s.opt.ErrorRate > 0 && s.rng.Float64() < s.opt.ErrorRate {
		s.stats.FailedCalls++
		s.mu.Unlock()
		problem.Write(w, problem.New(http.StatusServiceUnavailable, "injected failure: the batch was not taken"))
		return
	}
	fresh := 0
	for _, m := range b.Messages {
		if _, ok := s.keys[m.Key]; !ok {
			fresh++
		}
	}
	if len(s.keys)+fresh > s.opt.MaxKeys {
		s.mu.Unlock()
		problem.Write(w, problem.New(http.StatusInsufficientStorage, fmt.Sprintf("the sink counts at most %d distinct keys", s.opt.MaxKeys)))
		return
	}
	for _, m := range b.Messages {
		s.keys[m.Key]++
		if s.keys[m.Key] > 1 {
			s.stats.Duplicates++
		}
	}
	s.stats.Messages += int64(len(b.Messages))
	s.stats.UniqueKeys = int64(len(s.keys))
	now := time.Now()
	if s.stats.FirstTakenAt.IsZero() {
		s.stats.FirstTakenAt = now
	}
	if fresh > 0 {
		s.stats.LastNewKeyAt = now
		close(s.grew)
		s.grew = make(chan struct{})
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}
