package kafkabus

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func testPublisher(cfg Config, topic, txid string, partitions int32) PublisherConfig {
	return PublisherConfig{
		Config: cfg, Topic: topic, TransactionalID: txid, Partitions: partitions,
		MaxTxnEvents: 300, MaxBackoff: 500 * time.Millisecond,
	}
}

// Every event, written by concurrent writers on many streams while the
// publisher runs, lands in the topic once, in its stream's partition, in
// order.
func TestPublishExactlyOnceInOrder(t *testing.T) {
	cfg := testConfig(t)
	const partitions = 6
	topic := newTopic(t, cfg, partitions)
	st := openStore(t, t.TempDir())
	ctx := context.Background()

	writeEvents(t, ctx, st, "pre", 20, 2, 400) // published on start
	p := NewPublisher(st, testPublisher(cfg, topic, uniqueName(t, "tx"), partitions))
	stop := startPublisher(t, p)
	writeEvents(t, ctx, st, "live", 60, 8, 3000)
	h := head(t, st)
	waitFor(t, 20*time.Second, "the publisher to reach the head", func() bool { return p.LastPosition() == h })
	if lag, err := p.Lag(ctx); err != nil || lag != 0 {
		t.Fatalf("lag %d, %v", lag, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if p.Published() != h {
		t.Errorf("published %d events, head %d", p.Published(), h)
	}
	checkTopic(t, cfg, topic, readLog(t, st), partitions)
	last, err := LastPublished(ctx, cfg, topic)
	if err != nil || last != h {
		t.Fatalf("LastPublished = %d, %v; want %d", last, err, h)
	}
}

// A publisher stopped at random moments while writers append — mid
// transaction, between the store's commit and Kafka's — and started again
// leaves every position in the topic once: the next one resumes after what
// Kafka holds.
func TestPublishResumesAfterCancel(t *testing.T) {
	cfg := testConfig(t)
	const partitions = 4
	topic := newTopic(t, cfg, partitions)
	st := openStore(t, t.TempDir())
	txid := uniqueName(t, "tx")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))

	wctx, stopWriters := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for wctx.Err() == nil && werr == nil {
			werr = tryWriteEvents(wctx, st, "s", 30, 4, 40)
			time.Sleep(5 * time.Millisecond) // a steady stream, not a flood
		}
	}()
	var published uint64
	for round := range 6 {
		cfg := testPublisher(cfg, topic, txid, partitions)
		cfg.MaxTxnEvents = 50 + rng.IntN(200)
		p := NewPublisher(st, cfg)
		stop := startPublisher(t, p)
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		if err := stop(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		published += p.Published()
		t.Logf("round %d: published %d, last position %d, head %d", round, p.Published(), p.LastPosition(), head(t, st))
	}
	stopWriters()
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}

	p := NewPublisher(st, testPublisher(cfg, topic, txid, partitions))
	stop := startPublisher(t, p)
	// An append whose context the writers' stop cancelled may still
	// commit, so the head is read again on every check.
	waitFor(t, 20*time.Second, "the last publisher to reach the head", func() bool { return p.LastPosition() == head(t, st) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	published += p.Published()
	if h := head(t, st); published != h {
		t.Errorf("publishers committed %d events in all, head %d", published, h)
	}
	checkTopic(t, cfg, topic, readLog(t, st), partitions)
}

// A second publisher with the same transactional id takes over while the
// first is in the middle of a transaction (its records produced, its
// commit not yet sent): the new one fences the old, whose transaction is
// aborted and whose commit then fails with ErrFenced; the new one
// publishes the aborted range again, and the topic holds every position
// once.
func TestPublishZombieFenced(t *testing.T) {
	cfg := testConfig(t)
	const partitions = 4
	topic := newTopic(t, cfg, partitions)
	st := openStore(t, t.TempDir())
	ctx := context.Background()
	txid := uniqueName(t, "tx")

	writeEvents(t, ctx, st, "a", 20, 2, 500)
	zcfg := testPublisher(cfg, topic, txid, partitions)
	zcfg.MaxTxnEvents = 100
	zombie := NewPublisher(st, zcfg)
	stuck := make(chan [2]uint64, 1)
	release := make(chan struct{})
	var txns int
	zombie.beforeCommit = func(first, last uint64) {
		if txns++; txns == 3 {
			stuck <- [2]uint64{first, last}
			<-release
		}
	}
	zdone := make(chan error, 1)
	zctx, zcancel := context.WithCancel(ctx)
	defer zcancel()
	go func() { zdone <- zombie.Run(zctx) }()
	var rng [2]uint64
	select {
	case rng = <-stuck:
	case <-time.After(20 * time.Second):
		t.Fatal("the first publisher never reached its third commit")
	}
	t.Logf("first publisher stuck before committing positions %d-%d", rng[0], rng[1])

	successor := NewPublisher(st, testPublisher(cfg, topic, txid, partitions))
	stop := startPublisher(t, successor)
	waitFor(t, 20*time.Second, "the successor to publish", func() bool { return successor.LastPosition() == 500 })
	if got := successor.Published(); got != 500-(rng[0]-1) {
		t.Errorf("successor published %d events, want %d (from %d on)", got, 500-(rng[0]-1), rng[0])
	}
	close(release)
	select {
	case err := <-zdone:
		if !errors.Is(err, ErrFenced) {
			t.Fatalf("zombie Run returned %v, want ErrFenced", err)
		}
		t.Logf("zombie: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the zombie publisher was not fenced")
	}
	if zombie.LastPosition() >= rng[0] {
		t.Errorf("zombie believes it committed up to %d", zombie.LastPosition())
	}
	writeEvents(t, ctx, st, "b", 20, 2, 200) // the successor goes on
	waitFor(t, 20*time.Second, "the successor to publish more", func() bool { return successor.LastPosition() == 700 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkTopic(t, cfg, topic, readLog(t, st), partitions)
}

// memProgress is a Progress in memory.
type memProgress struct {
	mu  sync.Mutex
	pos uint64
}

func (m *memProgress) Load(context.Context) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pos, nil
}

func (m *memProgress) Save(_ context.Context, pos uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pos = max(m.pos, pos)
	return nil
}

// When retention has emptied every partition, what Kafka holds says
// nothing about how far the publisher got: the saved progress keeps it
// from publishing the whole log again.
func TestPublishAfterRetentionEmptiedTheTopic(t *testing.T) {
	cfg := testConfig(t)
	const partitions = 3
	topic := newTopic(t, cfg, partitions)
	st := openStore(t, t.TempDir())
	ctx := context.Background()
	txid := uniqueName(t, "tx")
	progress := &memProgress{}
	pcfg := testPublisher(cfg, topic, txid, partitions)
	pcfg.Progress = progress

	writeEvents(t, ctx, st, "old", 10, 2, 200)
	h := head(t, st)
	p := NewPublisher(st, pcfg)
	stop := startPublisher(t, p)
	waitFor(t, 20*time.Second, "the first publisher to reach the head", func() bool { return p.LastPosition() == h })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got, _ := progress.Load(ctx); got != h {
		t.Fatalf("saved progress %d, want %d", got, h)
	}
	deleteRecords(t, cfg, topic, 0) // retention: nothing left
	if last, err := LastPublished(ctx, cfg, topic); err != nil || last != 0 {
		t.Fatalf("LastPublished of the emptied topic = %d, %v", last, err)
	}
	if recs := readTopic(t, cfg, topic); len(recs) != 0 {
		t.Fatalf("the emptied topic reads %d records", len(recs))
	}

	writeEvents(t, ctx, st, "new", 10, 2, 100)
	h2 := head(t, st)
	p2 := NewPublisher(st, pcfg)
	stop = startPublisher(t, p2)
	waitFor(t, 20*time.Second, "the second publisher to reach the head", func() bool { return p2.LastPosition() == h2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if p2.Published() != h2-h {
		t.Fatalf("the second publisher published %d events, want only the %d new ones", p2.Published(), h2-h)
	}
	recs := readTopic(t, cfg, topic)
	for _, r := range recs {
		if r.Event.Position <= h {
			t.Fatalf("position %d, published before retention, was published again", r.Event.Position)
		}
	}
	if len(recs) != int(h2-h) {
		t.Fatalf("the topic holds %d events, want %d", len(recs), h2-h)
	}
}
