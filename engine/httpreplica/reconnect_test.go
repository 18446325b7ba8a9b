package httpreplica_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/engine/httpreplica"
	"github.com/logbook/logbook/engine/projection"
)

type countView struct{ last atomic.Uint64 }

func (v *countView) Checkpoint(context.Context) (uint64, error) { return v.last.Load(), nil }
func (v *countView) Apply(_ context.Context, b []eventstore.Event) error {
	v.last.Store(b[len(b)-1].Position)
	return nil
}

// The primary restarts (its live query ends cleanly, as on Shutdown) and
// comes back with more events: a replica-backed runner should follow it.
func TestRunnerSurvivesPrimaryRestart(t *testing.T) {
	var head atomic.Uint64
	head.Store(3)
	var conns atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.Write([]byte(`{"status":"ok","head":` + strconv.FormatUint(head.Load(), 10) + "}\n"))
			return
		}
		n := conns.Add(1)
		from := uint64(1)
		if f := r.URL.Query().Get("from"); f != "" {
			from, _ = strconv.ParseUint(f, 10, 64)
		}
		// A live stream: what is there, then new events as they come.
		for {
			var b strings.Builder
			for ; from <= head.Load(); from++ {
				b.WriteString(line(from))
			}
			w.Write([]byte(b.String()))
			w.(http.Flusher).Flush()
			if n == 1 {
				return // first connection: the primary shuts down
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}))
	defer srv.Close()
	s := httpreplica.New(srv.URL, "x")
	v := &countView{}
	run := projection.NewRunner(s, v, projection.Options{Name: "v"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go run.Run(ctx)
	time.Sleep(200 * time.Millisecond)
	head.Store(5) // primary back, with two more events
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	defer wcancel()
	if err := run.WaitFor(wctx, 5); err != nil {
		t.Fatalf("replica view stuck at %d: %v (runner err: %v)", v.last.Load(), err, run.Err())
	}
}
