package pgstore

import (
	"context"
	"fmt"
	"strings"
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
	gotStreams, gotTags, listed := n.streamsAndTags()
	if !ok || !listed || n.head != 120 || n.from != 100 || n.sender != "me" ||
		len(gotStreams) != 2 || gotStreams[1] != streams[1] || len(gotTags) != 1 {
		t.Fatalf("parseNotice(%q) = %+v, %v; lists %q %v %v", payload, n, ok, gotStreams, gotTags, listed)
	}
	if _, ok := parseNotice("120 me"); ok {
		t.Fatal("a payload without its from parsed")
	}
	if n, ok := parseNotice("120 me 100"); !ok || n.lists != "" {
		t.Fatalf("a payload without lists: %+v, %v", n, ok)
	}
	if _, _, listed := (notice{lists: "{not json"}).streamsAndTags(); listed {
		t.Fatal("lists that do not parse were taken")
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
	// A waiter for a tag no one writes keeps both processes selective
	// (Notifier.Selective) throughout: they must learn each stretch's
	// streams and tags, which is what this test counts.
	// (Store.Changed also starts each one's follower, before the appends.)
	a.Changed(eventstore.Tagged("never"))
	b.Changed(eventstore.Tagged("never"))
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

// TestFollowerWakesAllWithoutReading: a process where no one waits for
// particular streams or tags (a cluster's write node: at most the whole
// log is followed there) publishes what another process wrote without
// finding out which streams and tags it holds, even when the NOTIFY
// payloads are too long to carry them — and once a subscription to one
// stream appears, reads them again so that it wakes.
func TestFollowerWakesAllWithoutReading(t *testing.T) {
	url, schema := testenv.URL(t), testenv.Schema(t)
	opts := Options{Schema: schema, Poll: time.Hour}
	a, b := openProcess(t, url, opts), openProcess(t, url, opts)
	b.Changed(eventstore.All()) // b follows the log from the start
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	all, err := b.Subscribe(ctx, eventstore.All(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	// Five events of sixteen 100-byte tags each: 8,000 bytes of tags, too
	// many for a notice's lists (maxNoticeLists).
	longTags := func(k int) []eventstore.NewEvent {
		out := make([]eventstore.NewEvent, 5)
		for i := range out {
			tags := make([]string, 16)
			for j := range tags {
				tags[j] = fmt.Sprintf("%d-%d-%d-%s", k, i, j, strings.Repeat("t", 90))
			}
			out[i] = eventstore.NewEvent{Type: "e", Tags: tags, Data: []byte("{}")}
		}
		return out
	}
	const appends = 20
	for k := range appends {
		if _, err := a.Append(ctx, fmt.Sprintf("s-%d", k), eventstore.Any, longTags(k)); err != nil {
			t.Fatal(err)
		}
	}
	for seen := 0; seen < appends*5; {
		batch, err := all.Next(ctx)
		if err != nil {
			t.Fatalf("the whole log on the other process, after %d of %d events: %v", seen, appends*5, err)
		}
		seen += len(batch)
	}
	if got := b.stretchesRead.Load(); got != 0 {
		t.Errorf("the other process read %d stretches with no one waiting for a stream or tag", got)
	}

	one, err := b.Subscribe(ctx, eventstore.OfStream("wanted"), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	// The subscription registers its waiter (Selective) before it reads;
	// an append that commits between the two is read, not woken for, and
	// then no stretch need be read. So the append comes a while after the
	// waiter, and a round the read took is tried again.
	for round := 1; ; round++ {
		nexts := nextLater(ctx, one)
		for !b.notify.Selective() {
			if ctx.Err() != nil {
				t.Fatal("the stream subscription never waited")
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		if _, err := a.Append(ctx, "wanted", eventstore.Any, longTags(appends+round)); err != nil {
			t.Fatal(err)
		}
		got := <-nexts
		if got.err != nil || len(got.evs) != 5 {
			t.Fatalf("the stream subscription: %d events, %v", len(got.evs), got.err)
		}
		if b.stretchesRead.Load() > 0 {
			return
		}
		if round == 3 {
			t.Fatal("a notice without lists woke a stream's subscription without the stretch being read, three times")
		}
	}
}
