package pgstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/logbook/logbook/engine/eventstore"
	"github.com/logbook/logbook/internal/testenv"
)

func TestNoticeRoundTrip(t *testing.T) {
	streams := []string{"a b", "ü\n\"x\""}
	tags := map[string]struct{}{"t 1": {}}
	payload := fmt.Sprintf("%d %s %d%s", 120, "me", 100, noticeLists(streams, tags))
	n, ok := parseNotice(payload)
	if !ok || !n.lists || n.head != 120 || n.from != 100 || n.sender != "me" ||
		len(n.streams) != 2 || n.streams[1] != streams[1] || len(n.tags) != 1 {
		t.Fatalf("parseNotice(%q) = %+v, %v", payload, n, ok)
	}
	if _, ok := parseNotice("120 me"); ok {
		t.Fatal("a payload without its from parsed")
	}
	if n, ok := parseNotice("120 me 100"); !ok || n.lists {
		t.Fatalf("a payload without lists: %+v, %v", n, ok)
	}
	long := make([]string, 2000)
	for i := range long {
		long[i] = fmt.Sprintf("stream-%d", i)
	}
	if noticeLists(long, nil) != "" {
		t.Fatal("lists beyond PostgreSQL's payload limit were sent")
	}
}

// TestFollowersAreToldNotAsking: a process learns what another wrote, and
// what its own two appenders wrote out of order, from the NOTIFY payloads
// and from each other, reading a stretch of the log only now and then —
// not once per commit — and still wakes the right subscriptions.
func TestFollowersAreToldNotAsking(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	opts := Options{Schema: schema, Poll: time.Hour} // no polling: what the followers learn, they are told
	a, b := openProcess(t, url, opts), openProcess(t, url, opts)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	sub, err := b.Subscribe(ctx, eventstore.Tagged("w3"), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	const writers, appends = 16, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range appends {
				if _, err := a.Append(ctx, fmt.Sprintf("s-%d", w), eventstore.Any, evs(1, fmt.Sprintf("w%d", w))); err != nil {
					t.Errorf("append %d of writer %d: %v", i, w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	head, err := a.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for seen < appends {
		batch, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("subscription on the other process, after %d of %d events: %v", seen, appends, err)
		}
		seen += len(batch)
	}
	for b.knownHead() < head {
		if ctx.Err() != nil {
			t.Fatalf("the other process knows head %d of %d", b.knownHead(), head)
		}
		time.Sleep(time.Millisecond)
	}
	commits := a.guessed.Load() + a.guessesFailed.Load()
	t.Logf("%d commits; stretches read: %d by the writing process, %d by the other", commits, a.stretchesRead.Load(), b.stretchesRead.Load())
	if got := b.stretchesRead.Load(); got > 3 {
		t.Errorf("the other process read %d stretches for %d commits: it should be told by the NOTIFYs", got, commits)
	}
	if got := a.stretchesRead.Load(); got > 2 {
		t.Errorf("the writing process read %d stretches for %d commits: its appenders should hand over to each other", got, commits)
	}
}
